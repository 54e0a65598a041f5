#!/usr/bin/env node
// A real OpenID provider / OAuth 2.1 authorization server (oidc-provider) for urlflow's e2e
// tests. See README.md for the config, the pages and the endpoints.
//
//   node idp.mjs --config FILE.json
//   node idp.mjs --config-json '{"accounts":[...],...}'
//
// stdout carries exactly one line, {"event":"ready","issuer":"http://127.0.0.1:PORT","port":PORT},
// once the server listens; everything else goes to stderr. SIGTERM/SIGINT stop it.

import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';

// oidc-provider prints its notices with console.info (stdout); stdout is reserved for the
// ready line, so every console method writes to stderr. Must run before the import below.
for (const m of ['log', 'info', 'debug']) console[m] = (...a) => console.error(...a);
const { default: Provider, errors } = await import('oidc-provider');
// Each stage of the start is logged with the time since the process began: a start that a
// caller gave up on shows in its stderr where the time went.
const started = (stage) => log(`start: ${stage} after ${Math.round(process.uptime() * 1000)} ms`);
started('oidc-provider imported');

// ---------------------------------------------------------------------------------------------
// Config

function die(msg) {
  process.stderr.write(`idp: ${msg}\n`);
  process.exit(2);
}

function readConfig(argv) {
  let raw;
  for (let i = 0; i < argv.length; i += 1) {
    const a = argv[i];
    const val = () => {
      if (a.includes('=')) return a.slice(a.indexOf('=') + 1);
      if (i + 1 >= argv.length) die(`${a} needs a value`);
      i += 1;
      return argv[i];
    };
    if (a === '--config' || a.startsWith('--config=')) raw = fs.readFileSync(val(), 'utf8');
    else if (a === '--config-json' || a.startsWith('--config-json=')) raw = val();
    else if (a === '-h' || a === '--help') {
      process.stderr.write('usage: node idp.mjs --config FILE.json | --config-json JSON\n');
      process.exit(0);
    } else die(`unknown argument ${a}`);
  }
  if (raw === undefined) die('one of --config FILE or --config-json JSON is required');
  try {
    return JSON.parse(raw);
  } catch (e) {
    return die(`config is not valid JSON: ${e.message}`);
  }
}

const cfg = readConfig(process.argv.slice(2));
const KNOWN = new Set(['role', 'host', 'port', 'accounts', 'clients', 'resources', 'scopes', 'defaultResource',
  'useGrantedResource', 'ttl', 'allowDynamicRegistration', 'requirePKCE', 'refreshTokens',
  'rotateRefreshTokens', 'consent', 'conformIdTokenClaims', 'clockTolerance', 'introspection', 'revocation',
  'clientCredentials', 'protectedApi', 'apiAudience', 'apiScope', 'testEndpoints', 'logRequests', 'jwks']);
for (const k of Object.keys(cfg)) if (!KNOWN.has(k)) die(`unknown config key "${k}"`);
for (const k of Object.keys(cfg.ttl ?? {})) {
  if (!['accessToken', 'refreshToken', 'idToken', 'authorizationCode', 'interaction', 'session', 'grant'].includes(k)) die(`unknown ttl key "${k}"`);
  if (!Number.isInteger(cfg.ttl[k]) || cfg.ttl[k] <= 0) die(`ttl.${k} must be a positive integer (seconds)`);
}
const role = cfg.role ?? 'issuer';
if (!['issuer', 'thirdparty'].includes(role)) die(`role must be "issuer" or "thirdparty", got ${role}`);

const ttlCfg = {
  accessToken: 3600,
  refreshToken: 14 * 24 * 3600,
  idToken: 3600,
  authorizationCode: 60,
  interaction: 3600,
  session: 14 * 24 * 3600,
  grant: 14 * 24 * 3600,
  ...cfg.ttl,
};

