import { createHash } from "node:crypto";
import { Client, type User } from "./client.js";
import type { ProxyAnswer } from "./client.js";
import { UrlflowError } from "./errors.js";
import type { Elicitation, Need, ProxyRequest } from "./types.js";
import { endedStates } from "./types.js";
import type { CredentialEvent } from "./types.js";
import { webhookHandler, type WebhookVerifier } from "./webhook.js";

// The MCP side: one call in a tool handler that returns the user's credential, or what the
// tool answers instead, the way the calling client understands. require serves servers on
// the TypeScript MCP SDK v1 (@modelcontextprotocol/sdk, McpServer: protocol 2025-11-25);
// requireV2 serves servers on its v2 server package (@modelcontextprotocol/server: protocol
// 2026-07-28, and 2025-11-25 where it serves that era). The SDKs' objects are used through
// the few methods below, so that this package loads an SDK only where it throws the SDK's
// URL-elicitation-required error (style "error").

/** The methods of a session's Server (McpServer's .server) that require uses. */
export interface SessionServer {
  getClientCapabilities(): { elicitation?: { url?: object } } | undefined;
  getClientVersion(): { name: string; title?: string; version?: string } | undefined;
  elicitInput(params: { mode: "url"; url: string; elicitationId: string; message: string }, options?: { signal?: AbortSignal }): Promise<{ action: string }>;
  createElicitationCompletionNotifier(elicitationId: string): () => Promise<void>;
}

/** The methods of a v2 server (McpServer's .server of @modelcontextprotocol/server) that requireV2 uses. */
export interface V2Server extends SessionServer {
  /** The protocol revision of the request being served (2026-07-28), or of the 2025 session. */
  getNegotiatedProtocolVersion(): string | undefined;
}

/** The parts of a v2 tool handler's context argument that requireV2 uses. */
export interface V2Context {
  /** Set on a 2025 session; a stateless 2025 request and a 2026-07-28 request have none. */
  sessionId?: string;
  mcpReq: {
    signal?: AbortSignal;
    _meta?: { progressToken?: string | number };
    /** A 2026-07-28 retry's answers, by the keys of the input_required result's requests. */
    inputResponses?: Record<string, unknown>;
    /** A 2026-07-28 retry's requestState (the raw string: urlflow verifies its own). */
    requestState(): unknown;
    notify(notification: { method: string; params: Record<string, unknown> }): Promise<void>;
  };
  http?: { authInfo?: { token: string } };
}

/** The parts of a tool handler's extra argument that require uses. */
export interface ToolExtra {
  authInfo?: { token: string };
  signal?: AbortSignal;
  _meta?: { progressToken?: string | number };
  sendNotification(notification: { method: string; params: Record<string, unknown> }): Promise<void>;
}

/** What a tool needs, and what the user is told. */
export interface ToolNeed extends Need {
  /** Why, on urlflow's pages. */
  message?: string;
  /** Ask the user to let your server use it while they are away. */
  offline?: boolean;
  /** Your own strings, kept with the flow and the credential. */
  metadata?: Record<string, string>;
  /** The tool and its arguments, to tell calls apart (any string of yours). */
  call?: string;
}

/** A tool result, as the SDK takes it. */
export interface ToolResult {
  content: { type: "text"; text: string }[];
  structuredContent: Record<string, unknown>;
  [more: string]: unknown;
}

/** A 2026-07-28 tool result that asks the client for input before it calls again. */
export interface InputRequiredResult {
  resultType: "input_required";
  inputRequests: Record<string, { method: "elicitation/create"; params: { mode: "url"; url: string; message: string } }>;
  requestState?: string;
  [more: string]: unknown;
}

/** The user's credential, used through urlflow's proxy. */
export class Credential {
  readonly #client: Client;
  readonly #user: User;
  readonly need: Need;

  constructor(client: Client, user: User, need: Need) {
    this.#client = client;
    this.#user = user;
    this.need = { ...need };
  }

  /** Calls the API with the credential injected by urlflow. */
  call(req: ProxyRequest): Promise<ProxyAnswer> {
    return this.#client.proxy(this.#user, this.need, req);
  }
}

/** How require answers 2025-11-25 clients with URL mode. */
export interface DelegationOptions {
  /**
   * "push" (default): send elicitation/create and wait, bounded, for the user. "error":
   * throw the URL-elicitation-required error (-32042); the client gets
   * notifications/elicitation/complete once the user has finished (run follow, or serve
   * webhookHandler) and calls the tool again.
   */
  style?: "push" | "error";
  /** How long a push-style call waits for the user without a progress token (default 50 s). */
  pushWaitMs?: number;
  /** How long a 2026-07-28 retry waits for the user without a progress token before it asks again (default 25 s). */
  retryWaitMs?: number;
  /** With a progress token: a progress notification this often while waiting (default 15 s)... */
  progressIntervalMs?: number;
  /** ...until the elicitation's deadline, at most this long (default 10 minutes). */
  progressWaitLimitMs?: number;
  /** Where failures that do not fail the call are told (console.warn by default). */
  log?: (message: string, detail?: unknown) => void;
}

