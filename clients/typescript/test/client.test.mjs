import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { Client, UrlflowError, retryAfter } from "../dist/index.js";

// A stand-in for urlflow: it records each request and answers with the next of answers.
async function standIn(t, answer) {
  const seen = [];
  const srv = createServer(async (req, res) => {
    let body = "";
    for await (const chunk of req) body += chunk;
    const r = { method: req.method, url: req.url, headers: req.headers, body: body ? JSON.parse(body) : undefined };
    seen.push(r);
    await answer(r, res, seen.length);
  });
  await new Promise((resolve) => srv.listen(0, "127.0.0.1", resolve));
  t.after(() => srv.close());
  return { url: `http://127.0.0.1:${srv.address().port}/urlflow`, seen };
}

function json(res, status, data, headers = {}) {
  res.writeHead(status, { "Content-Type": "application/json", ...headers }).end(JSON.stringify(data));
}

test("a create carries the key, the user's token and an idempotency key, and says whether it created", async (t) => {
  const { url, seen } = await standIn(t, (r, res, n) =>
    json(res, n === 1 ? 201 : 200, { status: "user_action_required", elicitation: { id: "E1", state: "pending", url: "http://u/e/E1" }, requestState: "rs" }));
  const c = new Client({ url, key: "urlflow_sk_K" });
  const first = await c.create({ token: "user-token" }, { slot: "demo_api_key", message: "Weather needs it.", metadata: { job: "7" } });
  const again = await c.create({ token: "user-token" }, { slot: "demo_api_key", idempotencyKey: "mine" });
  assert.equal(first.created, true);
  assert.equal(again.created, false);
  assert.equal(first.elicitation.url, "http://u/e/E1");
  const [a, b] = seen;
  assert.equal(a.url, "/urlflow/api/v1/elicitations");
  assert.equal(a.headers.authorization, "Bearer urlflow_sk_K");
  assert.equal(a.headers["urlflow-user-token"], "user-token");
  assert.match(a.headers["idempotency-key"], /^[0-9a-f-]{36}$/);
  assert.notEqual(a.headers["idempotency-key"], b.headers["idempotency-key"]);
  assert.equal(b.headers["idempotency-key"], "mine");
  assert.deepEqual(a.body, { slot: "demo_api_key", message: "Weather needs it.", metadata: { job: "7" } });
  assert.equal(b.body.idempotencyKey, undefined);
});

test("a user named by reference or subject goes in the body, never as a token", async (t) => {
  const { url, seen } = await standIn(t, (r, res) => json(res, 200, { status: 200, headers: {}, body: "", bodyEncoding: "text" }));
  const c = new Client({ url, key: "k" });
  await c.proxy({ ref: "usr_abc" }, { provider: "github", label: "work" }, { method: "GET", path: "/user" });
  await c.proxy({ subject: "alice" }, { slot: "s" }, { method: "GET", path: "/" });
  assert.equal(seen[0].body.userRef, "usr_abc");
  assert.equal(seen[0].body.label, "work");
  assert.equal(seen[0].headers["urlflow-user-token"], undefined);
  assert.equal(seen[1].body.user, "alice");
});