const settings = {
  host: cfg.host ?? '127.0.0.1',
  port: cfg.port ?? 0,
  requirePKCE: cfg.requirePKCE ?? true,
  allowDynamicRegistration: cfg.allowDynamicRegistration ?? true,
  refreshTokens: cfg.refreshTokens ?? 'always', // "always" | "offline_access"
  rotateRefreshTokens: cfg.rotateRefreshTokens ?? true,
  useGrantedResource: cfg.useGrantedResource ?? true,
  consent: cfg.consent ?? 'prompt', // "prompt" | "auto"
  conformIdTokenClaims: cfg.conformIdTokenClaims ?? false,
  clockTolerance: cfg.clockTolerance ?? 0,
  introspection: cfg.introspection ?? true,
  revocation: cfg.revocation ?? true,
  protectedApi: cfg.protectedApi ?? role === 'thirdparty',
  apiScope: cfg.apiScope ?? null,
  testEndpoints: cfg.testEndpoints ?? true,
  logRequests: cfg.logRequests ?? true,
};
if (!['offline_access', 'always'].includes(settings.refreshTokens)) die('refreshTokens must be "offline_access" or "always"');
if (!['prompt', 'auto'].includes(settings.consent)) die('consent must be "prompt" or "auto"');

const accounts = new Map();
for (const a of cfg.accounts ?? []) {
  if (!a.id || typeof a.password !== 'string') die('every account needs "id" and "password"');
  accounts.set(a.id, a);
}

// ---------------------------------------------------------------------------------------------
// Storage adapter: in-memory, no size limit (the bundled one is an LRU of 1000 entries), with a
// grant index so that tests can revoke everything of an account.

const store = new Map(); // `${model}:${id}` -> { payload, expiresAt }
const grantMembers = new Map(); // grantId -> Set of store keys
const sessionUids = new Map(); // uid -> session id
const userCodes = new Map(); // userCode -> id

function live(key) {
  const e = store.get(key);
  if (!e) return undefined;
  if (e.expiresAt !== undefined && e.expiresAt <= Date.now()) {
    store.delete(key);
    return undefined;
  }
  return e;
}

class Adapter {
  constructor(model) {
    this.model = model;
  }

  key(id) {
    return `${this.model}:${id}`;
  }

  async upsert(id, payload, expiresIn) {
    const key = this.key(id);
    const expiresAt = typeof expiresIn === 'number'
      ? Date.now() + (expiresIn + settings.clockTolerance) * 1000 : undefined;
    store.set(key, { payload, expiresAt });
    if (payload.grantId) {
      if (!grantMembers.has(payload.grantId)) grantMembers.set(payload.grantId, new Set());
      grantMembers.get(payload.grantId).add(key);
    }
    if (this.model === 'Session' && payload.uid) sessionUids.set(payload.uid, id);
    if (payload.userCode) userCodes.set(payload.userCode, id);
  }

  async find(id) {
    return live(this.key(id))?.payload;
  }

  async findByUid(uid) {
    const id = sessionUids.get(uid);
    return id === undefined ? undefined : this.find(id);
  }

  async findByUserCode(userCode) {
    const id = userCodes.get(userCode);
    return id === undefined ? undefined : this.find(id);
  }

  async consume(id) {
    const e = live(this.key(id));
    if (e) e.payload.consumed = Math.floor(Date.now() / 1000);
  }

  async destroy(id) {
    store.delete(this.key(id));
  }

  async revokeByGrantId(grantId) {
    const members = grantMembers.get(grantId);
    if (!members) return;
    const prefix = `${this.model}:`;
    for (const key of [...members]) {
      if (key.startsWith(prefix)) {
        store.delete(key);
        members.delete(key);
      }
    }
    if (members.size === 0) grantMembers.delete(grantId);
  }
}

// Every token, code and the grant itself; afterwards the next refresh fails with invalid_grant.
function revokeGrantEverywhere(grantId) {
  for (const key of grantMembers.get(grantId) ?? []) store.delete(key);
  grantMembers.delete(grantId);
  store.delete(`Grant:${grantId}`);
}

function grantsOf({ account, clientId }) {
  const out = [];
  for (const [key] of store) {
    if (!key.startsWith('Grant:') || !live(key)) continue;
    const { payload } = store.get(key);
    if (account !== undefined && payload.accountId !== account) continue;
    if (clientId !== undefined && payload.clientId !== clientId) continue;
    out.push(key.slice('Grant:'.length));
  }
  return out;
}

setInterval(() => {
  for (const key of [...store.keys()]) live(key);
}, 60_000).unref();

// ---------------------------------------------------------------------------------------------
// Runtime state the test endpoints change

