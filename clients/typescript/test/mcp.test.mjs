import { test } from "node:test";
import assert from "node:assert/strict";
import { Client, Delegation, callOf } from "../dist/index.js";

test("callOf names the tool and its arguments whatever their keys' order", () => {
  assert.equal(callOf("forecast", { city: "Paris", days: 2 }), callOf("forecast", { days: 2, city: "Paris" }));
  assert.notEqual(callOf("forecast", { city: "Paris" }), callOf("forecast", { city: "Lyon" }));
  assert.match(callOf("forecast", {}), /^forecast:[A-Za-z0-9_-]{43}$/);
  assert.equal(callOf("x".repeat(300), {}).length, 200);
});

// A fake session server and urlflow that answer require's requests: what the client is
// told depends on its capabilities, and nothing is asked without the user's token.
function fakes({ urlMode, status }) {
  const asked = [];
  const server = {
    getClientCapabilities: () => (urlMode ? { elicitation: { url: {} } } : {}),
    getClientVersion: () => ({ name: "probe", version: "1" }),
    elicitInput: async (params) => { asked.push(params); return { action: "accept" }; },
    createElicitationCompletionNotifier: () => async () => {},
  };
  const fetch = async (url, init) => {
    const path = new URL(url).pathname;
    const e = { id: "E1", state: path.endsWith("/answer") ? "consented" : "pending", url: "http://urlflow/e/E1", expiresAt: new Date(Date.now() + 60_000).toISOString() };
    const body = path.endsWith("/elicitations") ? { status, elicitation: status === "stored" ? undefined : e } : { ...e, state: "declined" };
    return new Response(JSON.stringify(body), { status: path.endsWith("/elicitations") ? 201 : 200, headers: { "Content-Type": "application/json" } });
  };
  return { server, asked, delegation: new Delegation(new Client({ url: "http://urlflow", key: "k", fetch }), { pushWaitMs: 1000 }) };
}

test("require answers each kind of client", async () => {
  const extra = { authInfo: { token: "user" }, sendNotification: async () => {} };
  let f = fakes({ urlMode: true, status: "stored" });
  assert.ok((await f.delegation.require(f.server, extra, { slot: "s" })).credential);

  f = fakes({ urlMode: false, status: "user_action_required" });
  const open = await f.delegation.require(f.server, extra, { slot: "s" });
  assert.equal(open.result.structuredContent.status, "user_action_required");
  assert.match(open.result.content[0].text, /Open http:\/\/urlflow\/e\/E1/);
  assert.equal(f.asked.length, 0);

  f = fakes({ urlMode: true, status: "user_action_required" });
  const declined = await f.delegation.require(f.server, extra, { slot: "s" });
  assert.equal(f.asked[0].mode, "url");
  assert.equal(f.asked[0].elicitationId, "E1");
  assert.equal(declined.result.structuredContent.state, "declined");

  await assert.rejects(f.delegation.require(f.server, { sendNotification: async () => {} }, { slot: "s" }), /no bearer token/);
});
