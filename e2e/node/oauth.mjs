// --oauth for client-v1.mjs and client-v2.mjs: an OAuthClientProvider (the interface both
// SDKs' StreamableHTTPClientTransport takes as `authProvider`, duck-typed, so nothing here
// imports an SDK) and the loopback HTTP listener the authorization server redirects the
// browser to. The SDK does discovery, dynamic client registration, PKCE, the resource
// indicator, the token exchange and refreshes; this file only keeps what the SDK hands it
// (in memory, for this one process), prints the authorization URL, and catches the callback.
//
// Secrets (access token, refresh token, authorization code, PKCE verifier) are never printed
// or logged; `tokenInfo` reads the access token's claims only to report `aud` and `scope`.
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';

import { emit, trafficFetch } from './common.mjs';

const CALLBACK_PATH = '/callback';

// CallbackListener is the loopback redirect target: http://127.0.0.1:PORT/callback on a free
// port. It takes the first request to /callback (anything else is 404), checks its query
// with validate (set before the browser can arrive; returns the code or throws), answers it
// with a small page that says how that went, and then hands the outcome to wait().
export class CallbackListener {
    static async start() {
        const l = new CallbackListener();
        await new Promise((resolve, reject) => {
            l.server.once('error', reject);
            l.server.listen(0, '127.0.0.1', () => {
                l.server.off('error', reject);
                resolve();
            });
        });
        l.redirectUrl = `http://127.0.0.1:${l.server.address().port}${CALLBACK_PATH}`;
        return l;
    }

    constructor() {
        this.redirectUrl = undefined;
        this.validate = () => {
            throw new Error('callback arrived before the client was ready for it');
        };
        this.outcome = undefined;
        this.waiters = [];
        this.server = createServer((req, res) => this.handle(req, res));
    }

    handle(req, res) {
        const url = new URL(req.url ?? '/', 'http://127.0.0.1');
        if (req.method !== 'GET' || url.pathname !== CALLBACK_PATH || this.outcome) {
            res.writeHead(404, { 'Content-Type': 'text/plain; charset=utf-8', Connection: 'close' });
            res.end('not found\n');
            return;
        }
        let outcome;
        try {
            outcome = { params: url.searchParams, code: this.validate(url.searchParams) };
        } catch (err) {
            outcome = { params: url.searchParams, error: err };
        }
        this.outcome = outcome;
        const body = outcome.error
            ? `<!doctype html><meta charset="utf-8"><title>Authorization failed</title><h1 id="result">Authorization failed</h1><p id="error">${escapeHTML(String(outcome.error.code ?? outcome.error.message))}</p><p>You can close this tab.</p>\n`
            : `<!doctype html><meta charset="utf-8"><title>Authorized</title><h1 id="result">Authorized</h1><p>You can close this tab.</p>\n`;
        res.writeHead(outcome.error ? 400 : 200, { 'Content-Type': 'text/html; charset=utf-8', 'Cache-Control': 'no-store', Connection: 'close' });
        // The page goes out before anyone hears of the callback: an error ends the process,
        // which must not cut the browser's answer short.
        res.end(body, () => {
            for (const w of this.waiters.splice(0)) w(outcome);
        });
    }

    // wait resolves with {params, code} or {params, error}; rejects after timeoutMs.
    wait(timeoutMs) {
        if (this.outcome) return Promise.resolve(this.outcome);
        return new Promise((resolve, reject) => {
            const timer = setTimeout(() => reject(new Error(`no authorization callback at ${this.redirectUrl} within ${timeoutMs} ms`)), timeoutMs);
            timer.unref?.();
            this.waiters.push(outcome => {
                clearTimeout(timer);
                resolve(outcome);
            });
        });
    }

    close() {
        this.server.close();
        this.server.closeAllConnections?.();
    }
}