let accessTTLOverride; // seconds, from POST /test/access-ttl
let refreshTTLOverride; // seconds, from POST /test/refresh-ttl
const stats = newStats();
function newStats() {
  return {
    token: {}, token_ok: {}, token_error: {}, revocation: 0, introspection: 0, userinfo: 0,
    registration: 0, authorization: 0, api: { ok: 0, unauthorized: 0 },
  };
}
function resetStats() {
  Object.assign(stats, newStats());
}
const jwtGrants = new Map(); // jti of a JWT access token -> grantId (JWTs are not stored)

// ---------------------------------------------------------------------------------------------
// Keys

function signingJWKS() {
  const kidOf = (jwk) => crypto.createHash('sha256').update(jwk.n).digest('base64url').slice(0, 16);
  if (cfg.jwks) {
    if (!Array.isArray(cfg.jwks.keys) || !cfg.jwks.keys.some((k) => k.kty === 'RSA' && k.d)) {
      die('jwks must be {"keys": [...]} with at least one private RSA key');
    }
    return { keys: cfg.jwks.keys.map((k) => ({ alg: 'RS256', use: 'sig', ...k, kid: k.kid ?? kidOf(k) })) };
  }
  const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
  const jwk = privateKey.export({ format: 'jwk' });
  return { keys: [{ ...jwk, kid: kidOf(jwk), alg: 'RS256', use: 'sig' }] };
}
const jwks = signingJWKS();
started('signing key ready');
const publicKeys = new Map(jwks.keys.filter((k) => k.kty === 'RSA').map((k) => [k.kid, crypto.createPublicKey({
  key: { kty: k.kty, n: k.n, e: k.e }, format: 'jwk',
})]));

// ---------------------------------------------------------------------------------------------
// HTTP server (the provider is created once the port is known: the issuer contains it)

const server = http.createServer();
await new Promise((resolve) => {
  server.once('error', (err) => die(`cannot listen on ${settings.host}:${settings.port}: ${err.message}`));
  server.listen(settings.port, settings.host, resolve);
});
const { port } = server.address();
started('listening');
const issuer = `http://${settings.host}:${port}`;
const subst = (s) => (typeof s === 'string' ? s.replaceAll('{issuer}', issuer) : s);

const resources = []; // {indicator, scope, audience?, accessTokenFormat, accessTokenTTL?}
function addResource(r) {
  if (!r.indicator) throw new Error('resource needs "indicator"');
  const res = {
    indicator: subst(r.indicator),
    scope: r.scope ?? '',
    audience: subst(r.audience),
    accessTokenFormat: r.accessTokenFormat ?? 'jwt',
    accessTokenTTL: r.accessTokenTTL,
    defaultScope: r.defaultScope ?? r.scope ?? '',
  };
  if (!['jwt', 'opaque'].includes(res.accessTokenFormat)) throw new Error('accessTokenFormat must be "jwt" or "opaque"');
  const i = resources.findIndex((x) => x.indicator === res.indicator);
  if (i >= 0) resources[i] = res; else resources.push(res);
  return res;
}
try {
  for (const r of cfg.resources ?? []) addResource(r);
} catch (err) {
  die(err.message);
}
const apiAudience = subst(cfg.apiAudience ?? '{issuer}/api');
const defaultResource = subst(cfg.defaultResource);

const staticScopes = ['openid', 'offline_access', 'profile', 'email', ...(cfg.scopes ?? [])];

