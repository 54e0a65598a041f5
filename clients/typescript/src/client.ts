import { randomUUID } from "node:crypto";
import { UrlflowError } from "./errors.js";
import { parseEventStream, streamEvent } from "./events.js";
import type {
  CreateAnswer,
  CredentialList,
  CredentialStatus,
  Deletion,
  Elicitation,
  Need,
  ProxyRequest,
  ProxyResponse,
  StreamEvent,
} from "./types.js";
import { endedStates } from "./types.js";

/** How to reach urlflow. */
export interface ClientOptions {
  /** urlflow's public URL, for example http://127.0.0.1:8080. */
  url: string;
  /** The service's key (urlflow_sk_...), from `urlflow service-key`. */
  key: string;
  /** The fetch to use (the global one when absent). */
  fetch?: typeof fetch;
  /** How many times a request answered 429 is sent again, waiting what Retry-After asks (default 2). */
  rateLimitRetries?: number;
}

/**
 * Who the user is, as urlflow checks it: their access token for your MCP server (the
 * evidence of a tool call, checked by urlflow), your service's reference to them (only for
 * a credential they let your service use while away), or their subject (only for services
 * configured with assert_users).
 */
export type User = { token: string } | { ref: string } | { subject: string };

/** What a create asks besides the need. */
export interface CreateOptions extends Need {
  /** Why, on urlflow's pages. */
  message?: string;
  /** Ask again although a usable credential is stored. */
  replace?: boolean;
  /** Ask the user to let your service use it while they are away. */
  offline?: boolean;
  /** Your own strings, kept with the flow and the credential (at most 16). */
  metadata?: Record<string, string>;
  /** Your own name of the tool call it serves. */
  call?: string;
  /** The MCP client, as it named itself (shown as self-reported). */
  client?: { name: string; title?: string; version?: string };
  /** The requestState of a 2026-07-28 client's retry, and its answer's action. */
  requestState?: string;
  action?: "accept" | "decline" | "cancel";
  /** Sent as Idempotency-Key; a new random one when absent, so that a retry after a lost answer is safe. */
  idempotencyKey?: string;
}

/** A provider's access token or a slot's secret, released to a service allowed to receive it. */
export interface Released {
  kind: "secret" | "oauth";
  target: string;
  label?: string;
  userRef: string;
  secret?: string;
  parameters?: Record<string, string>;
  accessToken?: string;
  tokenType?: string;
  expiresAt?: string;
  scopes?: string[];
}

/** Filters of listCredentials. */
export interface ListOptions {
  target?: string;
  status?: CredentialStatus["status"];
  cursor?: string;
  limit?: number;
}

/** The longest wait a long-poll asks of urlflow, in seconds. */
const longPoll = 30;
/** The longest Retry-After this client honours, in milliseconds. */
const maxRateLimitWait = 30_000;

interface Sent {
  status: number;
  data: unknown;
}

/** The answer of the proxy: its fields, and the body as a fetch Response reads it. */
export class ProxyAnswer implements ProxyResponse {
  status!: number;
  headers!: Record<string, string>;
  body!: string;
  bodyEncoding!: "text" | "base64";
  convertedFrom?: string;
  redirected?: string;
  attempts?: number;

  constructor(r: ProxyResponse) {
    Object.assign(this, r);
  }

  /** Whether the API answered 2xx. */
  get ok(): boolean {
    return this.status >= 200 && this.status < 300;
  }

  /** The body's bytes. */
  bytes(): Uint8Array<ArrayBuffer> {
    return this.bodyEncoding === "base64" ? new Uint8Array(Buffer.from(this.body, "base64")) : new TextEncoder().encode(this.body);
  }

  /** The body as text. */
  text(): string {
    return this.bodyEncoding === "base64" ? new TextDecoder().decode(this.bytes()) : this.body;
  }

  /** The body parsed as JSON. */
  json<T = unknown>(): T {
    return JSON.parse(this.text()) as T;
  }

  /** The answer as a fetch Response. */
  toResponse(): Response {
    const status = this.status >= 200 && this.status <= 599 ? this.status : 502;
    const nullBody = [101, 204, 205, 304].includes(status);
    return new Response(nullBody ? null : this.bytes(), { status, headers: this.headers });
  }
}

/** urlflow's delegation API, as a delegating service uses it. */
export class Client {
  readonly #base: URL;
  readonly #key: string;
  readonly #fetch: typeof fetch;
  readonly #rateLimitRetries: number;

  constructor(opts: ClientOptions) {
    if (!opts.url) throw new TypeError("delegate: url is required: urlflow's public URL");
    if (!opts.key) throw new TypeError("delegate: key is required: the service's key (urlflow service-key)");
    this.#base = new URL(opts.url.endsWith("/") ? opts.url : opts.url + "/");
    this.#key = opts.key;
    this.#fetch = opts.fetch ?? globalThis.fetch;
    this.#rateLimitRetries = opts.rateLimitRetries ?? 2;
  }

