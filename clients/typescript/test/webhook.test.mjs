import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { WebhookVerifier, WebhookError, parseSecret, sign, webhookHandler } from "../dist/index.js";

// The Standard Webhooks specification's published test vector, as its reference libraries
// test it (and urlflow's Go package does).
const vector = {
  secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
  id: "msg_p5jXN8AQM9LWM0D4loKWxJek",
  timestamp: 1614265330,
  body: '{"test": 2432232314}',
  signature: "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
};
const next = "whsec_bmV4dC1zZWNyZXQtb2YtdHdlbnR5LWZvdXItYnl0ZXM=";
const gone = "whsec_b3RoZXItc2VjcmV0LW9mLXR3ZW50eS1mb3VyLWJ5dGVz";

function headers(id, timestamp, signature) {
  return { "webhook-id": id, "webhook-timestamp": String(timestamp), "webhook-signature": signature };
}

test("signatures match the Standard Webhooks test vector", () => {
  assert.equal(sign(parseSecret(vector.secret), vector.id, vector.timestamp, vector.body), vector.signature);
  const v = new WebhookVerifier([vector.secret], { now: () => vector.timestamp + 60 });
  assert.throws(() => v.verify(headers(vector.id, vector.timestamp, vector.signature), vector.body), SyntaxError, "the vector's body has no type: not urlflow's");
});

test("a verifier with several secrets takes a signature of any, and only those", () => {
  const now = Math.floor(Date.now() / 1000);
  const body = JSON.stringify({ type: "elicitation.complete", data: { elicitation: { id: "E1", state: "complete" } } });
  const v = new WebhookVerifier([vector.secret, next]);
  const old = sign(parseSecret(vector.secret), "msg_1", now, body);
  const fresh = sign(parseSecret(next), "msg_2", now, body);
  assert.equal(v.verify(headers("msg_1", now, old), body).elicitation.id, "E1");
  assert.equal(v.verify(headers("msg_2", now, fresh), body).type, "elicitation.complete");
  const both = `${sign(parseSecret(gone), "msg_3", now, body)} ${sign(parseSecret(next), "msg_3", now, body)}`;
  assert.equal(v.verify(headers("msg_3", now, both), body).id, "msg_3");
  assert.throws(() => v.verify(headers("msg_4", now, sign(parseSecret(gone), "msg_4", now, body)), body), (e) => e instanceof WebhookError && e.kind === "signature");
});

test("a changed, stale, replayed or unsigned message is refused", () => {
  const now = 1_700_000_000;
  const v = new WebhookVerifier([vector.secret], { now: () => now });
  const key = parseSecret(vector.secret);
  const body = JSON.stringify({ type: "credential.deleted", data: { type: "credential.deleted", target: "github", userRef: "usr_x", actor: "user" } });
  const kind = (k) => (e) => e instanceof WebhookError && e.kind === k;
  assert.throws(() => v.verify(headers("m1", now, sign(key, "m1", now, body)), body.replace("github", "gitlab")), kind("signature"));
  assert.throws(() => v.verify(headers("m1", now - 301, sign(key, "m1", now - 301, body)), body), kind("stale"));
  assert.throws(() => v.verify(headers("m1", now + 301, sign(key, "m1", now + 301, body)), body), kind("stale"));
  assert.throws(() => v.verify(headers("", now, sign(key, "", now, body)), body), kind("signature"));
  assert.throws(() => v.verify(headers("m1", "12x", sign(key, "m1", now, body)), body), kind("signature"));
  const hook = v.verify(headers("m1", now, sign(key, "m1", now, body)), Buffer.from(body));
  assert.equal(hook.credential.target, "github");
  assert.throws(() => v.verify(headers("m1", now, sign(key, "m1", now, body)), body), kind("replayed"));
});

test("a secret that is not whsec_ and the base64 of 24 to 64 bytes is refused", () => {
  for (const bad of ["", "whsec_", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_c2hvcnQ=", "whsec_!!!!MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]) {
    assert.throws(() => parseSecret(bad), TypeError, bad);
  }
  assert.throws(() => new WebhookVerifier([]), TypeError);
});

test("the node:http handler answers 204, 401, a replay 204 once handled, and 500 when handling fails", async (t) => {
  const v = new WebhookVerifier([vector.secret]);
  const handled = [];
  let fail = false;
  const srv = createServer(webhookHandler(v, (hook) => {
    if (fail) throw new Error("down");
    handled.push(hook.id);
  }));
  await new Promise((resolve) => srv.listen(0, "127.0.0.1", resolve));
  t.after(() => srv.close());
  const url = `http://127.0.0.1:${srv.address().port}/hook`;
  const now = Math.floor(Date.now() / 1000);
  const body = JSON.stringify({ type: "elicitation.declined", data: { elicitation: { id: "E2" } } });
  const post = (id, sig) => fetch(url, { method: "POST", headers: headers(id, now, sig), body });
  const key = parseSecret(vector.secret);
  assert.equal((await post("m1", sign(key, "m1", now, body))).status, 204);
  assert.equal((await post("m1", sign(key, "m1", now, body))).status, 204);
  assert.equal((await post("m2", sign(parseSecret(next), "m2", now, body))).status, 401);
  fail = true;
  assert.equal((await post("m3", sign(key, "m3", now, body))).status, 500);
  assert.equal((await fetch(url)).status, 405);
  fail = false; // urlflow sends it again: handled now
  assert.equal((await post("m3", sign(key, "m3", now, body))).status, 204);
  assert.deepEqual(handled, ["m1", "m3"]);
});