const provider = new Provider(issuer, {
  adapter: Adapter,
  clients: (cfg.clients ?? []).map((c) => ({ ...c, redirect_uris: c.redirect_uris?.map(subst) })),
  jwks,
  cookies: {
    keys: [crypto.randomBytes(32).toString('base64url')],
    // Cookies ignore ports: urlflow and every provider on 127.0.0.1 share one cookie jar, so
    // each provider's cookie names carry its port.
    names: { session: `op${port}_session`, interaction: `op${port}_interaction`, resume: `op${port}_resume` },
  },
  clockTolerance: settings.clockTolerance,
  scopes: staticScopes,
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['name', 'preferred_username'],
  },
  conformIdTokenClaims: settings.conformIdTokenClaims,
  async findAccount(ctx, id) {
    const a = accounts.get(id);
    if (!a) return undefined;
    return {
      accountId: id,
      async claims() {
        return {
          sub: id,
          email: a.email,
          email_verified: a.email === undefined ? undefined : (a.email_verified ?? true),
          name: a.name,
          preferred_username: id,
        };
      },
    };
  },
  pkce: { required: settings.requirePKCE ? () => true : undefined },
  features: {
    devInteractions: { enabled: false },
    userinfo: { enabled: true },
    introspection: {
      enabled: settings.introspection,
      // Confidential clients (resource servers) may introspect any token, public ones their own.
      async allowedPolicy(ctx, client, token) {
        return client.clientAuthMethod !== 'none' || token.clientId === client.clientId;
      },
    },
    revocation: {
      enabled: settings.revocation,
      // RFC 7009: a client revokes its own tokens only.
      async allowedPolicy(ctx, client, token) {
        if (token.clientId === client.clientId) return true;
        if (client.clientAuthMethod === 'none') return false;
        throw new errors.InvalidRequest('client is not authorized to revoke the presented token');
      },
    },
    registration: { enabled: settings.allowDynamicRegistration, initialAccessToken: false },
    rpInitiatedLogout: { enabled: true },
    clientCredentials: { enabled: cfg.clientCredentials ?? false },
    resourceIndicators: {
      enabled: true,
      async defaultResource(ctx, client, oneOf) {
        if (oneOf) return oneOf.length === 1 ? oneOf[0] : oneOf;
        return defaultResource || undefined;
      },
      async useGrantedResource() {
        return settings.useGrantedResource;
      },
      async getResourceServerInfo(ctx, indicator) {
        const r = resources.find((x) => x.indicator === indicator) ?? resources.find((x) => x.indicator === '*');
        if (!r) throw new errors.InvalidTarget(`unknown resource indicator ${indicator}`);
        return {
          scope: r.scope,
          ...(r.audience && r.audience !== '*' ? { audience: r.audience } : {}),
          accessTokenFormat: r.accessTokenFormat,
          ...(r.accessTokenTTL ? { accessTokenTTL: r.accessTokenTTL } : {}),
          ...(r.accessTokenFormat === 'jwt' ? { jwt: { sign: { alg: 'RS256' } } } : {}),
        };
      },
    },
  },
  async issueRefreshToken(ctx, client, code) {
    if (!client.grantTypeAllowed('refresh_token')) return false;
    return settings.refreshTokens === 'always' || code.scopes.has('offline_access');
  },
  rotateRefreshToken: settings.rotateRefreshTokens,
  // Tokens outlive the browser session at the provider (a logout does not revoke them).
  async expiresWithSession() {
    return false;
  },
  responseTypes: ['code'],
  ttl: {
    AccessToken(ctx, token) {
      return accessTTLOverride ?? token.resourceServer?.accessTokenTTL ?? ttlCfg.accessToken;
    },
    ClientCredentials(ctx, token) {
      return accessTTLOverride ?? token.resourceServer?.accessTokenTTL ?? ttlCfg.accessToken;
    },
    RefreshToken() {
      return refreshTTLOverride ?? ttlCfg.refreshToken;
    },
    AuthorizationCode: ttlCfg.authorizationCode,
    IdToken: ttlCfg.idToken,
    Interaction: ttlCfg.interaction,
    Session: ttlCfg.session,
    Grant: ttlCfg.grant,
  },
  async renderError(ctx, out) {
    ctx.type = 'html';
    ctx.body = page('Error', `<h1 id="error">Error</h1>${Object.entries(out)
      .map(([k, v]) => `<p><b>${esc(k)}</b>: <span class="${esc(k)}">${esc(v)}</span></p>`).join('')}`);
  },
});

// Static clients are validated lazily by oidc-provider; surface a bad one now.
for (const c of cfg.clients ?? []) {
  try {
    if (!(await provider.Client.find(c.client_id))) die(`static client ${c.client_id} not found`);
  } catch (err) {
    die(`static client ${c.client_id}: ${err.error_description ?? err.message}`);
  }
}

provider.on('access_token.issued', (token) => {
  if (token.grantId) jwtGrants.set(token.jti, token.grantId);
});
provider.on('server_error', (ctx, err) => log(`server_error ${ctx.path}: ${err.stack}`));

// Count the calls of the provider's endpoints (the route is known once it ran).
provider.use(async (ctx, next) => {
  await next();
  const route = ctx.oidc?.route;
  if (route === 'token') {
    const gt = ctx.oidc.params?.grant_type ?? ctx.oidc.body?.grant_type ?? '(none)';
    const ok = ctx.status < 400;
    stats.token[gt] = (stats.token[gt] ?? 0) + 1;
    const bucket = ok ? stats.token_ok : stats.token_error;
    bucket[gt] = (bucket[gt] ?? 0) + 1;
  } else if (route === 'revocation' || route === 'introspection' || route === 'userinfo'
    || route === 'registration' || route === 'authorization') {
    stats[route] += 1;
  }
});

