import { test } from "node:test";
import assert from "node:assert/strict";
import { Client, Delegation } from "../dist/index.js";

// A fake urlflow for requireV2: each create answers with the next of creates (status,
// state), and each request is recorded; a wait answers the elicitation in waitState.
function fakeUrlflow(creates, waitState = "pending") {
  const sent = [];
  const fetch = async (url, init) => {
    const u = new URL(url);
    const body = init.body ? JSON.parse(init.body) : undefined;
    sent.push({ method: init.method, path: u.pathname, search: u.search, body });
    const e = (state) => ({ id: "E1", state, url: "http://urlflow/e/E1", expiresAt: new Date(Date.now() + 60_000).toISOString() });
    let answer;
    if (u.pathname.endsWith("/elicitations")) {
      const [status, state] = creates.shift();
      answer = { status, elicitation: status === "stored" ? undefined : e(state), requestState: `RS${sent.length}` };
    } else answer = e(waitState);
    return new Response(JSON.stringify(answer), { status: 200, headers: { "Content-Type": "application/json" } });
  };
  return { sent, fetch };
}

// A fake v2 server (McpServer's .server) of protocol version, and a tool handler's context.
function fakeServer(version, { urlMode = true } = {}) {
  const asked = [];
  return {
    asked,
    getNegotiatedProtocolVersion: () => version,
    getClientCapabilities: () => (urlMode ? { elicitation: { url: {} } } : {}),
    getClientVersion: () => ({ name: "probe", version: "2" }),
    elicitInput: async (params) => { asked.push(params); return { action: "accept" }; },
    createElicitationCompletionNotifier: () => async () => {},
  };
}

function ctx({ state, responses, sessionId, token = "user" } = {}) {
  return {
    sessionId,
    mcpReq: { signal: new AbortController().signal, inputResponses: responses, requestState: () => state, notify: async () => {} },
    http: token ? { authInfo: { token, clientId: "", scopes: [] } } : undefined,
  };
}

const need = { slot: "demo_api_key", call: "forecast:x" };

test("a 2026-07-28 call gets input_required with urlflow's URL and requestState, and no elicitationId", async () => {
  const u = fakeUrlflow([["user_action_required", "pending"]]);
  const d = new Delegation(new Client({ url: "http://urlflow", key: "k", fetch: u.fetch }));
  const { result, credential } = await d.requireV2(fakeServer("2026-07-28"), ctx(), need);
  assert.equal(credential, undefined);
  assert.equal(result.resultType, "input_required");
  assert.equal(result.requestState, "RS1");
  assert.deepEqual(Object.keys(result.inputRequests), ["auth"]);
  const req = result.inputRequests.auth;
  assert.equal(req.method, "elicitation/create");
  assert.equal(req.params.mode, "url");
  assert.equal(req.params.url, "http://urlflow/e/E1");
  assert.equal(req.params.elicitationId, undefined);
  assert.equal(u.sent[0].body.requestState, undefined);
  assert.equal(u.sent[0].body.client.name, "probe");
});

test("a 2026-07-28 retry sends urlflow the requestState and the answer, waits for the user, and gets the credential", async () => {
  const u = fakeUrlflow([["user_action_required", "consented"], ["stored"]], "complete");
  const d = new Delegation(new Client({ url: "http://urlflow", key: "k", fetch: u.fetch }), { retryWaitMs: 1000 });
  const { credential } = await d.requireV2(fakeServer("2026-07-28"), ctx({ state: "RS1", responses: { auth: { action: "accept" } } }), need);
  assert.ok(credential);
  assert.deepEqual(u.sent.map((s) => s.method + " " + s.path), ["POST /api/v1/elicitations", "GET /api/v1/elicitations/E1", "POST /api/v1/elicitations"]);
  assert.equal(u.sent[0].body.requestState, "RS1");
  assert.equal(u.sent[0].body.action, "accept");
  assert.equal(u.sent[2].body.action, undefined, "the answer is recorded once");
});

test("a 2026-07-28 retry whose user has not finished gets input_required again, with the new requestState", async () => {
  const u = fakeUrlflow([["user_action_required", "consented"], ["user_action_required", "consented"]]);
  const d = new Delegation(new Client({ url: "http://urlflow", key: "k", fetch: u.fetch }), { retryWaitMs: 10 });
  const { result } = await d.requireV2(fakeServer("2026-07-28"), ctx({ state: "RS1", responses: { auth: { action: "accept" } } }), need);
  assert.equal(result.resultType, "input_required");
  assert.equal(result.requestState, "RS3");
  // A wait under a second is a pause, then one read: not a burst of reads until it passes.
  assert.equal(u.sent.filter((s) => s.method === "GET").length, 1);
  assert.equal(u.sent[1].search, "", "the last read of a short wait does not hold");
});

test("an answer that is not accept, decline or cancel is not passed on", async () => {
  const u = fakeUrlflow([["ended", "declined"]]);
  const d = new Delegation(new Client({ url: "http://urlflow", key: "k", fetch: u.fetch }));
  const { result } = await d.requireV2(fakeServer("2026-07-28"), ctx({ state: "RS1", responses: { auth: { action: "stored!" } } }), need);
  assert.equal(u.sent[0].body.action, undefined);
  assert.equal(result.structuredContent.state, "declined");
});

test("without URL mode, and on a stateless 2025 request, the user is told to open the link", async () => {
  for (const [version, opts, sessionId] of [["2026-07-28", { urlMode: false }], ["2025-11-25", {}, undefined]]) {
    const u = fakeUrlflow([["user_action_required", "pending"]]);
    const d = new Delegation(new Client({ url: "http://urlflow", key: "k", fetch: u.fetch }));
    const server = fakeServer(version, opts);
    const { result } = await d.requireV2(server, ctx({ sessionId }), need);
    assert.equal(result.structuredContent.status, "user_action_required", version);
    assert.match(result.content[0].text, /Open http:\/\/urlflow\/e\/E1/);
    assert.equal(server.asked.length, 0);
  }
});

test("a 2025 session is asked with elicitation/create, or gets the v2 package's -32042 error", async () => {
  let u = fakeUrlflow([["user_action_required", "pending"]], "declined");
  let d = new Delegation(new Client({ url: "http://urlflow", key: "k", fetch: u.fetch }), { pushWaitMs: 10 });
  const server = fakeServer("2025-11-25");
  const { result } = await d.requireV2(server, ctx({ sessionId: "S1" }), need);
  assert.equal(server.asked[0].elicitationId, "E1");
  assert.equal(result.structuredContent.state, "declined");

  u = fakeUrlflow([["user_action_required", "pending"]]);
  d = new Delegation(new Client({ url: "http://urlflow", key: "k", fetch: u.fetch }), { style: "error" });
  const { UrlElicitationRequiredError } = await import("@modelcontextprotocol/server");
  await assert.rejects(d.requireV2(fakeServer("2025-11-25"), ctx({ sessionId: "S1" }), need), (e) => e instanceof UrlElicitationRequiredError && e.code === -32042);
});

test("requireV2 asks nothing without the user's token", async () => {
  const u = fakeUrlflow([]);
  const d = new Delegation(new Client({ url: "http://urlflow", key: "k", fetch: u.fetch }));
  await assert.rejects(d.requireV2(fakeServer("2026-07-28"), ctx({ token: "" }), need), /no bearer token/);
  assert.equal(u.sent.length, 0);
});
