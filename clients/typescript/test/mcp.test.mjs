import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { Client, Delegation, WebhookVerifier, callOf, parseSecret, sign } from "../dist/index.js";

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

test("a session that asks twice for one running elicitation is told of its end once", async (t) => {
  let notified = 0;
  const server = {
    getClientCapabilities: () => ({ elicitation: { url: {} } }),
    getClientVersion: () => undefined,
    elicitInput: async () => ({ action: "accept" }),
    createElicitationCompletionNotifier: () => async () => { notified++; },
  };
  const fakeFetch = async () => new Response(JSON.stringify({ status: "user_action_required", elicitation: { id: "E1", state: "pending", url: "http://urlflow/e/E1" } }),
    { status: 200, headers: { "Content-Type": "application/json" } });
  const delegation = new Delegation(new Client({ url: "http://urlflow", key: "k", fetch: fakeFetch }), { style: "error" });
  const extra = { authInfo: { token: "user" }, sendNotification: async () => {} };
  for (let i = 0; i < 2; i++) {
    await assert.rejects(delegation.require(server, extra, { slot: "s" }), (e) => e.code === -32042 && e.elicitations[0].url === "http://urlflow/e/E1");
  }
  const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
  const srv = createServer(delegation.webhookHandler(new WebhookVerifier([secret])));
  await new Promise((resolve) => srv.listen(0, "127.0.0.1", resolve));
  t.after(() => srv.close());
  const now = Math.floor(Date.now() / 1000);
  const body = JSON.stringify({ type: "elicitation.complete", data: { elicitation: { id: "E1", state: "complete" } } });
  const resp = await fetch(`http://127.0.0.1:${srv.address().port}/`, {
    method: "POST", body,
    headers: { "webhook-id": "msg_E1", "webhook-timestamp": String(now), "webhook-signature": sign(parseSecret(secret), "msg_E1", now, body) },
  });
  assert.equal(resp.status, 204);
  assert.equal(notified, 1);
});