/** The outcome of require: the credential, or the tool's answer instead of it. */
export type Requirement = { credential: Credential; result?: undefined } | { credential?: undefined; result: ToolResult };

/** The outcome of requireV2: the credential, or the tool's answer instead of it (input_required too). */
export type RequirementV2 = { credential: Credential; result?: undefined } | { credential?: undefined; result: ToolResult | InputRequiredResult };

/** Delegation of a server's tools to urlflow: require in each tool handler, and follow. */
export class Delegation {
  readonly client: Client;
  readonly #opts: Required<DelegationOptions>;
  /** Elicitation ID → the sessions owed its end, each once, with its notifier. */
  readonly #owed = new Map<string, Map<SessionServer, () => Promise<void>>>();

  constructor(client: Client, opts: DelegationOptions = {}) {
    this.client = client;
    this.#opts = {
      style: opts.style ?? "push",
      pushWaitMs: opts.pushWaitMs ?? 50_000,
      retryWaitMs: opts.retryWaitMs ?? 25_000,
      progressIntervalMs: opts.progressIntervalMs ?? 15_000,
      progressWaitLimitMs: opts.progressWaitLimitMs ?? 10 * 60_000,
      log: opts.log ?? ((message, detail) => console.warn(`delegate: ${message}`, detail ?? "")),
    };
  }

  /**
   * Returns the credential the tool's user has stored with urlflow for need, or, when there
   * is none yet, the result the tool returns instead, for the calling client: with URL mode
   * and style "push", after elicitation/create and a bounded wait for the user; with style
   * "error", it throws the SDK's URL-elicitation-required error (-32042), which McpServer
   * passes to the client as it is; without URL mode, a result that tells the user to open
   * the link and call again. The user is the one whose bearer token came with the call
   * (extra.authInfo.token): urlflow checks it.
   */
  async require(server: SessionServer, extra: ToolExtra, need: ToolNeed): Promise<Requirement> {
    return this.#require2025(server, extra, need, async () => (await import("@modelcontextprotocol/sdk/types.js" as string)).UrlElicitationRequiredError);
  }

  /**
   * require for servers on the TypeScript MCP SDK v2 (@modelcontextprotocol/server): server
   * is the McpServer's .server, ctx the tool handler's context. A 2026-07-28 request gets an
   * input_required result with urlflow's URL and requestState, and its retry (with the
   * client's answer) the credential once the user has finished: the retry waits for the
   * user (retryWaitMs, or with progress notifications until the elicitation's deadline when
   * it carries a progress token), then answers with the credential, the honest outcome, or
   * input_required again. A 2025-11-25 request on a session is answered as require does
   * (style "error" throws the v2 package's UrlElicitationRequiredError); a stateless
   * 2025-11-25 request (createMcpHandler's fallback) has no session to be asked in or told
   * the end in, and gets the text that tells the user to open the link and call again.
   */
  async requireV2(server: V2Server, ctx: V2Context, need: ToolNeed): Promise<RequirementV2> {
    const extra: ToolExtra = {
      authInfo: ctx.http?.authInfo,
      signal: ctx.mcpReq.signal,
      _meta: ctx.mcpReq._meta,
      sendNotification: (n) => ctx.mcpReq.notify(n),
    };
    if (!modernVersion(server.getNegotiatedProtocolVersion())) {
      const errorClass = async () => (await import("@modelcontextprotocol/server" as string)).UrlElicitationRequiredError;
      return this.#require2025(server, extra, need, errorClass, !ctx.sessionId);
    }
    const state = ctx.mcpReq.requestState();
    const retry = typeof state === "string" && state !== "";
    const answered = ctx.mcpReq.inputResponses?.[inputKey] as { action?: unknown } | undefined;
    const action = retry && ["accept", "decline", "cancel"].includes(answered?.action as string) ? (answered?.action as "accept" | "decline" | "cancel") : undefined;
    const user = userOf(extra);
    const opts = { ...need, ...clientOf(server), ...(retry ? { requestState: state, action } : {}) };
    const answer = await this.client.create(user, opts, extra.signal);
    if (answer.status === "stored") return { credential: new Credential(this.client, user, need) };
    const e = answer.elicitation;
    if (answer.status === "ended" || !e) return { result: outcomeResult(e) };
    if (!server.getClientCapabilities()?.elicitation?.url) return { result: openItResult(e) };
    if (!retry) return { result: inputRequired(e, need, answer.requestState) };
    // The client answered and came back: wait a while for the user before asking again.
    await this.#waitFor(extra, e.id, e.url ?? "", this.#opts.retryWaitMs);
    const again = await this.client.create(user, { ...opts, action: undefined }, extra.signal); // the action is recorded already
    if (again.status === "stored") return { credential: new Credential(this.client, user, need) };
    if (again.status === "ended" || !again.elicitation) return { result: outcomeResult(again.elicitation) };
    return { result: inputRequired(again.elicitation, need, again.requestState) };
  }

  /**
   * Answers a 2025-11-25 call: with URL mode, push or the -32042 error (of the class that
   * errorClass loads); without URL mode or without a session (sessionless), the text that
   * tells the user to open the link.
   */
  async #require2025(server: SessionServer, extra: ToolExtra, need: ToolNeed, errorClass: () => Promise<new (p: unknown[]) => Error>, sessionless = false): Promise<Requirement> {
    const user = userOf(extra);
    const answer = await this.client.create(user, { ...need, ...clientOf(server) }, extra.signal);
    if (answer.status === "stored") return { credential: new Credential(this.client, user, need) };
    const e = answer.elicitation;
    if (answer.status === "ended" || !e) return { result: outcomeResult(e) };
    if (sessionless || !server.getClientCapabilities()?.elicitation?.url) return { result: openItResult(e) };
    const params = { mode: "url" as const, url: e.url ?? "", elicitationId: e.id, message: message(need) };
    if (this.#opts.style === "error") {
      this.#owe(e.id, server);
      throw new (await errorClass())([params]);
    }
    return this.#push(server, extra, user, need, params);
  }

  /** Sends elicitation/create, reports the client's answer (consent, never success), and waits. */
  async #push(server: SessionServer, extra: ToolExtra, user: User, need: ToolNeed, params: { mode: "url"; url: string; elicitationId: string; message: string }): Promise<Requirement> {
    const id = params.elicitationId;
    this.#owe(id, server);
    try {
      const res = await server.elicitInput(params, { signal: extra.signal });
      await this.client.answer(id, res.action as "accept" | "decline" | "cancel").catch((err: unknown) => {
        // 409: the flow moved on meanwhile (the user was quicker); anything else fails the call.
        if (!(err instanceof UrlflowError && err.status === 409)) throw err;
      });
    } catch (err) {
      if (err instanceof UrlflowError) throw err;
      // No answer is not an answer: the user may still finish in the browser.
      this.#opts.log(`elicitation/create of ${id} failed; waiting for the user anyway`, err);
    }
    const cur = await this.#waitFor(extra, id, params.url, this.#opts.pushWaitMs);
    if (!endedStates.includes(cur.state)) return { result: waitingResult({ ...cur, url: cur.url ?? params.url }) };
    await this.#settle(cur); // the notification before the result
    if (cur.state !== "complete") return { result: outcomeResult(cur) };
    const again = await this.client.create(user, { slot: need.slot, provider: need.provider, label: need.label, scopes: need.scopes, offline: need.offline, metadata: need.metadata }, extra.signal);
    if (again.status !== "stored") return { result: openItResult(again.elicitation) }; // removed meanwhile
    return { credential: new Credential(this.client, user, need) };
  }

  /** Waits for the user: with progress notifications when the call has a progress token, else at most boundedMs. */
  async #waitFor(extra: ToolExtra, id: string, url: string, boundedMs: number): Promise<Elicitation> {
    const token = extra._meta?.progressToken;
    if (token === undefined) return this.client.wait(id, { timeoutMs: boundedMs, signal: extra.signal });
    const until = Date.now() + this.#opts.progressWaitLimitMs;
    for (let step = 1; ; step++) {
      const cur = await this.client.wait(id, { timeoutMs: Math.min(this.#opts.progressIntervalMs, until - Date.now()), signal: extra.signal });
      const deadline = Math.min(until, Date.parse(cur.expiresAt) || until);
      if (endedStates.includes(cur.state) || Date.now() >= deadline || extra.signal?.aborted) return cur;
      await extra
        .sendNotification({ method: "notifications/progress", params: { progressToken: token, progress: step, message: `Waiting for you to finish in the browser: ${url}` } })
        .catch((err: unknown) => this.#opts.log(`progress of ${id} not sent`, err));
    }
  }

  /** Records that the session of server is owed the end of elicitation id (once, however often it asks). */
  #owe(id: string, server: SessionServer): void {
    const sessions = this.#owed.get(id) ?? new Map<SessionServer, () => Promise<void>>();
    if (!sessions.has(server)) sessions.set(server, server.createElicitationCompletionNotifier(id));
    this.#owed.set(id, sessions);
  }

  /** Sends the sessions owed e's end the completion notification, once e has ended. */
  async #settle(e: Elicitation | undefined): Promise<void> {
    if (!e || !endedStates.includes(e.state)) return;
    const sessions = this.#owed.get(e.id);
    this.#owed.delete(e.id);
    for (const notify of sessions?.values() ?? []) await notify().catch((err: unknown) => this.#opts.log(`completion of ${e.id} not sent`, err));
  }

  /**
   * Follows urlflow's event stream until signal aborts, and sends each session the end of
   * its elicitations (style "error" needs it, or webhookHandler; a push-style call that
   * returned before its user finished does too). After a reset, it reads every owed
   * elicitation again.
   */
  async follow(signal?: AbortSignal): Promise<void> {
    for await (const ev of this.client.events({ signal })) {
      if (ev.type === "elicitation") await this.#settle(ev.data.elicitation);
      else if (ev.type === "reset") {
        for (const id of [...this.#owed.keys()]) await this.#settle(await this.client.get(id).catch(() => undefined));
      }
    }
  }

  /** The webhook endpoint, instead of follow: it verifies each message and settles its elicitation. */
  webhookHandler(verifier: WebhookVerifier, onCredential?: (ev: CredentialEvent) => void | Promise<void>) {
    return webhookHandler(verifier, async (hook) => {
      if ("elicitation" in hook) await this.#settle(hook.elicitation);
      else await onCredential?.(hook.credential);
    });
  }
}

/** The key of the one input request of a 2026-07-28 input_required result. */
const inputKey = "auth";

/** The first protocol revision whose clients retry a call with its input requests answered. */
const firstModernVersion = "2026-07-28";

/** Whether version (a protocol revision, a date) is 2026-07-28 or later. */
function modernVersion(version: string | undefined): boolean {
  return !!version && /^\d{4}-\d{2}-\d{2}$/.test(version) && version >= firstModernVersion;
}

/** The user whose bearer token came with the call: urlflow's evidence of who they are. */
function userOf(extra: ToolExtra): User {
  const token = extra.authInfo?.token;
  if (!token) throw new Error("delegate: the call carries no bearer token of its user (authInfo.token): urlflow needs it as evidence of who the user is");
  return { token };
}

/** The calling client's name for urlflow's pages, as the session or the request names it. */
function clientOf(server: SessionServer): { client?: { name: string; title?: string; version?: string } } {
  const info = server.getClientVersion();
  return info ? { client: { name: info.name, title: info.title, version: info.version } } : {};
}

/**
 * The input_required result that asks a 2026-07-28 client to send its user to e. Its
 * URL-mode request has no elicitationId: that revision's request has none, and no
 * completion notification refers to it.
 */
function inputRequired(e: Elicitation, need: Need, requestState: string | undefined): InputRequiredResult {
  return {
    resultType: "input_required",
    inputRequests: { [inputKey]: { method: "elicitation/create", params: { mode: "url", url: e.url ?? "", message: message(need) } } },
    ...(requestState ? { requestState } : {}),
  };
}

/** The digest of a tool call (its name and canonical arguments), for ToolNeed.call. */
export function callOf(tool: string, args: unknown): string {
  const canonical = JSON.stringify(sortKeys(args ?? null));
  const call = `${tool}:${createHash("sha256").update(canonical).digest("base64url")}`;
  return call.length > 200 ? call.slice(-200) : call;
}

function sortKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v && typeof v === "object") return Object.fromEntries(Object.keys(v).sort().map((k) => [k, sortKeys((v as Record<string, unknown>)[k])]));
  return v;
}

function message(need: Need): string {
  const what = need.slot || `${need.provider} account`;
  return `Open this link in your browser to provide your ${what} (this tool needs it). It is entered on urlflow, never here.`;
}

function result(status: string, text: string, e?: Elicitation): ToolResult {
  const structured: Record<string, unknown> = { status };
  if (e) {
    structured.elicitationId = e.id;
    structured.state = e.state;
    if (e.url) {
      structured.url = e.url;
      structured.expiresAt = e.expiresAt;
    }
  }
  return { content: [{ type: "text", text }], structuredContent: structured };
}

function openItResult(e?: Elicitation): ToolResult {
  if (!e?.url) return result("user_action_required", "The credential this tool needs is not available yet. Call the tool again.", e);
  return result("user_action_required", `This tool needs a credential that you enter on urlflow, in your own browser. Open ${e.url} (you sign in there; the link alone grants nothing), then call the tool again.`, e);
}

function waitingResult(e: Elicitation): ToolResult {
  return result("user_action_required", `Still waiting for you to finish at ${e.url}. Call the tool again once you are done.`, e);
}

function outcomeResult(e?: Elicitation): ToolResult {
  if (!e) return result("ended", "The request for the credential ended without it. Call the tool again to ask again.");
  return result(e.state, `The request for the credential ended: ${e.state}. Nothing was stored. Call the tool again to ask again.`, e);
}