const providerHandler = provider.callback();

// ---------------------------------------------------------------------------------------------
// Pages

function esc(v) {
  return String(v ?? '').replace(/[&<>"']/g, (c) => ({
    '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;',
  })[c]);
}

function page(title, body) {
  return `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>${esc(title)} – e2e test IdP</title>
<style>body{font-family:sans-serif;max-width:28em;margin:3em auto}label{display:block;margin:.6em 0}
input{display:block;width:100%;padding:.3em}button{margin-top:1em;padding:.4em 1.2em}.error{color:#b00}
.note{color:#666;font-size:.85em}</style></head>
<body>${body}<p class="note">urlflow e2e test identity provider (${esc(issuer)})</p></body></html>`;
}

function loginPage(uid, params, { error, login } = {}) {
  return page('Sign in', `<h1>Sign in</h1>
<p>to <b id="client">${esc(params.client_id)}</b></p>
${error ? `<p class="error" id="login-error">${esc(error)}</p>` : ''}
<form method="post" action="/interaction/${esc(uid)}/login" id="login-form">
<label>Username <input type="text" name="login" id="login" autocomplete="username" autofocus value="${esc(login ?? params.login_hint ?? '')}"></label>
<label>Password <input type="password" name="password" id="password" autocomplete="current-password"></label>
<button type="submit" id="submit">Sign in</button>
</form>`);
}

function consentPage(uid, params, details, accountId) {
  const scopes = [...new Set([
    ...(details.missingOIDCScope ?? []),
    ...Object.values(details.missingResourceScopes ?? {}).flat(),
  ])];
  const resources = Object.keys(details.missingResourceScopes ?? {});
  return page('Authorize', `<h1>Authorize</h1>
<p><b id="client">${esc(params.client_id)}</b> asks for access to the account <b id="account">${esc(accountId)}</b>.</p>
${scopes.length ? `<p>Scopes: <span id="scopes">${esc(scopes.join(' '))}</span></p>` : ''}
${resources.length ? `<p>Resources: <span id="resources">${esc(resources.join(' '))}</span></p>` : ''}
<form method="post" action="/interaction/${esc(uid)}/confirm" id="consent-form">
<button type="submit" id="approve" name="approve" value="yes">Allow</button>
</form>
<form method="post" action="/interaction/${esc(uid)}/abort" id="deny-form">
<button type="submit" id="deny">Deny</button>
</form>`);
}

// ---------------------------------------------------------------------------------------------
// Request plumbing

function log(msg) {
  process.stderr.write(`idp ${new Date().toISOString()} ${msg}\n`);
}

async function readBody(req, limit = 64 * 1024) {
  const chunks = [];
  let n = 0;
  for await (const c of req) {
    n += c.length;
    if (n > limit) throw Object.assign(new Error('body too large'), { status: 413 });
    chunks.push(c);
  }
  return Buffer.concat(chunks).toString('utf8');
}

async function jsonBody(req) {
  try {
    return JSON.parse(await readBody(req));
  } catch (err) {
    throw Object.assign(new Error(`body is not JSON: ${err.message}`), { status: 400 });
  }
}

async function formBody(req) {
  return Object.fromEntries(new URLSearchParams(await readBody(req)));
}

function send(res, status, body, headers = {}) {
  const isJSON = typeof body !== 'string';
  const text = isJSON ? `${JSON.stringify(body)}\n` : body;
  res.writeHead(status, {
    'content-type': isJSON ? 'application/json' : 'text/html; charset=utf-8',
    'cache-control': 'no-store',
    'content-length': Buffer.byteLength(text),
    ...headers,
  });
  res.end(text);
}

// ---------------------------------------------------------------------------------------------
// Interaction routes (login and consent)

async function grantConsent(details) {
  const { prompt: { details: missing }, params, session: { accountId } } = details;
  let { grantId } = details;
  const grant = grantId
    ? await provider.Grant.find(grantId)
    : new provider.Grant({ accountId, clientId: params.client_id });
  if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
  if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
  for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes ?? {})) {
    grant.addResourceScope(indicator, scopes.join(' '));
  }
  const saved = await grant.save();
  return details.grantId ? {} : { grantId: saved };
}