function escapeHTML(s) {
    return s.replace(/[&<>"']/g, c => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);
}

// AuthorizationError: a callback that failed its checks. On the {"event":"error"} line `code`
// is the OAuth `error` (or state_mismatch, issuer_mismatch, invalid_callback) and `data` what
// else is safe to show.
export class AuthorizationError extends Error {
    constructor(message, code, data) {
        super(message);
        this.name = 'AuthorizationError';
        if (code !== undefined) this.code = code;
        if (data !== undefined) this.data = data;
    }
}

// LoopbackOAuthProvider implements the SDK's OAuthClientProvider for a public client whose
// redirect URI is the loopback listener. Everything is kept in memory: every run registers
// a new client.
export class LoopbackOAuthProvider {
    constructor({ redirectUrl, clientName, scope }) {
        this._redirectUrl = redirectUrl;
        this._metadata = {
            client_name: clientName,
            redirect_uris: [redirectUrl],
            grant_types: ['authorization_code', 'refresh_token'],
            response_types: ['code'],
            token_endpoint_auth_method: 'none',
            // RFC 8252 loopback client. (v2 derives the same from the redirect URI; v1 would
            // register nothing, which the provider takes as "web".)
            application_type: 'native',
            ...(scope ? { scope } : {})
        };
        this._client = undefined;
        this._tokens = undefined;
        this._verifier = undefined;
        this._discovery = undefined;
        this.expectedState = undefined;
        this.authorizationRequested = false;
        // True while finishAuth runs: saveTokens then is the code exchange, else a refresh.
        this.exchanging = false;
    }

    get redirectUrl() {
        return this._redirectUrl;
    }

    get clientMetadata() {
        return this._metadata;
    }

    // A fresh random state for each authorization request; checked on the callback.
    state() {
        this.expectedState = randomBytes(24).toString('base64url');
        return this.expectedState;
    }

    clientInformation() {
        return this._client;
    }

    saveClientInformation(info) {
        const isNew = info?.client_id !== this._client?.client_id;
        this._client = info;
        if (isNew) {
            emit({
                event: 'registered',
                clientId: info.client_id,
                tokenEndpointAuthMethod: info.token_endpoint_auth_method ?? null,
                grantTypes: info.grant_types ?? null,
                redirectUris: info.redirect_uris ?? null,
                scope: info.scope ?? null
            });
        }
    }

    tokens() {
        return this._tokens;
    }

    saveTokens(tokens) {
        this._tokens = tokens;
        if (!this.exchanging) emit({ event: 'token_refreshed', ...this.tokenInfo() });
    }

    redirectToAuthorization(url) {
        this.authorizationRequested = true;
        emit({ event: 'authorize', url: String(url) });
    }

    saveCodeVerifier(verifier) {
        this._verifier = verifier;
    }

    codeVerifier() {
        if (!this._verifier) throw new Error('no PKCE code verifier saved');
        return this._verifier;
    }

    discoveryState() {
        return this._discovery;
    }

    saveDiscoveryState(state) {
        this._discovery = state;
    }

    invalidateCredentials(scope) {
        if (scope === 'all' || scope === 'client') this._client = undefined;
        if (scope === 'all' || scope === 'tokens') this._tokens = undefined;
        if (scope === 'all' || scope === 'verifier') this._verifier = undefined;
        if (scope === 'all' || scope === 'discovery') this._discovery = undefined;
    }

    // tokenInfo: what the test may know about the granted access token, read without
    // verification: `aud` (and `scope`) from the JWT payload, null for an opaque token.
    tokenInfo() {
        const t = this._tokens;
        const claims = t?.access_token ? jwtClaims(t.access_token) : undefined;
        return {
            aud: claims?.aud ?? null,
            scope: claims?.scope ?? t?.scope ?? null,
            tokenType: t?.token_type ?? null,
            expiresIn: t?.expires_in ?? null,
            refreshToken: Boolean(t?.refresh_token),
            clientId: this._client?.client_id ?? null
        };
    }

    // connectedInfo: the fields --oauth adds to {"event":"connected"}.
    connectedInfo() {
        const { aud, scope, clientId } = this.tokenInfo();
        return { aud, scope, clientId };
    }

    // checkCallback validates the callback's query before the code is redeemed: the state
    // must be the one sent (neither SDK checks it), and `iss` must be the discovered
    // authorization server metadata's `issuer` (RFC 9207), and present when that metadata
    // says it is always sent (v1 does not check `iss` at all; v2 checks it again in
    // finishAuth). Then an `error` ends the run. Returns the code.
    checkCallback(params) {
        const state = params.get('state');
        if (!this.expectedState || state !== this.expectedState) {
            throw new AuthorizationError('authorization callback: state does not match the authorization request', 'state_mismatch');
        }
        const metadata = this._discovery?.authorizationServerMetadata;
        const iss = params.get('iss') ?? undefined;
        if (metadata?.issuer) {
            if (iss === undefined ? metadata.authorization_response_iss_parameter_supported === true : iss !== metadata.issuer) {
                throw new AuthorizationError('authorization callback: iss is not the authorization server\'s issuer', 'issuer_mismatch', {
                    iss: iss ?? null,
                    expected: metadata.issuer
                });
            }
        }
        const error = params.get('error');
        if (error) {
            throw new AuthorizationError(`authorization failed: ${error}`, error, {
                error_description: params.get('error_description') ?? null,
                iss: iss ?? null
            });
        }
        const code = params.get('code');
        if (!code) throw new AuthorizationError('authorization callback has neither code nor error', 'invalid_callback');
        return code;
    }
}

function jwtClaims(token) {
    const parts = token.split('.');
    if (parts.length !== 3) return undefined;
    try {
        const claims = JSON.parse(Buffer.from(parts[1], 'base64url').toString('utf8'));
        return claims && typeof claims === 'object' ? claims : undefined;
    } catch {
        return undefined;
    }
}

// authorizeAndConnect connects `client` over transports made by newTransport(). When the
// first connect stops for authorization (the SDK called redirectToAuthorization and the
// connect failed with its UnauthorizedError, recognised by isUnauthorized), it waits for the
// browser at the loopback callback (checked by provider.checkCallback as it arrives, so the
// page can say whether it worked), calls finish(transport, params, code), i.e.
// transport.finishAuth in the form the SDK takes, prints {"event":"authorized"} and connects
// again on a new transport (a transport cannot be started twice). Returns the connected
// transport. A callback that fails its checks, or none within timeoutMs, throws.
export async function authorizeAndConnect({ client, newTransport, connectOptions, provider, listener, timeoutMs, isUnauthorized, finish }) {
    listener.validate = params => provider.checkCallback(params);
    const first = newTransport();
    try {
        await client.connect(first, connectOptions);
        listener.close();
        return first;
    } catch (err) {
        if (!provider.authorizationRequested || !isUnauthorized(err)) {
            listener.close();
            throw err;
        }
    }
    let outcome;
    try {
        outcome = await listener.wait(timeoutMs);
    } finally {
        listener.close();
    }
    if (outcome.error) throw outcome.error;
    const { params, code } = outcome;
    provider.exchanging = true;
    try {
        await finish(first, params, code);
    } finally {
        provider.exchanging = false;
    }
    emit({ event: 'authorized', ...provider.tokenInfo() });
    const second = newTransport();
    await client.connect(second, connectOptions);
    return second;
}

// sameEndpoint: whether the request URL u is the MCP endpoint (the only URL whose traffic
// carries no OAuth secrets in its bodies).
export function sameEndpoint(u, mcpURL) {
    const a = new URL(u);
    return a.origin === mcpURL.origin && a.pathname === mcpURL.pathname;
}

// connectClient connects `client` to flags.url as both test clients do: with flags.token as
// a bearer token, or with --oauth through the SDK's own authorization (README.md), for which
// the loopback listener must exist before the provider, whose client metadata names its
// redirect URI. With --traffic it records every HTTP body (OAuth traffic redacted). What
// differs between SDK v1 and v2 is passed in: the transport class, the SDK's
// UnauthorizedError, and finish (see authorizeAndConnect). Returns the connected transport
// and the provider (undefined without --oauth).
export async function connectClient({ client, flags, Transport, UnauthorizedError, finish }) {
    let provider;
    let listener;
    if (flags.oauth) {
        listener = await CallbackListener.start();
        provider = new LoopbackOAuthProvider({ redirectUrl: listener.redirectUrl, clientName: flags.name, scope: flags['oauth-scope'] });
    }
    client.onerror = err => {
        // The connect that stops for authorization fails with the SDK's UnauthorizedError
        // (reported through onerror too); that is the expected path, not a transport error.
        if (provider?.authorizationRequested && err instanceof UnauthorizedError && !provider.tokens()) return;
        emit({ event: 'transport_error', message: err?.message ?? String(err) });
    };
    const mcpURL = new URL(flags.url);
    const fetchFn = flags.traffic
        ? trafficFetch(flags.traffic, fetch, { redact: flags.oauth ? u => !sameEndpoint(u, mcpURL) : undefined })
        : undefined;
    const newTransport = () =>
        new Transport(mcpURL, {
            requestInit: flags.token ? { headers: { Authorization: `Bearer ${flags.token}` } } : undefined,
            authProvider: provider,
            fetch: fetchFn
        });
    if (!provider) {
        const transport = newTransport();
        await client.connect(transport, { timeout: flags.timeoutMs });
        return { transport };
    }
    const transport = await authorizeAndConnect({
        client,
        newTransport,
        connectOptions: { timeout: flags.timeoutMs },
        provider,
        listener,
        timeoutMs: flags.timeoutMs,
        isUnauthorized: err => err instanceof UnauthorizedError,
        finish
    });
    return { transport, provider };
}