  /** Asks urlflow for the credential need: stored already, or an elicitation that asks the user. */
  async create(user: User, opts: CreateOptions, signal?: AbortSignal): Promise<CreateAnswer> {
    const { idempotencyKey, ...rest } = opts;
    const sent = await this.#send("POST", "elicitations", {
      user,
      body: rest,
      headers: { "Idempotency-Key": idempotencyKey ?? randomUUID() },
      signal,
    });
    return { ...(sent.data as Omit<CreateAnswer, "created">), created: sent.status === 201 };
  }

  /** Reads an elicitation; with wait (seconds, at most 60), answers as soon as it ends. */
  async get(id: string, opts: { wait?: number; signal?: AbortSignal } = {}): Promise<Elicitation> {
    const query = opts.wait ? `?wait=${Math.min(Math.max(Math.ceil(opts.wait), 0), 60)}` : "";
    return (await this.#send("GET", `elicitations/${encodeURIComponent(id)}${query}`, { signal: opts.signal })).data as Elicitation;
  }

  /**
   * Waits until the elicitation ends or timeoutMs passes, and returns it as it then stands.
   * urlflow's long poll counts whole seconds: what is left under a second is waited here,
   * before the last read, so that a short wait is a pause and not a burst of requests.
   */
  async wait(id: string, opts: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<Elicitation> {
    const deadline = Date.now() + (opts.timeoutMs ?? 10 * 60_000);
    for (;;) {
      const left = deadline - Date.now();
      const secs = Math.max(0, Math.min(longPoll, Math.floor(left / 1000)));
      if (secs === 0 && left > 0) await sleep(left, opts.signal);
      const e = await this.get(id, { wait: secs, signal: opts.signal });
      if (endedStates.includes(e.state) || secs === 0) return e;
    }
  }

  /** Cancels a running elicitation of the service. */
  async cancel(id: string, reason?: string): Promise<Elicitation> {
    return (await this.#send("POST", `elicitations/${encodeURIComponent(id)}/cancel`, { body: reason ? { reason } : {} })).data as Elicitation;
  }

  /** Retries an ended elicitation: a new one when fresh is set. */
  async retry(id: string, opts: { fresh?: boolean } = {}): Promise<Elicitation> {
    return (await this.#send("POST", `elicitations/${encodeURIComponent(id)}/retry`, { body: opts.fresh ? { new: true } : {} })).data as Elicitation;
  }

  /** Records the MCP client's answer to the URL-mode request (an accept is consent, never success). */
  async answer(id: string, action: "accept" | "decline" | "cancel"): Promise<Elicitation> {
    return (await this.#send("POST", `elicitations/${encodeURIComponent(id)}/answer`, { body: { action } })).data as Elicitation;
  }

  /** Calls the API of need with the user's credential injected by urlflow, which never shows it. */
  async proxy(user: User, need: Need, req: ProxyRequest): Promise<ProxyAnswer> {
    const body: Record<string, unknown> = { ...target(need), ...req };
    if (req.body instanceof Uint8Array) {
      body.body = Buffer.from(req.body).toString("base64");
      body.bodyEncoding = "base64";
    }
    return new ProxyAnswer((await this.#send("POST", "proxy", { user, body })).data as ProxyResponse);
  }

  /** The credential itself, for a service configured with release. Protect it. */
  async release(user: User, need: Need): Promise<Released> {
    return (await this.#send("POST", "release", { user, body: target(need) })).data as Released;
  }

  /** How the credential need stands for the user; only reads. */
  async credentialStatus(user: User, need: Need): Promise<CredentialStatus> {
    return (await this.#send("POST", "credentials/status", { user, body: { ...target(need), ...(need.scopes ? { scopes: need.scopes } : {}) } })).data as CredentialStatus;
  }

  /** Deletes the user's credential need (revoked at the provider where it can be). */
  async deleteCredential(user: User, need: Need, reason?: string): Promise<Deletion> {
    return (await this.#send("POST", "credentials/delete", { user, body: { ...target(need), ...(reason ? { reason } : {}) } })).data as Deletion;
  }

  /** Deletes every credential the service holds for the user, for when their account ends. */
  async deleteAllCredentials(user: User, reason?: string): Promise<{ userRef: string; cancelled: string[]; deleted: Deletion[] }> {
    const sent = await this.#send("POST", "credentials/delete-all", { user, body: reason ? { reason } : {} });
    return sent.data as { userRef: string; cancelled: string[]; deleted: Deletion[] };
  }

  /** One page of the service's credentials, across its users. */
  async listCredentials(opts: ListOptions = {}): Promise<CredentialList> {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(opts)) if (v !== undefined && v !== "") q.set(k, String(v));
    const query = q.size ? `?${q}` : "";
    return (await this.#send("GET", `credentials${query}`, {})).data as CredentialList;
  }

  /** Every credential of the service, page after page. */
  async *allCredentials(opts: Omit<ListOptions, "cursor"> = {}): AsyncGenerator<CredentialStatus> {
    let cursor: string | undefined;
    do {
      const page = await this.listCredentials({ ...opts, cursor });
      yield* page.credentials;
      cursor = page.next;
    } while (cursor);
  }

  /**
   * The service's events, as they happen: changes of its elicitations and of the
   * credentials it holds. It reconnects after a dropped connection from the last event
   * read (from lastEventId at first), until signal aborts.
   */
  async *events(opts: { lastEventId?: string; signal?: AbortSignal; reconnectMs?: number } = {}): AsyncGenerator<StreamEvent> {
    let last = opts.lastEventId ?? "";
    while (!opts.signal?.aborted) {
      try {
        const resp = await this.#fetch(new URL("api/v1/events", this.#base), {
          headers: { Authorization: `Bearer ${this.#key}`, Accept: "text/event-stream", ...(last ? { "Last-Event-ID": last } : {}) },
          signal: opts.signal,
        });
        if (!resp.ok || !resp.body) throw await refusal(resp);
        for await (const raw of parseEventStream(resp.body)) {
          // Every event moves the position, also one of a type this package skips.
          last = raw.id || last;
          const ev = streamEvent(raw);
          if (ev) yield ev;
        }
      } catch (err) {
        if (opts.signal?.aborted) return;
        // A refused stream (a wrong key) does not get better by trying again.
        if (err instanceof UrlflowError && err.status !== 429 && err.status < 500) throw err;
      }
      await sleep(opts.reconnectMs ?? 1000, opts.signal);
    }
  }

  /** Sends one request to the API, again after a 429 as its Retry-After asks. */
  async #send(method: string, path: string, opts: { user?: User; body?: unknown; headers?: Record<string, string>; signal?: AbortSignal | undefined }): Promise<Sent> {
    const headers: Record<string, string> = { Authorization: `Bearer ${this.#key}`, Accept: "application/json", ...opts.headers };
    let body = opts.body;
    if (opts.user) {
      if ("token" in opts.user) headers["Urlflow-User-Token"] = opts.user.token;
      else if ("ref" in opts.user) body = { ...(body as object), userRef: opts.user.ref };
      else body = { ...(body as object), user: opts.user.subject };
    }
    if (body !== undefined) headers["Content-Type"] = "application/json";
    for (let attempt = 0; ; attempt++) {
      const resp = await this.#fetch(new URL("api/v1/" + path, this.#base), {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: opts.signal,
      });
      if (resp.status === 429 && attempt < this.#rateLimitRetries) {
        const wait = retryAfter(resp.headers.get("Retry-After"), attempt);
        if (wait <= maxRateLimitWait) {
          await resp.body?.cancel();
          await sleep(wait, opts.signal);
          continue;
        }
      }
      if (resp.status < 200 || resp.status > 299) throw await refusal(resp);
      const text = await resp.text();
      return { status: resp.status, data: text ? JSON.parse(text) : undefined };
    }
  }
}

/** The slot or provider of need, and its account label: what names a stored credential. */
function target(need: Need): Need {
  return Object.fromEntries(Object.entries({ slot: need.slot, provider: need.provider, label: need.label }).filter(([, v]) => v !== undefined && v !== ""));
}

/** The UrlflowError of a refused answer. */
async function refusal(resp: Response): Promise<UrlflowError> {
  let message = resp.statusText || `HTTP ${resp.status}`;
  let reason: string | undefined;
  try {
    const data = (await resp.json()) as { error?: unknown; reason?: unknown };
    if (typeof data.error === "string" && data.error) message = data.error;
    if (typeof data.reason === "string" && data.reason) reason = data.reason;
  } catch {
    // Not urlflow's JSON: the status says it.
  }
  return new UrlflowError(resp.status, message, reason);
}

/** The wait a Retry-After asks (seconds or an HTTP date), or 1, 2, 4 seconds by attempt. */
export function retryAfter(value: string | null, attempt: number, now = Date.now()): number {
  if (value && /^\d+$/.test(value.trim())) return Math.min(Number(value.trim()), maxRateLimitWait / 1000 + 1) * 1000;
  const at = value ? Date.parse(value) : NaN;
  if (!Number.isNaN(at)) return Math.max(at - now, 0);
  return 1000 * 2 ** attempt;
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve();
    }, { once: true });
  });
}