async function interaction(req, res, url) {
  const m = url.pathname.match(/^\/interaction\/([^/]+)(?:\/(login|confirm|abort))?$/);
  if (!m) return send(res, 404, page('Not found', '<h1>Not found</h1>'));
  const [, uid, action] = m;
  try {
    const details = await provider.interactionDetails(req, res);
    if (details.uid !== uid) throw new errors.SessionNotFound('interaction uid mismatch');
    const { prompt, params } = details;

    if (!action && req.method === 'GET') {
      if (prompt.name === 'login') return send(res, 200, loginPage(uid, params));
      if (prompt.name === 'consent') {
        if (settings.consent === 'auto') {
          const consent = await grantConsent(details);
          log(`consent auto-approved for ${details.session.accountId} / ${params.client_id}`);
          return provider.interactionFinished(req, res, { consent }, { mergeWithLastSubmission: true });
        }
        return send(res, 200, consentPage(uid, params, prompt.details, details.session?.accountId));
      }
      return send(res, 400, page('Error', `<h1>Unsupported prompt ${esc(prompt.name)}</h1>`));
    }
    if (req.method !== 'POST') return send(res, 405, page('Error', '<h1>Method not allowed</h1>'));

    if (action === 'login') {
      if (prompt.name !== 'login') return send(res, 400, page('Error', '<h1>Not a login step</h1>'));
      const { login = '', password = '' } = await formBody(req);
      const account = accounts.get(login);
      if (!account || account.password !== password) {
        log(`login failed for ${JSON.stringify(login)}`);
        return send(res, 200, loginPage(uid, params, { error: 'Invalid username or password.', login }));
      }
      log(`login ${login} (client ${params.client_id})`);
      return provider.interactionFinished(req, res, { login: { accountId: login } }, {
        mergeWithLastSubmission: false,
      });
    }
    if (action === 'confirm') {
      if (prompt.name !== 'consent') return send(res, 400, page('Error', '<h1>Not a consent step</h1>'));
      await readBody(req);
      const consent = await grantConsent(details);
      log(`consent approved for ${details.session.accountId} / ${params.client_id}`);
      return provider.interactionFinished(req, res, { consent }, { mergeWithLastSubmission: true });
    }
    if (action === 'abort') {
      await readBody(req);
      return provider.interactionFinished(req, res, {
        error: 'access_denied', error_description: 'End-User denied the request',
      }, { mergeWithLastSubmission: false });
    }
    return send(res, 404, page('Not found', '<h1>Not found</h1>'));
  } catch (err) {
    if (err instanceof errors.OIDCProviderError) {
      return send(res, err.statusCode ?? 400, page('Error', `<h1 id="error">${esc(err.message)}</h1><p>${esc(err.error_description)}</p>`));
    }
    throw err;
  }
}

// ---------------------------------------------------------------------------------------------
// Protected API: GET /api/me

function verifyJWT(token) {
  const parts = token.split('.');
  if (parts.length !== 3) return undefined;
  let header;
  let payload;
  try {
    header = JSON.parse(Buffer.from(parts[0], 'base64url'));
    payload = JSON.parse(Buffer.from(parts[1], 'base64url'));
  } catch {
    return undefined;
  }
  const key = publicKeys.get(header.kid);
  if (!key || header.alg !== 'RS256' || header.typ !== 'at+jwt') return undefined;
  const ok = crypto.verify('sha256', Buffer.from(`${parts[0]}.${parts[1]}`), key, Buffer.from(parts[2], 'base64url'));
  if (!ok || payload.iss !== issuer) return undefined;
  if (typeof payload.exp !== 'number' || payload.exp <= Date.now() / 1000 - settings.clockTolerance) return undefined;
  return payload;
}