test("a proxy call sends bytes in base64 and reads the answer as text, JSON, bytes or a Response", async (t) => {
  const bytes = new Uint8Array([0, 1, 0xff, 0x80]);
  const { url, seen } = await standIn(t, (r, res, n) =>
    json(res, 200, n === 1
      ? { status: 201, headers: { "Content-Type": "application/json", "X-Ratelimit-Remaining": "41" }, body: '{"ok":true}', bodyEncoding: "text", attempts: 2 }
      : { status: 200, headers: { "Content-Type": "application/octet-stream" }, body: Buffer.from(bytes).toString("base64"), bodyEncoding: "base64" }));
  const c = new Client({ url, key: "k" });
  const got = await c.proxy({ token: "t" }, { slot: "s" }, { method: "POST", path: "/x", body: bytes, contentType: "application/octet-stream",
    query: { tag: ["a", "b"] }, headers: { "X-Request-Id": "r1" }, retries: 2, responseHeaders: ["X-RateLimit-*"] });
  assert.equal(seen[0].body.bodyEncoding, "base64");
  assert.equal(seen[0].body.body, Buffer.from(bytes).toString("base64"));
  assert.deepEqual(seen[0].body.query, { tag: ["a", "b"] });
  assert.deepEqual(seen[0].body.responseHeaders, ["X-RateLimit-*"]);
  assert.equal(got.ok, true);
  assert.deepEqual(got.json(), { ok: true });
  assert.equal(got.attempts, 2);
  const resp = got.toResponse();
  assert.equal(resp.status, 201);
  assert.equal(resp.headers.get("x-ratelimit-remaining"), "41");
  const binary = await c.proxy({ token: "t" }, { slot: "s" }, { method: "GET", path: "/file" });
  assert.deepEqual(binary.bytes(), bytes);
  assert.deepEqual(new Uint8Array(await binary.toResponse().arrayBuffer()), bytes);
});

test("a refusal is a UrlflowError with its reason; a 429 is sent again as Retry-After asks", async (t) => {
  const { url, seen } = await standIn(t, (r, res, n) => {
    if (n === 1) return json(res, 429, { error: "over the service's rate limit" }, { "Retry-After": "0" });
    if (n === 2) return json(res, 409, { error: "the user has no key stored", reason: "not_stored" });
    if (n === 3) return res.writeHead(502).end("<html>bad gateway</html>");
    return json(res, 429, { error: "over" }, { "Retry-After": "3600" });
  });
  const c = new Client({ url, key: "k" });
  await assert.rejects(c.proxy({ token: "t" }, { slot: "s" }, { method: "GET", path: "/" }),
    (e) => e instanceof UrlflowError && e.status === 409 && e.reason === "not_stored" && /no key stored/.test(e.message));
  assert.equal(seen.length, 2);
  await assert.rejects(c.get("E1"), (e) => e instanceof UrlflowError && e.status === 502 && e.reason === undefined);
  await assert.rejects(c.get("E1"), (e) => e instanceof UrlflowError && e.status === 429, "a wait of an hour is not waited");
});

test("retryAfter reads seconds and dates, and backs off without one", () => {
  assert.equal(retryAfter("2", 0), 2000);
  assert.equal(retryAfter("99999999999", 0), 31000);
  assert.equal(retryAfter(new Date(10_000).toUTCString(), 0, 5_000), 5000);
  assert.equal(retryAfter(null, 2), 4000);
  assert.equal(retryAfter("soon", 0), 1000);
});

test("wait long-polls until the elicitation ends", async (t) => {
  const { url, seen } = await standIn(t, (r, res, n) => json(res, 200, { id: "E1", state: n < 3 ? "pending" : "complete" }));
  const c = new Client({ url, key: "k" });
  const e = await c.wait("E1", { timeoutMs: 60_000 });
  assert.equal(e.state, "complete");
  assert.deepEqual(seen.map((r) => r.url), Array(3).fill("/urlflow/api/v1/elicitations/E1?wait=30"));
});

test("listing follows next; cancel, retry and answer send what urlflow reads", async (t) => {
  const { url, seen } = await standIn(t, (r, res) => {
    if (r.url.startsWith("/urlflow/api/v1/credentials")) {
      const page = new URL(r.url, "http://x").searchParams.get("cursor");
      return json(res, 200, page ? { credentials: [{ target: "b" }] } : { credentials: [{ target: "a" }], next: "c1" });
    }
    return json(res, 200, { id: "E1", state: "cancelled" });
  });
  const c = new Client({ url, key: "k" });
  const all = [];
  for await (const cred of c.allCredentials({ status: "locked" })) all.push(cred.target);
  assert.deepEqual(all, ["a", "b"]);
  assert.equal(seen[0].url, "/urlflow/api/v1/credentials?status=locked");
  assert.equal(seen[1].url, "/urlflow/api/v1/credentials?status=locked&cursor=c1");
  await c.cancel("E1", "no longer needed");
  await c.retry("E1", { fresh: true });
  await c.answer("E1", "accept");
  assert.deepEqual(seen.slice(2).map((r) => [r.url, r.body]), [
    ["/urlflow/api/v1/elicitations/E1/cancel", { reason: "no longer needed" }],
    ["/urlflow/api/v1/elicitations/E1/retry", { new: true }],
    ["/urlflow/api/v1/elicitations/E1/answer", { action: "accept" }],
  ]);
});

