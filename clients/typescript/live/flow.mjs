// A whole delegated flow of the package against a running `urlflow dev`, as the end-to-end
// test (e2e/typescript_test.go) drives it: URLFLOW_URL is urlflow, URLFLOW_RESOURCE the demo
// service's resource (URLFLOW_DEV_DEMO_RESOURCE), URLFLOW_USER the development user. It
// prints one JSON line per step; at {"event":"open","url":...} the test has the user enter
// the demo key in Chromium. It exits 0 after {"event":"done"}, 1 after {"event":"error"}.
import assert from "node:assert/strict";
import { Client, UrlflowError } from "../dist/index.js";

const base = process.env.URLFLOW_URL;
const resource = process.env.URLFLOW_RESOURCE;
const name = process.env.URLFLOW_USER ?? "alice";
const say = (event, more = {}) => console.log(JSON.stringify({ event, ...more }));

async function dev(path) {
  const resp = await fetch(new URL(path, base));
  assert.equal(resp.status, 200, `${path}: ${resp.status}`);
  return resp.json();
}

async function main() {
  const { key } = await dev("/dev/service-key?service=demo");
  const { token } = await dev(`/dev/token?user=${name}&resource=${encodeURIComponent(resource)}`);
  const c = new Client({ url: base, key });
  const user = { token };
  const need = { slot: "demo_api_key" };

  // Follow the service's events from now on, in the background.
  const stop = new AbortController();
  const events = [];
  const following = (async () => {
    for await (const ev of c.events({ signal: stop.signal })) events.push(ev);
  })();
  await new Promise((resolve) => setTimeout(resolve, 300)); // the stream is open

  assert.equal((await c.credentialStatus(user, need)).status, "not_stored");
  await assert.rejects(c.proxy(user, need, { method: "GET", path: "/whoami" }), (e) => e instanceof UrlflowError && e.status === 409 && e.reason === "not_stored");

  const created = await c.create(user, { ...need, message: "The TypeScript package needs your demo key.", metadata: { job: "ts-1" }, idempotencyKey: `ts-${Date.now()}` });
  assert.equal(created.status, "user_action_required");
  assert.equal(created.created, true);
  const id = created.elicitation.id;
  const replayed = await c.create(user, { ...need, idempotencyKey: "another-key" });
  assert.equal(replayed.elicitation.id, id, "the same user, service and target: the running flow");
  say("open", { url: created.elicitation.url });

  const ended = await c.wait(id, { timeoutMs: 120_000 });
  assert.equal(ended.state, "complete");
  const stored = await c.create(user, need);
  assert.equal(stored.status, "stored");

  const whoami = await c.proxy(user, need, { method: "GET", path: "/whoami" });
  assert.equal(whoami.status, 200);
  assert.match(whoami.json().account, /^demo-[0-9a-f]{8}$/);
  const bytes = new Uint8Array([0, 1, 2, 0xfe, 0xff]);
  const echo = await c.proxy(user, need, { method: "POST", path: "/echo", body: bytes, contentType: "application/octet-stream",
    query: { tag: ["a", "b"] }, headers: { "X-Request-Id": "ts-42" } });
  const seen = echo.json();
  assert.deepEqual(seen.query.tag, ["a", "b"]);
  assert.equal(seen.headers["X-Request-Id"], "ts-42");
  assert.match(seen.headers.Authorization, /^(Bearer )?\[redacted\]$/, "the key is redacted from what the API echoes");

  const status = await c.credentialStatus(user, need);
  assert.equal(status.status, "stored");
  assert.deepEqual(status.metadata, { job: "ts-1" });
  const listed = [];
  for await (const cred of c.allCredentials({ target: "demo_api_key" })) listed.push(cred.userRef);
  assert.ok(listed.includes(status.userRef), "the listing holds the user's credential");

  // Asked again and cancelled; then deleted.
  const again = await c.create(user, { ...need, replace: true });
  assert.equal((await c.cancel(again.elicitation.id, "no longer needed")).state, "cancelled");
  assert.equal((await c.deleteCredential(user, need, "the TypeScript test is done")).deleted, true);
  assert.equal((await c.credentialStatus(user, need)).status, "not_stored");

  // The stream told of all of it.
  const deadline = Date.now() + 10_000;
  const has = () =>
    events.some((e) => e.type === "elicitation" && e.data.elicitation.id === id && e.data.to === "complete") &&
    events.some((e) => e.type === "elicitation" && e.data.elicitation.id === again.elicitation.id && e.data.to === "cancelled") &&
    events.some((e) => e.type === "credential" && e.data.type === "credential.stored" && e.data.userRef === status.userRef) &&
    events.some((e) => e.type === "credential" && e.data.type === "credential.deleted" && e.data.actor === "service");
  while (!has() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
  stop.abort();
  await following;
  assert.ok(has(), `the event stream told of the flow, the cancel, the store and the deletion: ${JSON.stringify(events.map((e) => [e.type, e.data?.to ?? e.data?.type]))}`);
  say("done", { events: events.length });
}

main().then(
  () => process.exit(0),
  (err) => {
    say("error", { message: String(err?.stack ?? err) });
    process.exit(1);
  },
);