async function authenticate(req) {
  const h = req.headers.authorization ?? '';
  const m = h.match(/^Bearer\s+(\S+)$/i);
  if (!m) return { error: 'invalid_request', description: 'missing bearer token' };
  const value = m[1];
  if (value.split('.').length === 3) {
    const payload = verifyJWT(value);
    if (!payload) return { error: 'invalid_token', description: 'invalid or expired token' };
    const grantId = jwtGrants.get(payload.jti);
    if (!grantId || !(await provider.Grant.find(grantId))) {
      return { error: 'invalid_token', description: 'token revoked' };
    }
    return { account: payload.sub, scope: payload.scope, client_id: payload.client_id, aud: payload.aud, exp: payload.exp };
  }
  const at = await provider.AccessToken.find(value); // undefined when unknown, expired or revoked
  if (!at || !at.accountId) return { error: 'invalid_token', description: 'invalid, expired or revoked token' };
  if (at.grantId && !(await provider.Grant.find(at.grantId))) {
    return { error: 'invalid_token', description: 'grant revoked' };
  }
  return { account: at.accountId, scope: at.scope, client_id: at.clientId, aud: at.aud, exp: at.exp };
}

async function apiMe(req, res) {
  if (req.method !== 'GET') return send(res, 405, { error: 'method_not_allowed' });
  const r = await authenticate(req);
  const auds = r.aud === undefined ? [] : [].concat(r.aud);
  if (!r.error && auds.length && !auds.includes(apiAudience)) {
    Object.assign(r, { error: 'invalid_token', description: `audience ${auds.join(' ')} is not ${apiAudience}` });
  }
  if (r.error) {
    stats.api.unauthorized += 1;
    return send(res, 401, { error: r.error, error_description: r.description }, {
      'www-authenticate': `Bearer realm="${issuer}", error="${r.error}", error_description="${r.description}"`,
    });
  }
  if (settings.apiScope && !(r.scope ?? '').split(' ').includes(settings.apiScope)) {
    stats.api.unauthorized += 1;
    return send(res, 403, { error: 'insufficient_scope' }, {
      'www-authenticate': `Bearer realm="${issuer}", error="insufficient_scope", scope="${settings.apiScope}"`,
    });
  }
  stats.api.ok += 1;
  return send(res, 200, { account: r.account, scope: r.scope ?? '', client_id: r.client_id, exp: r.exp });
}

// ---------------------------------------------------------------------------------------------
// Test-control endpoints (this harness only: no real provider has them)

function seconds(url) {
  const s = url.searchParams.get('seconds');
  if (s === null || s === '') return undefined;
  const n = Number(s);
  if (!Number.isInteger(n) || n <= 0) throw Object.assign(new Error('seconds must be a positive integer'), { status: 400 });
  return n;
}

async function testControl(req, res, url) {
  const route = `${req.method} ${url.pathname}`;
  switch (route) {
    case 'GET /test/stats':
      return send(res, 200, stats);
    case 'POST /test/stats/reset':
      resetStats();
      return send(res, 200, stats);
    case 'POST /test/revoke': {
      const account = url.searchParams.get('account') ?? undefined;
      const clientId = url.searchParams.get('client_id') ?? undefined;
      if (account === undefined && clientId === undefined) {
        return send(res, 400, { error: 'give account and/or client_id' });
      }
      const ids = grantsOf({ account, clientId });
      ids.forEach(revokeGrantEverywhere);
      log(`test: revoked ${ids.length} grant(s) of account=${account ?? '*'} client_id=${clientId ?? '*'}`);
      return send(res, 200, { revoked_grants: ids.length });
    }
    case 'GET /test/grants': {
      const account = url.searchParams.get('account') ?? undefined;
      const clientId = url.searchParams.get('client_id') ?? undefined;
      const out = grantsOf({ account, clientId }).map((id) => {
        const g = store.get(`Grant:${id}`).payload;
        const kinds = {};
        for (const k of grantMembers.get(id) ?? []) {
          if (live(k)) {
            const kind = k.slice(0, k.indexOf(':'));
            kinds[kind] = (kinds[kind] ?? 0) + 1;
          }
        }
        return { grant_id: id, account: g.accountId, client_id: g.clientId, tokens: kinds };
      });
      return send(res, 200, { grants: out });
    }
    case 'POST /test/access-ttl':
      accessTTLOverride = seconds(url);
      log(`test: access token TTL override = ${accessTTLOverride ?? 'none'}`);
      return send(res, 200, { access_ttl: accessTTLOverride ?? null });
    case 'POST /test/refresh-ttl':
      refreshTTLOverride = seconds(url);
      log(`test: refresh token TTL override = ${refreshTTLOverride ?? 'none'}`);
      return send(res, 200, { refresh_ttl: refreshTTLOverride ?? null });
    case 'POST /test/clients': {
      const meta = await jsonBody(req);
      if (!meta.client_id) return send(res, 400, { error: 'client_id is required' });
      meta.redirect_uris = meta.redirect_uris?.map(subst);
      // Validate through the provider's own schema before storing it like a registered client.
      try {
        await provider.Client.validate(meta);
      } catch (err) {
        return send(res, 400, { error: err.error ?? 'invalid_client_metadata', error_description: err.error_description ?? err.message });
      }
      await new Adapter('Client').upsert(meta.client_id, meta);
      log(`test: client ${meta.client_id} added`);
      return send(res, 201, meta);
    }
    case 'POST /test/resources': {
      let r;
      try {
        r = addResource(await jsonBody(req));
      } catch (err) {
        return send(res, 400, { error: 'invalid_request', error_description: err.message });
      }
      log(`test: resource ${r.indicator} added`);
      return send(res, 201, r);
    }
    default:
      return send(res, 404, { error: 'not_found', routes: [
        'GET /test/stats', 'POST /test/stats/reset', 'POST /test/revoke?account=&client_id=',
        'GET /test/grants?account=&client_id=', 'POST /test/access-ttl?seconds=N',
        'POST /test/refresh-ttl?seconds=N', 'POST /test/clients', 'POST /test/resources',
      ] });
  }
}

