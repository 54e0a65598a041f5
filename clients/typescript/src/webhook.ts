import { createHmac, timingSafeEqual } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { CredentialEvent, Elicitation } from "./types.js";

// urlflow's webhooks are sent the Standard Webhooks way (https://www.standardwebhooks.com):
// a JSON body and three headers, webhook-id (the same in every attempt of one message),
// webhook-timestamp (Unix seconds of the attempt) and webhook-signature ("v1," and the
// base64 HMAC-SHA256 of "id.timestamp.body" under the secret; several, space separated,
// while urlflow's secret rotates).

/** Starts a webhook secret; the base64 of its bytes follows. */
export const secretPrefix = "whsec_";

/** How far a timestamp may be from the receiver's clock, in seconds, by default. */
export const defaultTolerance = 5 * 60;

/** Why a webhook did not verify: "signature", "stale" or "replayed". */
export class WebhookError extends Error {
  readonly kind: "signature" | "stale" | "replayed";

  constructor(kind: "signature" | "stale" | "replayed") {
    super(
      kind === "signature"
        ? "webhook: no valid signature"
        : kind === "stale"
          ? "webhook: timestamp out of tolerance"
          : "webhook: this message was received before",
    );
    this.name = "WebhookError";
    this.kind = kind;
  }
}

/** A verified webhook: an elicitation of the service ended, or a credential it holds changed. */
export type Webhook =
  | { id: string; type: `elicitation.${string}`; elicitation: Elicitation }
  | { id: string; type: CredentialEvent["type"]; credential: CredentialEvent };

/** Returns the bytes of a webhook secret ("whsec_" and the base64 of 24 to 64 bytes). */
export function parseSecret(secret: string): Buffer {
  const trimmed = secret.trim();
  const key = trimmed.startsWith(secretPrefix) ? Buffer.from(trimmed.slice(secretPrefix.length), "base64") : Buffer.alloc(0);
  // Buffer.from ignores what is not base64: check that it read all of it.
  if (key.length < 24 || key.length > 64 || key.toString("base64") !== trimmed.slice(secretPrefix.length)) {
    throw new TypeError(`webhook secret: want "${secretPrefix}" and the base64 of 24 to 64 bytes`);
  }
  return key;
}

/** The webhook-signature of the message id sent at timestamp (Unix seconds) with body, under key. */
export function sign(key: Uint8Array, id: string, timestamp: number, body: string | Uint8Array): string {
  const mac = createHmac("sha256", key).update(`${id}.${timestamp}.`).update(body).digest("base64");
  return `v1,${mac}`;
}

/** Header lookup that takes node:http's, fetch's and plain objects' headers. */
type Headers = Record<string, string | string[] | undefined> | { get(name: string): string | null };

function header(h: Headers, name: string): string {
  const v = typeof h.get === "function" ? (h as { get(name: string): string | null }).get(name) : (h as Record<string, unknown>)[name];
  return Array.isArray(v) ? String(v[0] ?? "") : typeof v === "string" ? v : "";
}

/**
 * Verifies urlflow's webhooks signed with any of its secrets (give the old and the new one
 * while urlflow's secret rotates), and refuses a message it verified before within the
 * tolerance: urlflow sends a message again when it did not see the answer, so answer a
 * replay with 2xx and do not act on it twice. A server of several replicas behind one URL
 * sees a replay refused only by the replica that verified the first copy.
 */
export class WebhookVerifier {
  readonly #keys: Buffer[];
  readonly #tolerance: number;
  readonly #now: () => number;
  readonly #seen = new Map<string, number>();

  constructor(secrets: string[], opts: { toleranceSeconds?: number; now?: () => number } = {}) {
    if (secrets.length === 0) throw new TypeError("webhook: no secret to verify with");
    this.#keys = secrets.map(parseSecret);
    this.#tolerance = opts.toleranceSeconds ?? defaultTolerance;
    this.#now = opts.now ?? (() => Date.now() / 1000);
  }

  /** Forgets that the message id was verified, so that urlflow's next attempt of it verifies: for a message that was not handled. */
  forget(id: string): void {
    this.#seen.delete(id);
  }

  /** Verifies the webhook of headers and body (the raw bytes, as received) and returns it. */
  verify(headers: Headers, body: string | Uint8Array): Webhook {
    const id = header(headers, "webhook-id");
    const ts = header(headers, "webhook-timestamp");
    if (!id || !/^\d+$/.test(ts)) throw new WebhookError("signature");
    const timestamp = Number(ts);
    const sigs = header(headers, "webhook-signature").split(" ").filter(Boolean).map((s) => Buffer.from(s));
    const signed = this.#keys.some((key) => {
      const want = Buffer.from(sign(key, id, timestamp, body));
      return sigs.some((sig) => sig.length === want.length && timingSafeEqual(sig, want));
    });
    if (!signed) throw new WebhookError("signature");
    const now = this.#now();
    if (Math.abs(now - timestamp) > this.#tolerance) throw new WebhookError("stale");
    const msg = JSON.parse(typeof body === "string" ? body : new TextDecoder().decode(body)) as { type?: unknown; data?: Record<string, unknown> };
    if (typeof msg.type !== "string") throw new SyntaxError("webhook: the body is not urlflow's: no type");
    for (const [seen, at] of this.#seen) {
      if (at < now - 2 * this.#tolerance) this.#seen.delete(seen); // stale by now anyway
    }
    if (this.#seen.has(id)) throw new WebhookError("replayed");
    this.#seen.set(id, timestamp);
    if (msg.type.startsWith("credential.")) {
      return { id, type: msg.type as CredentialEvent["type"], credential: msg.data as unknown as CredentialEvent };
    }
    return { id, type: msg.type as `elicitation.${string}`, elicitation: msg.data?.elicitation as Elicitation };
  }
}

/** The most a webhook's body may be, in bytes. */
const maxBody = 1 << 20;

/**
 * A node:http (and Express) handler of urlflow's webhook: it verifies each message and
 * hands it to onWebhook, then answers 204; a message that does not verify gets 401, a
 * replay 204 without onWebhook. When onWebhook fails, the answer is 500 and urlflow sends
 * the message again later.
 */
export function webhookHandler(verifier: WebhookVerifier, onWebhook: (hook: Webhook) => void | Promise<void>) {
  return async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    if (req.method !== "POST") {
      res.writeHead(405, { Allow: "POST" }).end();
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of req) {
      size += (chunk as Buffer).length;
      if (size > maxBody) {
        res.writeHead(413).end();
        return;
      }
      chunks.push(chunk as Buffer);
    }
    let hook: Webhook;
    try {
      hook = verifier.verify(req.headers, Buffer.concat(chunks));
    } catch (err) {
      const replayed = err instanceof WebhookError && err.kind === "replayed";
      res.writeHead(replayed ? 204 : err instanceof WebhookError ? 401 : 400).end();
      return;
    }
    try {
      await onWebhook(hook);
    } catch {
      verifier.forget(hook.id); // not handled: urlflow's next attempt must be
      res.writeHead(500).end();
      return;
    }
    res.writeHead(204).end();
  };
}