test("events resume from the last one read after the stream drops, and skip what they do not know", async (t) => {
  const { url, seen } = await standIn(t, (r, res, n) => {
    res.writeHead(200, { "Content-Type": "text/event-stream" });
    if (n === 1) {
      res.write(": keep-alive\n\n");
      res.write('id: 1-0\nevent: elicitation\ndata: {"event":"created","to":"pending","at":"t","elicitation":{"id":"E1"}}\n\n');
      res.write("id: 2-0\nevent: novelty\ndata: {}\n\n");
      res.write('id: 3-0\r\nevent: credential\r\ndata: {"type":"credential.stored",\r\ndata: "target":"github"}\r\n\r\n');
      res.write("id: 4-0\nevent: novelty\ndata: {}\n\n"); // the last read: a type skipped
      return res.end("id: 5-0\nevent: elicitation\ndata: {\"cut\":"); // dropped mid-event
    }
    res.end('id: 6-0\nevent: reset\ndata: {"reason":"lost"}\n\n');
  });
  const c = new Client({ url, key: "k" });
  const ctl = new AbortController();
  const got = [];
  for await (const ev of c.events({ lastEventId: "0-1", signal: ctl.signal, reconnectMs: 10 })) {
    got.push(ev);
    if (ev.type === "reset") ctl.abort();
  }
  assert.deepEqual(got.map((e) => [e.type, e.id]), [["elicitation", "1-0"], ["credential", "3-0"], ["reset", "6-0"]]);
  assert.equal(got[0].data.elicitation.id, "E1");
  assert.equal(got[1].data.target, "github");
  assert.equal(seen[0].headers["last-event-id"], "0-1");
  assert.equal(seen[1].headers["last-event-id"], "4-0", "the stream resumes after the last event read, skipped or not");
  assert.equal(seen[0].headers.accept, "text/event-stream");
});

test("a refused event stream is an error, not a loop", async (t) => {
  const { url } = await standIn(t, (r, res) => json(res, 401, { error: "unknown service key" }));
  const c = new Client({ url, key: "wrong" });
  await assert.rejects((async () => {
    for await (const ev of c.events({ reconnectMs: 10 })) void ev;
  })(), (e) => e instanceof UrlflowError && e.status === 401);
});

test("the proxy, release, status and deletion name the credential by slot or provider and label alone", async (t) => {
  const { url, seen } = await standIn(t, (r, res) => json(res, 200, { status: 200, headers: {}, body: "", bodyEncoding: "text" }));
  const c = new Client({ url, key: "k" });
  const need = { slot: "s", label: "work", message: "why", metadata: { a: "b" }, call: "forecast:x", offline: true, scopes: ["x"] };
  await c.proxy({ token: "t" }, need, { method: "GET", path: "/" });
  await c.release({ token: "t" }, need);
  await c.credentialStatus({ token: "t" }, need);
  await c.deleteCredential({ token: "t" }, need, "gone");
  assert.deepEqual(seen.map((r) => r.body), [
    { slot: "s", label: "work", method: "GET", path: "/" },
    { slot: "s", label: "work" },
    { slot: "s", label: "work", scopes: ["x"] },
    { slot: "s", label: "work", reason: "gone" },
  ]);
});