// An authorization request for a resource that names none of the resource's scopes gets the
// resource's defaultScope added (oidc-provider would otherwise grant nothing and answer
// access_denied when no other scope is requested; MCP clients often send no scope at all).
function addDefaultScopes(req, url) {
  const requested = url.searchParams.getAll('resource');
  if (!requested.length) return;
  const scopes = new Set((url.searchParams.get('scope') ?? '').split(' ').filter(Boolean));
  let added = false;
  for (const indicator of requested) {
    const r = resources.find((x) => x.indicator === indicator) ?? resources.find((x) => x.indicator === '*');
    if (!r || !r.defaultScope) continue;
    const available = r.scope.split(' ').filter(Boolean);
    if (available.some((sc) => scopes.has(sc))) continue;
    for (const sc of r.defaultScope.split(' ').filter(Boolean)) scopes.add(sc);
    added = true;
  }
  if (!added) return;
  url.searchParams.set('scope', [...scopes].join(' '));
  req.url = `${url.pathname}?${url.searchParams}`;
  log(`authorization request names no scope of its resource: scope set to "${url.searchParams.get('scope')}"`);
}

// ---------------------------------------------------------------------------------------------

server.on('request', async (req, res) => {
  const started = Date.now();
  if (settings.logRequests) {
    res.on('finish', () => log(`${req.method} ${req.url.replace(/([?&](?:code|token|refresh_token|code_verifier|client_secret|password)=)[^&]*/g, '$1…')} -> ${res.statusCode} (${Date.now() - started} ms)`));
  }
  try {
    const url = new URL(req.url, issuer);
    if (url.pathname.startsWith('/interaction/')) return await interaction(req, res, url);
    if (url.pathname === '/api/me' && settings.protectedApi) return await apiMe(req, res);
    if (url.pathname.startsWith('/test/') && settings.testEndpoints) return await testControl(req, res, url);
    if (url.pathname === '/auth' && req.method === 'GET') addDefaultScopes(req, url);
    if (url.pathname === '/.well-known/oauth-authorization-server') {
      // RFC 8414 metadata (what MCP clients look for): the same document as OIDC discovery.
      req.url = `/.well-known/openid-configuration${url.search}`;
    }
    return providerHandler(req, res);
  } catch (err) {
    log(`error ${req.method} ${req.url}: ${err.stack}`);
    if (!res.headersSent) send(res, err.status ?? 500, { error: err.status ? 'invalid_request' : 'server_error', error_description: err.message });
    else res.destroy();
  }
});

function stop(sig) {
  log(`${sig}: stopping`);
  server.close(() => process.exit(0));
  server.closeAllConnections();
  setTimeout(() => process.exit(0), 2000).unref();
}
process.on('SIGTERM', () => stop('SIGTERM'));
process.on('SIGINT', () => stop('SIGINT'));

log(`oidc-provider listening: issuer ${issuer}, role ${role}, ${accounts.size} account(s), ${(cfg.clients ?? []).length} static client(s), ${resources.length} resource(s)`);
started('ready');
process.stdout.write(`${JSON.stringify({ event: 'ready', issuer, port })}\n`);
