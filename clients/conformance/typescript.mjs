#!/usr/bin/env node
// Runs the delegation conformance suite (cases.json) with the TypeScript package
// @urlflow/delegate (clients/typescript, built) against a running urlflow: each step is one
// call of the package's API, and its outcome one line of JSON on standard output, which the
// suite's harness (e2e) compares with the step's expectation. The line protocol is in
// README.md.
//
//   URLFLOW_URL=... URLFLOW_SERVICE_KEY=... node typescript.mjs cases.json < users.json
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { Client, UrlflowError, WebhookError, WebhookVerifier } from "../typescript/dist/index.js";

const [path] = process.argv.slice(2);
if (!path) {
  console.error("usage: node typescript.mjs cases.json (URLFLOW_URL and URLFLOW_SERVICE_KEY set; the users' tokens as the first line of standard input)");
  process.exit(2);
}
const suite = JSON.parse(readFileSync(path, "utf8"));
const client = new Client({ url: process.env.URLFLOW_URL, key: process.env.URLFLOW_SERVICE_KEY });
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const emit = (v) => process.stdout.write(JSON.stringify(v) + "\n");

const { tokens } = JSON.parse((await lines.next()).value);
for (const [i, c] of suite.cases.entries()) {
  const saved = {};
  const state = { saved, verifier: undefined };
  for (const [j, raw] of c.steps.entries()) {
    const step = substitute(raw, saved);
    if (step.op === "user") {
      emit({ case: i, step: j, user: { url: saved.url ?? "" } });
      if ((await lines.next()).done) throw new Error("the harness did not say that the user finished");
      continue;
    }
    const outcome = await run(step, state).catch(failure);
    if (step.save) saved[step.save] = savedValue(outcome);
    emit({ case: i, step: j, outcome });
  }
}
emit({ end: true, cases: suite.cases.length });
process.exit(0);

/** Replaces each string "$name" in v by the value saved as name (the expectation is the harness's). */
function substitute(v, saved) {
  if (Array.isArray(v)) return v.map((x) => substitute(x, saved));
  if (v && typeof v === "object") return Object.fromEntries(Object.entries(v).filter(([k]) => k !== "expect").map(([k, x]) => [k, substitute(x, saved)]));
  if (typeof v === "string" && v.startsWith("$") && v.slice(1) in saved) return saved[v.slice(1)];
  return v;
}

/** What a step's save keeps of its outcome: the elicitation's ID, the ID, or the position of the last event. */
function savedValue(o) {
  return o?.elicitation?.id ?? o?.id ?? o?.last ?? "";
}

/** The outcome of a failed call: urlflow's refusal (status and reason), or the error's text. */
function failure(err) {
  if (err instanceof UrlflowError) return { error: { status: err.status, ...(err.reason ? { reason: err.reason } : {}) } };
  return { error: { message: String(err?.message ?? err) } };
}

function userOf(step) {
  return { token: tokens[step.user] ?? "" };
}

async function run(step, state) {
  switch (step.op) {
    case "create": {
      const { created, ...rest } = await client.create(userOf(step), {
        ...step.need, message: step.message, metadata: step.metadata, call: step.call, idempotencyKey: step.idempotencyKey,
      });
      if (rest.elicitation?.url) state.saved.url = rest.elicitation.url;
      return { ...rest, new: created };
    }
    case "get":
      return client.get(step.id);
    case "wait":
      return client.wait(step.id, { timeoutMs: step.timeoutMs });
    case "answer":
      return client.answer(step.id, step.action);
    case "cancel":
      return client.cancel(step.id, step.reason);
    case "retry":
      return client.retry(step.id, { fresh: step.fresh });
    case "proxy": {
      const answer = await client.proxy(userOf(step), step.need, step.request);
      const out = { ...answer };
      try {
        out.json = answer.json();
      } catch {
        // not JSON
      }
      return out;
    }
    case "status":
      return client.credentialStatus(userOf(step), step.need);
    case "delete":
      return client.deleteCredential(userOf(step), step.need, step.reason);
    case "events":
      return events(step);
    case "webhookVerifier":
      try {
        state.verifier = new WebhookVerifier(step.secrets, { now: () => step.now });
      } catch (err) {
        return { error: { kind: "secret", message: err.message } };
      }
      return {};
    case "verifyWebhook":
      try {
        const hook = state.verifier.verify(new Headers(step.headers), step.body);
        return "credential" in hook ? { id: hook.id, type: hook.type, credential: hook.credential } : { id: hook.id, type: hook.type, elicitation: hook.elicitation };
      } catch (err) {
        return { error: { kind: err instanceof WebhookError ? err.kind : "body", message: err.message } };
      }
  }
  throw new Error(`no such op ${step.op}`);
}

/**
 * Reads the event stream from step.after and returns the events it kept (those of
 * step.elicitation when set, and resets) until one matches step.until, step.count were
 * kept, or 20 seconds passed.
 */
async function events(step) {
  const stop = new AbortController();
  const timer = setTimeout(() => stop.abort(), 20_000);
  const kept = [];
  let last = "";
  try {
    for await (const ev of client.events({ lastEventId: step.after, signal: stop.signal })) {
      const out = { type: ev.type };
      if (ev.type === "elicitation") {
        if (step.elicitation && ev.data.elicitation.id !== step.elicitation) continue;
        Object.assign(out, { event: ev.data.event, to: ev.data.to, elicitationId: ev.data.elicitation.id }, ev.data.from ? { from: ev.data.from } : {});
      } else if (ev.type === "credential") {
        if (step.elicitation) continue;
        Object.assign(out, { credentialType: ev.data.type, target: ev.data.target });
      }
      kept.push(out);
      last = ev.id;
      if ((step.count && kept.length >= step.count) || (step.until && Object.entries(step.until).every(([k, v]) => out[k] === v))) {
        return { events: kept, last };
      }
    }
    return { events: kept, last, timedOut: true };
  } finally {
    clearTimeout(timer);
    stop.abort();
  }
}
