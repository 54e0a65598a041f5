// Shared plumbing of client-v1.mjs and client-v2.mjs: flags, the line protocol on
// stdout/stdin, and the traffic log. Nothing here depends on an MCP SDK.
import { appendFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';

// ---- stdout: one JSON object per line ----------------------------------------------------

// The test that reads stdout has gone: nothing left to report to.
process.stdout.on('error', err => process.exit(err?.code === 'EPIPE' ? 2 : 1));

export function emit(event) {
    process.stdout.write(JSON.stringify(event) + '\n');
}

// describeError turns anything thrown into a JSON-safe object for {"event":"error"}.
export function describeError(err) {
    if (!(err instanceof Error)) {
        return { message: String(err) };
    }
    const out = { message: err.message, name: err.name };
    if (err.code !== undefined) out.code = err.code;
    if (err.data !== undefined) out.data = err.data;
    if (err.cause instanceof Error) out.cause = err.cause.message;
    return out;
}

// fail prints {"event":"error",...} and exits non-zero. Used for every unexpected error.
export function fail(err) {
    emit({ event: 'error', ...describeError(err) });
    process.exit(1);
}

// ---- flags ---------------------------------------------------------------------------

const COMMON_OPTIONS = {
    url: { type: 'string' },
    token: { type: 'string' },
    // Instead of --token: the SDK's own authorization (oauth.mjs, README.md).
    oauth: { type: 'boolean', default: false },
    // With --oauth: clientMetadata.scope, the SDK's last resort for `scope` (after the
    // WWW-Authenticate scope and the protected resource metadata's scopes_supported).
    'oauth-scope': { type: 'string' },
    'url-mode': { type: 'boolean', default: false },
    tool: { type: 'string' },
    args: { type: 'string', default: '{}' },
    then: { type: 'string' },
    'then-args': { type: 'string', default: '{}' },
    traffic: { type: 'string' },
    name: { type: 'string' },
    // Per-request timeout of the SDK (ms). Tool calls may wait for the user for minutes.
    'timeout-ms': { type: 'string', default: String(15 * 60 * 1000) },
    // Results whose structuredContent.status is one of these make the client wait for a
    // stdin command ("retry" calls the same tool again, "continue" goes on).
    'await-retry-on': { type: 'string', default: 'user_action_required' },
    // After {"event":"done"}: keep the connection (and its notification stream) open and
    // keep printing events until stdin says "exit" or closes.
    hold: { type: 'boolean', default: false }
};

export function parseFlags(extraOptions, defaultName) {
    const { values } = parseArgs({ options: { ...COMMON_OPTIONS, ...extraOptions }, strict: true, allowPositionals: false });
    if (!values.url) throw new Error('--url is required');
    if (!values.tool) throw new Error('--tool is required');
    if (values.oauth && values.token) throw new Error('--oauth and --token exclude each other');
    if (values['oauth-scope'] !== undefined && !values.oauth) throw new Error('--oauth-scope needs --oauth');
    const flags = {
        ...values,
        name: values.name ?? defaultName,
        urlMode: values['url-mode'],
        toolArgs: parseJSONFlag('--args', values.args),
        thenArgs: parseJSONFlag('--then-args', values['then-args']),
        timeoutMs: Number(values['timeout-ms']),
        awaitRetryOn: new Set(values['await-retry-on'].split(',').map(s => s.trim()).filter(Boolean))
    };
    if (!Number.isFinite(flags.timeoutMs) || flags.timeoutMs <= 0) throw new Error('--timeout-ms must be a positive number');
    return flags;
}

function parseJSONFlag(flag, text) {
    try {
        const v = JSON.parse(text);
        if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new Error('not a JSON object');
        return v;
    } catch (err) {
        throw new Error(`${flag}: ${err.message}`);
    }
}

// ---- stdin: commands, one per line ------------------------------------------------------

const lines = [];
const lineWaiters = [];
let stdinClosed = false;
let stdinStarted = false;

function startStdin() {
    if (stdinStarted) return;
    stdinStarted = true;
    const rl = createInterface({ input: process.stdin, terminal: false });
    rl.on('line', line => {
        const cmd = line.trim();
        if (cmd === '') return;
        const w = lineWaiters.shift();
        if (w) w.resolve(cmd);
        else lines.push(cmd);
    });
    rl.on('close', () => {
        stdinClosed = true;
        for (const w of lineWaiters.splice(0)) w.reject(new Error('stdin closed while waiting for a command'));
    });
}

// nextCommand resolves with the next non-empty stdin line; rejects if stdin closes first.
export function nextCommand() {
    startStdin();
    if (lines.length > 0) return Promise.resolve(lines.shift());
    if (stdinClosed) return Promise.reject(new Error('stdin closed while waiting for a command'));
    return new Promise((resolve, reject) => lineWaiters.push({ resolve, reject }));
}

// waitForExit resolves on a stdin line "exit" or when stdin closes (used by --hold).
export async function waitForExit() {
    for (;;) {
        let cmd;
        try {
            cmd = await nextCommand();
        } catch {
            return;
        }
        if (cmd === 'exit') return;
        emit({ event: 'error', message: `unknown command ${JSON.stringify(cmd)} (expected "exit")`, fatal: false });
    }
}

// ---- completion notifications ----------------------------------------------------------

// Completions remembers every notifications/elicitation/complete so that a waiter that
// starts late still sees it.
export class Completions {
    constructor() {
        this.seen = new Set();
        this.waiters = new Map();
    }
    add(id) {
        this.seen.add(id);
        for (const resolve of this.waiters.get(id) ?? []) resolve();
        this.waiters.delete(id);
    }
    wait(id) {
        if (this.seen.has(id)) return Promise.resolve();
        return new Promise(resolve => {
            const list = this.waiters.get(id) ?? [];
            list.push(resolve);
            this.waiters.set(id, list);
        });
    }
}

// ---- traffic log -------------------------------------------------------------------------

// trafficFetch wraps fetch so that every request body and every response body (streamed
// SSE included, as it arrives) is appended to file. Lines look like
//   > #3 POST http://127.0.0.1:8080/mcp session=… version=2025-11-25
//   > #3 {"jsonrpc":"2.0",...}
//   < #3 200 text/event-stream session=…
//   < #3 data: {"jsonrpc":"2.0",...}
// Bodies are written whole lines at a time (a line is never split across two writes), so a
// search for a secret in the file cannot miss it because of chunking. The Authorization
// header is never written.
//
// redact(url), when given, says which requests carry OAuth secrets (with --oauth: every
// request that is not to the MCP endpoint, i.e. discovery, registration, token); in their
// bodies the values of the fields in SECRET_FIELDS are replaced by "[redacted]", in
// form-encoded requests and in JSON responses alike.
export function trafficFetch(file, baseFetch = fetch, { redact } = {}) {
    let n = 0;
    const write = text => appendFileSync(file, text);
    return async (input, init = {}) => {
        const id = ++n;
        const url = input instanceof Request ? input.url : String(input);
        const hide = redact?.(url) ? redactSecrets : s => s;
        const writeLines = (prefix, text) => {
            if (text === '') return;
            write(text.split('\n').map(l => `${prefix} ${hide(l)}`).join('\n') + '\n');
        };
        const method = init.method ?? (input instanceof Request ? input.method : 'GET');
        const headers = new Headers(init.headers ?? (input instanceof Request ? input.headers : undefined));
        write(`> #${id} ${method} ${url}${describeHeaders(headers)}\n`);
        if (init.body !== undefined && init.body !== null) {
            writeLines(`> #${id}`, typeof init.body === 'string' ? init.body : String(init.body));
        }
        let response;
        try {
            response = await baseFetch(input, init);
        } catch (err) {
            write(`< #${id} fetch failed: ${err?.message ?? err}\n`);
            throw err;
        }
        write(`< #${id} ${response.status} ${response.headers.get('content-type') ?? '-'}${describeHeaders(response.headers)}\n`);
        if (!response.body) return response;
        const decoder = new TextDecoder();
        let pending = '';
        const logged = response.body.pipeThrough(
            new TransformStream({
                transform(chunk, controller) {
                    pending += decoder.decode(chunk, { stream: true });
                    const cut = pending.lastIndexOf('\n');
                    if (cut >= 0) {
                        writeLines(`< #${id}`, pending.slice(0, cut));
                        pending = pending.slice(cut + 1);
                    }
                    controller.enqueue(chunk);
                },
                flush() {
                    pending += decoder.decode();
                    writeLines(`< #${id}`, pending);
                    pending = '';
                    write(`< #${id} (end of body)\n`);
                }
            })
        );
        const wrapped = new Response(logged, { status: response.status, statusText: response.statusText, headers: response.headers });
        Object.defineProperty(wrapped, 'url', { value: response.url });
        return wrapped;
    };
}

// The OAuth fields whose values never go into the traffic log.
const SECRET_FIELDS = ['access_token', 'refresh_token', 'id_token', 'code', 'code_verifier', 'client_secret', 'registration_access_token', 'client_assertion'];
const SECRET_JSON = new RegExp(`("(?:${SECRET_FIELDS.join('|')})"\\s*:\\s*)"(?:[^"\\\\]|\\\\.)*"`, 'g');
const SECRET_FORM = new RegExp(`(^|&)(${SECRET_FIELDS.join('|')})=[^&]*`, 'g');

export function redactSecrets(line) {
    return line.replace(SECRET_JSON, '$1"[redacted]"').replace(SECRET_FORM, '$1$2=[redacted]');
}

function describeHeaders(h) {
    let s = '';
    const session = h.get('mcp-session-id');
    const version = h.get('mcp-protocol-version');
    if (session) s += ` session=${session}`;
    if (version) s += ` version=${version}`;
    return s;
}

// statusOf returns structuredContent.status of a CallToolResult, if any.
export function statusOf(result) {
    const sc = result?.structuredContent;
    return sc && typeof sc === 'object' && typeof sc.status === 'string' ? sc.status : undefined;
}

// How often a client calls a tool again after −32042 before it gives up (each retry follows
// a completion notification, so this only bounds a server that keeps asking).
const MAX_URL_REQUIRED_ROUNDS = 5;

// toolCaller returns callTool(name, args): one tool call as a real client makes it, the same
// for both SDKs. callOnce makes the SDK's call. After a −32042 (an UrlRequired error of the
// SDK: error style) it shows the URLs, waits for each completion notification and calls
// again; after a result whose status is in awaitRetryOn (no URL mode: the user finishes in
// the browser) it waits for the test's "retry" (call again) or "continue".
export function toolCaller({ callOnce, UrlRequired, completions, awaitRetryOn }) {
    return async function callTool(name, args) {
        for (let round = 0; ; round++) {
            let result;
            try {
                result = await callOnce(name, args);
            } catch (err) {
                if (!(err instanceof UrlRequired) || round >= MAX_URL_REQUIRED_ROUNDS) throw err;
                const elicitations = err.elicitations;
                emit({ event: 'url_required', tool: name, code: err.code, message: err.message, elicitations });
                await Promise.all(elicitations.filter(e => e.elicitationId).map(e => completions.wait(e.elicitationId)));
                continue;
            }
            emit({ event: 'result', tool: name, result });
            if (!awaitRetryOn.has(statusOf(result))) return result;
            const cmd = await nextCommand();
            if (cmd === 'continue') return result;
            if (cmd !== 'retry') throw new Error(`unknown command ${JSON.stringify(cmd)} (expected "retry" or "continue")`);
        }
    };
}
