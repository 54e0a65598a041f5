#!/usr/bin/env node
// End-to-end self-test of idp.mjs: starts it (both roles), drives the login and consent pages
// like a browser would (plain HTTP, a cookie jar, no JavaScript), and checks discovery, the
// authorization code + PKCE flow with resource indicators, JWT access tokens, ID tokens,
// userinfo, refresh rotation, revocation, introspection, dynamic registration, /api/me and the
// /test/ endpoints. `node selftest.mjs` (or `npm run selftest`); exit 0 when all pass. The Go
// e2e tests run it (TestTheTestProviderBehavesAsItsREADMESays in e2e/idp_test.go).

import { spawn } from 'node:child_process';
import * as crypto from 'node:crypto';
import * as net from 'node:net';
import { fileURLToPath } from 'node:url';

const IDP = fileURLToPath(new URL('./idp.mjs', import.meta.url));
const MCP = 'http://127.0.0.1:9999/mcp';
const CB = 'http://127.0.0.1:9999/auth/callback';

let passed = 0;
let failed = 0;
function check(name, cond, detail) {
  if (cond) {
    passed += 1;
    console.log(`ok   ${name}`);
  } else {
    failed += 1;
    console.log(`FAIL ${name}${detail === undefined ? '' : `: ${typeof detail === 'string' ? detail : JSON.stringify(detail)}`}`);
  }
}
const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });

// ---- the subprocess ------------------------------------------------------------------------

async function start(config) {
  const proc = spawn(process.execPath, [IDP, '--config-json', JSON.stringify(config)], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  proc.stderr.on('data', (d) => { stderr += d; });
  const ready = await new Promise((resolve, reject) => {
    let buf = '';
    proc.stdout.on('data', (d) => {
      buf += d;
      const nl = buf.indexOf('\n');
      if (nl >= 0) resolve(JSON.parse(buf.slice(0, nl)));
    });
    proc.on('exit', (code) => reject(new Error(`idp exited ${code}: ${stderr}`)));
    // Half a second alone; the bound is wide because the e2e tests beside this one can starve
    // it (a CI run once saw 20 s pass), and it only turns a hang into a failure with stderr.
    setTimeout(() => reject(new Error(`idp not ready in 60s: ${stderr}`)), 60000);
  });
  return { ...ready, proc, stderr: () => stderr };
}

async function stop(idp) {
  const exited = new Promise((r) => { idp.proc.on('exit', (code, sig) => r({ code, sig })); });
  idp.proc.kill('SIGTERM');
  return exited;
}

// ---- a browser without JavaScript ------------------------------------------------------------

class Browser {
  jar = new Map();

  cookieHeader() {
    return [...this.jar].map(([k, v]) => `${k}=${v}`).join('; ');
  }

  async request(url, { method = 'GET', form } = {}) {
    const headers = { cookie: this.cookieHeader() };
    let body;
    if (form) {
      headers['content-type'] = 'application/x-www-form-urlencoded';
      body = new URLSearchParams(form).toString();
    }
    const res = await fetch(url, { method, headers, body, redirect: 'manual' });
    for (const c of res.headers.getSetCookie()) {
      const [pair, ...attrs] = c.split(';');
      const [k, v] = [pair.slice(0, pair.indexOf('=')).trim(), pair.slice(pair.indexOf('=') + 1)];
      if (attrs.some((a) => /expires=Thu, 01 Jan 1970/i.test(a)) || v === '') this.jar.delete(k);
      else this.jar.set(k, v);
    }
    return res;
  }

  // Follows redirects through login and consent until the provider redirects to a URL that is
  // not its own. Returns {url, pages} where pages lists what was shown.
  async authorize(issuer, params, { login, password, consent = 'approve' } = {}) {
    let url = `${issuer}/auth?${new URLSearchParams(params)}`;
    let method = 'GET';
    let form;
    const pages = [];
    for (let i = 0; i < 20; i += 1) {
      const res = await this.request(url, { method, form });
      if (res.status >= 300 && res.status < 400) {
        const loc = new URL(res.headers.get('location'), url).href;
        await res.arrayBuffer();
        if (!loc.startsWith(`${issuer}/`)) return { url: new URL(loc), pages };
        url = loc;
        method = 'GET';
        form = undefined;
        continue;
      }
      const html = await res.text();
      const action = (id) => html.match(new RegExp(`<form method="post" action="([^"]+)" id="${id}"`))?.[1];
      if (action('login-form')) {
        pages.push(html.includes('id="login-error"') ? 'login-error' : 'login');
        if (html.includes('id="login-error"')) return { html, pages };
        url = new URL(action('login-form'), url).href;
        method = 'POST';
        form = { login, password };
      } else if (action('consent-form')) {
        pages.push('consent');
        url = new URL(action(consent === 'approve' ? 'consent-form' : 'deny-form'), url).href;
        method = 'POST';
        form = consent === 'approve' ? { approve: 'yes' } : {};
      } else {
        return { html, status: res.status, pages };
      }
    }
    throw new Error('too many steps');
  }
}

// ---- OAuth helpers ---------------------------------------------------------------------------

function pkce() {
  const verifier = crypto.randomBytes(32).toString('base64url');
  return { verifier, challenge: crypto.createHash('sha256').update(verifier).digest('base64url') };
}

function decodeJWT(t) {
  const [h, p] = t.split('.');
  return { header: JSON.parse(Buffer.from(h, 'base64url')), payload: JSON.parse(Buffer.from(p, 'base64url')) };
}

async function verifyJWT(issuer, t) {
  const { keys } = await (await fetch(`${issuer}/jwks`)).json();
  const [h, p, s] = t.split('.');
  const { header } = decodeJWT(t);
  const jwk = keys.find((k) => k.kid === header.kid);
  if (!jwk) return false;
  return crypto.verify('sha256', Buffer.from(`${h}.${p}`), crypto.createPublicKey({ key: jwk, format: 'jwk' }), Buffer.from(s, 'base64url'));
}

const tally = { token: {}, ok: {}, error: {} };
async function post(url, form, { basic, bearer } = {}) {
  const r = await post0(url, form, { basic, bearer });
  if (new URL(url).pathname === '/token') {
    const gt = form.grant_type;
    tally.token[gt] = (tally.token[gt] ?? 0) + 1;
    const b = r.status < 400 ? tally.ok : tally.error;
    b[gt] = (b[gt] ?? 0) + 1;
  }
  return r;
}
async function post0(url, form, { basic, bearer } = {}) {
  const headers = { 'content-type': 'application/x-www-form-urlencoded' };
  if (basic) headers.authorization = `Basic ${Buffer.from(`${encodeURIComponent(basic[0])}:${encodeURIComponent(basic[1])}`).toString('base64')}`;
  if (bearer) headers.authorization = `Bearer ${bearer}`;
  const res = await fetch(url, { method: 'POST', headers, body: new URLSearchParams(form).toString() });
  const text = await res.text();
  let json;
  try { json = JSON.parse(text); } catch { json = undefined; }
  return { status: res.status, json, text, headers: res.headers };
}

async function get(url, bearer) {
  const res = await fetch(url, { headers: bearer ? { authorization: `Bearer ${bearer}` } : {} });
  const text = await res.text();
  let json;
  try { json = JSON.parse(text); } catch { json = undefined; }
  return { status: res.status, json, headers: res.headers };
}

const accounts = [
  { id: 'alice', password: 'alice-pw', email: 'alice@example.test', name: 'Alice Liddell' },
  { id: 'bob', password: 'bob-pw', email: 'bob@example.test', name: 'Bob Builder' },
];

// ============================================================================================
// Role 1: the deployment's issuer

async function issuerRole() {
  console.log('# role: issuer');
  Object.assign(tally, { token: {}, ok: {}, error: {} });
  const idp = await start({
    role: 'issuer',
    accounts,
    clients: [
      { client_id: 'urlflow-web', client_secret: 'urlflow-web-secret', redirect_uris: [CB], grant_types: ['authorization_code', 'refresh_token'], token_endpoint_auth_method: 'client_secret_basic' },
      { client_id: 'urlflow-post', client_secret: 'urlflow-post-secret', redirect_uris: [CB], grant_types: ['authorization_code', 'refresh_token'], token_endpoint_auth_method: 'client_secret_post' },
    ],
    resources: [{ indicator: MCP, scope: 'mcp', accessTokenFormat: 'jwt', accessTokenTTL: 600 }],
    ttl: { accessToken: 300 },
  });
  const { issuer } = idp;
  try {
    check('ready line issuer is http://127.0.0.1:PORT', issuer === `http://127.0.0.1:${idp.port}`, issuer);

    // Discovery
    const disco = (await get(`${issuer}/.well-known/openid-configuration`)).json;
    for (const f of ['authorization_endpoint', 'token_endpoint', 'jwks_uri', 'userinfo_endpoint', 'revocation_endpoint', 'introspection_endpoint', 'registration_endpoint']) {
      check(`discovery ${f}`, typeof disco[f] === 'string' && disco[f].startsWith(issuer), disco[f]);
    }
    check('discovery issuer', disco.issuer === issuer);
    check('discovery authorization_response_iss_parameter_supported', disco.authorization_response_iss_parameter_supported === true);
    check('discovery code_challenge_methods_supported = [S256]', JSON.stringify(disco.code_challenge_methods_supported) === '["S256"]');
    const rfc8414 = (await get(`${issuer}/.well-known/oauth-authorization-server`)).json;
    check('RFC 8414 metadata = OIDC discovery', JSON.stringify(rfc8414) === JSON.stringify(disco));

    // Wrong password
    const b0 = new Browser();
    const p0 = pkce();
    const bad = await b0.authorize(issuer, { client_id: 'urlflow-web', response_type: 'code', redirect_uri: CB, scope: 'openid', state: 's', code_challenge: p0.challenge, code_challenge_method: 'S256' }, { login: 'alice', password: 'nope' });
    check('wrong password shows the login form again with #login-error', bad.pages.join() === 'login,login-error', bad.pages);

    // PKCE required
    const b1 = new Browser();
    const nopkce = await b1.authorize(issuer, { client_id: 'urlflow-web', response_type: 'code', redirect_uri: CB, scope: 'openid', state: 's1' });
    check('authorization without code_challenge -> error=invalid_request + iss', nopkce.url?.searchParams.get('error') === 'invalid_request' && nopkce.url?.searchParams.get('iss') === issuer, nopkce.url?.href);

    // Full flow: OIDC sign-in + MCP resource, confidential client (client_secret_basic)
    const b = new Browser();
    const p = pkce();
    const r = await b.authorize(issuer, {
      client_id: 'urlflow-web', response_type: 'code', redirect_uri: CB, scope: 'openid email profile mcp',
      state: 'st-1', nonce: 'nonce-1', code_challenge: p.challenge, code_challenge_method: 'S256', resource: MCP,
    }, { login: 'alice', password: 'alice-pw' });
    check('pages shown: login, consent', r.pages.join() === 'login,consent', r.pages);
    const q = r.url.searchParams;
    check('redirect to the client with code', r.url.origin + r.url.pathname === CB && !!q.get('code'), r.url.href);
    check('redirect carries state', q.get('state') === 'st-1');
    check('redirect carries iss (RFC 9207)', q.get('iss') === issuer, q.get('iss'));

    const wrongVerifier = await post(`${issuer}/token`, { grant_type: 'authorization_code', code: q.get('code'), redirect_uri: CB, code_verifier: pkce().verifier, resource: MCP }, { basic: ['urlflow-web', 'urlflow-web-secret'] });
    check('wrong code_verifier -> invalid_grant', wrongVerifier.json?.error === 'invalid_grant', wrongVerifier.json);

    // The failed attempt consumed the code? (oidc-provider checks PKCE before consuming: try again)
    let tok = await post(`${issuer}/token`, { grant_type: 'authorization_code', code: q.get('code'), redirect_uri: CB, code_verifier: p.verifier, resource: MCP }, { basic: ['urlflow-web', 'urlflow-web-secret'] });
    check('code exchange (client_secret_basic, resource=MCP)', tok.status === 200 && tok.json.access_token, tok.json);
    const at = decodeJWT(tok.json.access_token);
    check('access token is a JWT with typ at+jwt, RS256', at.header.typ === 'at+jwt' && at.header.alg === 'RS256', at.header);
    check('access token aud = MCP resource', at.payload.aud === MCP, at.payload.aud);
    check('access token sub = alice, iss = issuer', at.payload.sub === 'alice' && at.payload.iss === issuer, at.payload);
    check('access token scope = mcp, has exp/iat/jti/client_id', at.payload.scope === 'mcp' && at.payload.exp - at.payload.iat === 600 && at.payload.jti && at.payload.client_id === 'urlflow-web', at.payload);
    check('access token signature verifies with JWKS', await verifyJWT(issuer, tok.json.access_token));
    check('token response expires_in = 600 (resource accessTokenTTL)', tok.json.expires_in === 600, tok.json.expires_in);
    const idt = decodeJWT(tok.json.id_token);
    check('ID token: nonce, aud=client, sub=alice, email', idt.payload.nonce === 'nonce-1' && idt.payload.aud === 'urlflow-web' && idt.payload.sub === 'alice' && idt.payload.email === 'alice@example.test', idt.payload);
    check('ID token signature verifies', await verifyJWT(issuer, tok.json.id_token));
    check('refresh token issued (refreshTokens=always, no offline_access)', typeof tok.json.refresh_token === 'string');

    // Refresh with rotation (confidential client)
    const rt1 = tok.json.refresh_token;
    const ref1 = await post(`${issuer}/token`, { grant_type: 'refresh_token', refresh_token: rt1 }, { basic: ['urlflow-web', 'urlflow-web-secret'] });
    check('refresh (no resource param) -> new JWT for MCP', ref1.status === 200 && decodeJWT(ref1.json.access_token).payload.aud === MCP, ref1.json);
    check('refresh rotates the refresh token', ref1.json.refresh_token && ref1.json.refresh_token !== rt1);
    check('refresh returns a new ID token', !!ref1.json.id_token);
    const ref1b = await post(`${issuer}/token`, { grant_type: 'refresh_token', refresh_token: rt1 }, { basic: ['urlflow-web', 'urlflow-web-secret'] });
    check('reusing the rotated refresh token -> invalid_grant', ref1b.json?.error === 'invalid_grant', ref1b.json);
    const ref1c = await post(`${issuer}/token`, { grant_type: 'refresh_token', refresh_token: ref1.json.refresh_token }, { basic: ['urlflow-web', 'urlflow-web-secret'] });
    check('...and that reuse revoked the whole grant (new refresh token dead too)', ref1c.json?.error === 'invalid_grant', ref1c.json);

    // Authorization code replay (new grant first)
    const p1 = pkce();
    const r1 = await b.authorize(issuer, { client_id: 'urlflow-web', response_type: 'code', redirect_uri: CB, scope: 'openid mcp', state: 'st-r', code_challenge: p1.challenge, code_challenge_method: 'S256', resource: MCP });
    check('same browser, same client, grant revoked: consent again, no login', r1.pages.join() === 'consent', r1.pages);
    const c1 = { grant_type: 'authorization_code', code: r1.url.searchParams.get('code'), redirect_uri: CB, code_verifier: p1.verifier, resource: MCP };
    const t1 = await post(`${issuer}/token`, c1, { basic: ['urlflow-web', 'urlflow-web-secret'] });
    const replay = await post(`${issuer}/token`, c1, { basic: ['urlflow-web', 'urlflow-web-secret'] });
    check('code replay -> invalid_grant', t1.status === 200 && replay.json?.error === 'invalid_grant', replay.json);
    const afterReplay = await post(`${issuer}/token`, { grant_type: 'refresh_token', refresh_token: t1.json.refresh_token }, { basic: ['urlflow-web', 'urlflow-web-secret'] });
    check('...and the replay revoked the grant (its refresh token is dead)', afterReplay.json?.error === 'invalid_grant', afterReplay.json);

    // Second sign-in, same browser (SSO, consent remembered), client_secret_post, no resource:
    // opaque access token for userinfo.
    const p2 = pkce();
    const r2 = await b.authorize(issuer, { client_id: 'urlflow-post', response_type: 'code', redirect_uri: CB, scope: 'openid email profile', state: 'st-2', nonce: 'nonce-2', code_challenge: p2.challenge, code_challenge_method: 'S256' });
    check('second client, same browser: no login (SSO), consent for the new client only', r2.pages.join() === 'consent', r2.pages);
    const tok2 = await post(`${issuer}/token`, { grant_type: 'authorization_code', code: r2.url.searchParams.get('code'), redirect_uri: CB, code_verifier: p2.verifier, client_id: 'urlflow-post', client_secret: 'urlflow-post-secret' });
    check('code exchange (client_secret_post, no resource)', tok2.status === 200, tok2.json);
    check('no resource -> opaque access token (for userinfo)', tok2.json.access_token.split('.').length === 1, tok2.json.access_token);
    const ui = await get(`${issuer}/me`, tok2.json.access_token);
    check('userinfo: sub, email, name', ui.status === 200 && ui.json.sub === 'alice' && ui.json.email === 'alice@example.test' && ui.json.name === 'Alice Liddell', ui.json);
    const uiJwt = await get(`${issuer}/me`, ref1.json.access_token);
    check('userinfo rejects a resource (MCP) access token', uiJwt.status === 401, uiJwt.json);

    // Introspection (RFC 7662)
    const intro = await post(`${issuer}/token/introspection`, { token: tok2.json.access_token }, { basic: ['urlflow-post', 'urlflow-post-secret'] });
    check('introspection of opaque access token: active, sub, scope', intro.json?.active === true && intro.json.sub === 'alice' && intro.json.scope === 'openid email profile' && intro.json.client_id === 'urlflow-post', intro.json);
    const introRT = await post(`${issuer}/token/introspection`, { token: tok2.json.refresh_token, token_type_hint: 'refresh_token' }, { basic: ['urlflow-post', 'urlflow-post-secret'] });
    check('introspection of refresh token: active, sub, client_id', introRT.json?.active === true && introRT.json.sub === 'alice' && introRT.json.client_id === 'urlflow-post', introRT.json);
    const introJWT = await post(`${issuer}/token/introspection`, { token: ref1.json.access_token }, { basic: ['urlflow-web', 'urlflow-web-secret'] });
    check('introspection of a JWT access token -> 400 unsupported_token_type', introJWT.status === 400 && introJWT.json?.error === 'unsupported_token_type', introJWT.json);

    // Revocation (RFC 7009)
    const rev = await post(`${issuer}/token/revocation`, { token: tok2.json.refresh_token, token_type_hint: 'refresh_token' }, { basic: ['urlflow-post', 'urlflow-post-secret'] });
    check('revocation of refresh token -> 200', rev.status === 200, rev);
    const afterRev = await post(`${issuer}/token`, { grant_type: 'refresh_token', refresh_token: tok2.json.refresh_token }, { basic: ['urlflow-post', 'urlflow-post-secret'] });
    check('refresh with revoked token -> invalid_grant', afterRev.json?.error === 'invalid_grant', afterRev.json);
    const introAfter = await post(`${issuer}/token/introspection`, { token: tok2.json.access_token }, { basic: ['urlflow-post', 'urlflow-post-secret'] });
    check('revoking the refresh token revoked the grant: its access token is inactive', introAfter.json?.active === false, introAfter.json);
    const revJWT = await post(`${issuer}/token/revocation`, { token: ref1.json.access_token }, { basic: ['urlflow-web', 'urlflow-web-secret'] });
    check('revocation of a JWT access token -> 400 unsupported_token_type', revJWT.status === 400 && revJWT.json?.error === 'unsupported_token_type', revJWT.json);

    // Unknown resource
    const b3 = new Browser();
    const p3 = pkce();
    const badRes = await b3.authorize(issuer, { client_id: 'urlflow-web', response_type: 'code', redirect_uri: CB, scope: 'mcp', state: 's3', code_challenge: p3.challenge, code_challenge_method: 'S256', resource: 'http://127.0.0.1:1/other' });
    check('unknown resource -> error=invalid_target', badRes.url?.searchParams.get('error') === 'invalid_target', badRes.url?.href ?? badRes.html);

    // Dynamic registration of a public client (what MCP clients do) and a flow with it
    const reg = await fetch(`${issuer}/reg`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ client_name: 'some MCP client', redirect_uris: ['http://127.0.0.1:7777/callback'], grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], token_endpoint_auth_method: 'none' }),
    });
    const regJ = await reg.json();
    check('dynamic registration of a public client -> 201, client_id, no secret', reg.status === 201 && regJ.client_id && !regJ.client_secret && regJ.token_endpoint_auth_method === 'none', regJ);
    const b4 = new Browser();
    const p4 = pkce();
    const r4 = await b4.authorize(issuer, { client_id: regJ.client_id, response_type: 'code', redirect_uri: 'http://127.0.0.1:7777/callback', state: 's4', code_challenge: p4.challenge, code_challenge_method: 'S256', resource: MCP }, { login: 'bob', password: 'bob-pw' });
    const tok4 = await post(`${issuer}/token`, { grant_type: 'authorization_code', client_id: regJ.client_id, code: r4.url.searchParams.get('code'), redirect_uri: 'http://127.0.0.1:7777/callback', code_verifier: p4.verifier, resource: MCP });
    const at4 = tok4.json?.access_token && decodeJWT(tok4.json.access_token).payload;
    check('public client flow without scope: JWT for MCP with sub=bob, scope=mcp (defaultScope), refresh token', at4?.aud === MCP && at4.sub === 'bob' && at4.scope === 'mcp' && !!tok4.json.refresh_token && !tok4.json.id_token, tok4.json);
    const ref4 = await post(`${issuer}/token`, { grant_type: 'refresh_token', client_id: regJ.client_id, refresh_token: tok4.json.refresh_token, resource: MCP });
    check('public client refresh (resource param) rotates', ref4.status === 200 && ref4.json.refresh_token !== tok4.json.refresh_token && decodeJWT(ref4.json.access_token).payload.aud === MCP, ref4.json);

    // Access-token TTL control
    await post(`${issuer}/test/access-ttl?seconds=5`, {});
    const ref5 = await post(`${issuer}/token`, { grant_type: 'refresh_token', client_id: regJ.client_id, refresh_token: ref4.json.refresh_token });
    const at5 = decodeJWT(ref5.json.access_token).payload;
    check('POST /test/access-ttl?seconds=5 -> next access token lives 5 s', ref5.json.expires_in === 5 && at5.exp - at5.iat === 5, ref5.json);

    // /test/revoke
    const rv = await post(`${issuer}/test/revoke?account=bob`, {});
    check('POST /test/revoke?account=bob -> revoked_grants 1', rv.json?.revoked_grants === 1, rv.json);
    const ref6 = await post(`${issuer}/token`, { grant_type: 'refresh_token', client_id: regJ.client_id, refresh_token: ref5.json.refresh_token });
    check('refresh after /test/revoke -> invalid_grant', ref6.json?.error === 'invalid_grant', ref6.json);

    // Stats
    const st = (await get(`${issuer}/test/stats`)).json;
    const same = (a, b) => JSON.stringify(Object.entries(a).sort()) === JSON.stringify(Object.entries(b).sort());
    check('GET /test/stats counts token calls by grant_type (= what this test sent)', same(st.token, tally.token) && same(st.token_ok, tally.ok) && same(st.token_error, tally.error), { stats: st, sent: tally });
  } finally {
    const ex = await stop(idp);
    check('SIGTERM -> exit 0', ex.code === 0, ex);
    if (failed) console.log(idp.stderr());
  }
}

// ============================================================================================
// Role 2: a third-party provider ("acme") with a protected API

async function thirdPartyRole(format) {
  console.log(`# role: thirdparty (${format} access tokens)`);
  const config = {
    role: 'thirdparty',
    accounts,
    scopes: ['acme.read', 'acme.write'],
    clients: [{ client_id: 'urlflow-acme', client_secret: 'acme-secret', redirect_uris: ['http://127.0.0.1:9999/connect/callback'], grant_types: ['authorization_code', 'refresh_token'], token_endpoint_auth_method: 'client_secret_basic' }],
    ttl: { accessToken: 60 },
  };
  if (format === 'jwt') {
    config.resources = [{ indicator: '{issuer}/api', scope: 'acme.read acme.write', accessTokenFormat: 'jwt' }];
    config.defaultResource = '{issuer}/api';
    config.scopes = [];
  }
  const idp = await start(config);
  const { issuer } = idp;
  const cb = 'http://127.0.0.1:9999/connect/callback';
  const basic = ['urlflow-acme', 'acme-secret'];
  try {
    const b = new Browser();
    const p = pkce();
    const r = await b.authorize(issuer, { client_id: 'urlflow-acme', response_type: 'code', redirect_uri: cb, scope: 'openid profile acme.read', state: 'c1', code_challenge: p.challenge, code_challenge_method: 'S256' }, { login: 'alice', password: 'alice-pw' });
    check('connect flow: login + one consent, iss in redirect', r.pages.join() === 'login,consent' && r.url.searchParams.get('iss') === issuer, { pages: r.pages, url: r.url?.href });
    const tok = await post(`${issuer}/token`, { grant_type: 'authorization_code', code: r.url.searchParams.get('code'), redirect_uri: cb, code_verifier: p.verifier }, { basic });
    check(`code exchange -> ${format} access token + refresh token`, tok.status === 200 && (tok.json.access_token.split('.').length === 3) === (format === 'jwt') && !!tok.json.refresh_token, tok.json);
    check('token scope includes acme.read', tok.json.scope?.split(' ').includes('acme.read'), tok.json.scope);
    if (format === 'jwt') check('JWT aud = {issuer}/api', decodeJWT(tok.json.access_token).payload.aud === `${issuer}/api`);

    let me = await get(`${issuer}/api/me`, tok.json.access_token);
    check('/api/me with a good token -> 200 {account: alice, scope}', me.status === 200 && me.json.account === 'alice' && me.json.scope.includes('acme.read'), me.json);
    me = await get(`${issuer}/api/me`);
    check('/api/me without token -> 401 + WWW-Authenticate', me.status === 401 && /^Bearer /.test(me.headers.get('www-authenticate')), me.json);
    me = await get(`${issuer}/api/me`, 'garbage');
    check('/api/me with garbage -> 401 invalid_token', me.status === 401 && me.json.error === 'invalid_token', me.json);
    if (format === 'opaque') {
      const ui = await get(`${issuer}/me`, tok.json.access_token);
      check('userinfo works with the same opaque token', ui.status === 200 && ui.json.sub === 'alice', ui.json);
    }

    // Short-lived access tokens; refresh
    await post(`${issuer}/test/stats/reset`, {});
    // 2 s, not 1: exp is iat + TTL in whole seconds and iat is rounded down, so a 1 s token
    // issued late in a second could be expired a millisecond later. A 2 s token lives at
    // least 1 s and at most 2 s.
    await post(`${issuer}/test/access-ttl?seconds=2`, {});
    const ref = await post(`${issuer}/token`, { grant_type: 'refresh_token', refresh_token: tok.json.refresh_token }, { basic });
    check('refresh -> expires_in 2, rotated', ref.status === 200 && ref.json.expires_in === 2 && ref.json.refresh_token !== tok.json.refresh_token, ref.json);
    me = await get(`${issuer}/api/me`, ref.json.access_token);
    check('/api/me with the fresh 2 s token -> 200', me.status === 200, me.json);
    await sleep(2100);
    me = await get(`${issuer}/api/me`, ref.json.access_token);
    check('/api/me with the expired token -> 401', me.status === 401 && me.json.error === 'invalid_token', me.json);
    await post(`${issuer}/test/access-ttl`, {}); // back to the configured TTL
    const ref2 = await post(`${issuer}/token`, { grant_type: 'refresh_token', refresh_token: ref.json.refresh_token }, { basic });
    check('refresh again -> expires_in back to 60', ref2.status === 200 && ref2.json.expires_in === 60, ref2.json);
    const st = (await get(`${issuer}/test/stats`)).json;
    check('/test/stats: exactly two refreshes since reset', st.token.refresh_token === 2 && Object.keys(st.token).length === 1 && st.api.ok === 1 && st.api.unauthorized === 1, st);

    // Revocation
    if (format === 'opaque') {
      const rev = await post(`${issuer}/token/revocation`, { token: ref2.json.access_token, token_type_hint: 'access_token' }, { basic });
      me = await get(`${issuer}/api/me`, ref2.json.access_token);
      check('RFC 7009-revoked access token -> /api/me 401', rev.status === 200 && me.status === 401, me.json);
      const deadRefresh = await post(`${issuer}/token`, { grant_type: 'refresh_token', refresh_token: ref2.json.refresh_token }, { basic });
      check('revoking an access token also revokes the refresh tokens of its grant', deadRefresh.json?.error === 'invalid_grant', deadRefresh.json);
      const p2 = pkce();
      const r2 = await b.authorize(issuer, { client_id: 'urlflow-acme', response_type: 'code', redirect_uri: cb, scope: 'openid profile acme.read', state: 'c2', code_challenge: p2.challenge, code_challenge_method: 'S256' });
      const t2 = await post(`${issuer}/token`, { grant_type: 'authorization_code', code: r2.url.searchParams.get('code'), redirect_uri: cb, code_verifier: p2.verifier }, { basic });
      check('...but the consent stays: reconnecting shows no page at all', r2.pages.length === 0 && t2.status === 200, { pages: r2.pages, t2: t2.json });
      ref2.json = t2.json;
    } else {
      const rev = await post(`${issuer}/token/revocation`, { token: ref2.json.refresh_token, token_type_hint: 'refresh_token' }, { basic });
      me = await get(`${issuer}/api/me`, ref2.json.access_token);
      check('RFC 7009-revoked refresh token revokes the grant -> JWT rejected by /api/me', rev.status === 200 && me.status === 401, me.json);
      // new grant for the /test/revoke check
      const p2 = pkce();
      const r2 = await b.authorize(issuer, { client_id: 'urlflow-acme', response_type: 'code', redirect_uri: cb, scope: 'openid profile acme.read', state: 'c2', code_challenge: p2.challenge, code_challenge_method: 'S256' });
      const t2 = await post(`${issuer}/token`, { grant_type: 'authorization_code', code: r2.url.searchParams.get('code'), redirect_uri: cb, code_verifier: p2.verifier }, { basic });
      check('new connect after revocation asks for consent again (grant gone)', r2.pages.join() === 'consent' && t2.status === 200, { pages: r2.pages, t2: t2.json });
      ref2.json = t2.json;
    }
    me = await get(`${issuer}/api/me`, ref2.json.access_token);
    check('/api/me before /test/revoke -> 200', me.status === 200, me.json);
    const rv = await post(`${issuer}/test/revoke?account=alice`, {});
    check('POST /test/revoke?account=alice', rv.json?.revoked_grants >= 1, rv.json);
    me = await get(`${issuer}/api/me`, ref2.json.access_token);
    check('/api/me after /test/revoke -> 401', me.status === 401, me.json);
    const dead = await post(`${issuer}/token`, { grant_type: 'refresh_token', refresh_token: ref2.json.refresh_token }, { basic });
    check('refresh after /test/revoke -> invalid_grant', dead.json?.error === 'invalid_grant', dead.json);

    if (format === 'opaque') {
      // Runtime client (test endpoint) with auto-consent-free check of deny
      const add = await fetch(`${issuer}/test/clients`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ client_id: 'late', client_secret: 'late-secret', redirect_uris: ['http://127.0.0.1:8888/cb'], grant_types: ['authorization_code', 'refresh_token'] }) });
      check('POST /test/clients adds a client', add.status === 201);
      const b2 = new Browser();
      const p3 = pkce();
      const r3 = await b2.authorize(issuer, { client_id: 'late', response_type: 'code', redirect_uri: 'http://127.0.0.1:8888/cb', scope: 'acme.read', state: 'd', code_challenge: p3.challenge, code_challenge_method: 'S256' }, { login: 'bob', password: 'bob-pw', consent: 'deny' });
      check('deny on the consent page -> error=access_denied', r3.url?.searchParams.get('error') === 'access_denied', r3.url?.href);
    }
  } finally {
    await stop(idp);
    if (failed) console.log(idp.stderr());
  }
}

async function autoConsent() {
  console.log('# consent: auto');
  const idp = await start({ accounts, consent: 'auto', clients: [{ client_id: 'c', client_secret: 's', redirect_uris: [CB], grant_types: ['authorization_code', 'refresh_token'] }], resources: [{ indicator: '*', scope: 'mcp' }] });
  try {
    const b = new Browser();
    const p = pkce();
    const anyRes = 'http://127.0.0.1:4242/mcp';
    const r = await b.authorize(idp.issuer, { client_id: 'c', response_type: 'code', redirect_uri: CB, scope: 'openid mcp', state: 'a', code_challenge: p.challenge, code_challenge_method: 'S256', resource: anyRes }, { login: 'alice', password: 'alice-pw' });
    check('consent "auto": only the login page is shown', r.pages.join() === 'login' && !!r.url?.searchParams.get('code'), r.pages);
    const tok = await post(`${idp.issuer}/token`, { grant_type: 'authorization_code', code: r.url.searchParams.get('code'), redirect_uri: CB, code_verifier: p.verifier, resource: anyRes }, { basic: ['c', 's'] });
    check('resource "*" accepts any indicator as audience', decodeJWT(tok.json.access_token).payload.aud === anyRes, tok.json);
  } finally {
    await stop(idp);
  }
}

async function offlineAccessMode() {
  console.log('# refreshTokens: offline_access, fixed port, runtime resources, /test/grants');
  const port = await new Promise((resolve) => {
    const srv = net.createServer().listen(0, '127.0.0.1', () => { const p = srv.address().port; srv.close(() => resolve(p)); });
  });
  const idp = await start({ port, accounts, refreshTokens: 'offline_access', clients: [{ client_id: 'c', client_secret: 's', redirect_uris: [CB], grant_types: ['authorization_code', 'refresh_token'] }] });
  const { issuer } = idp;
  try {
    check('config port is used', idp.port === port && issuer === `http://127.0.0.1:${port}`, idp);
    const add = await fetch(`${issuer}/test/resources`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ indicator: '{issuer}/late', scope: 'late.read', accessTokenFormat: 'jwt' }) });
    check('POST /test/resources adds a resource', add.status === 201);
    const b = new Browser();
    const flow = async (extra) => {
      const p = pkce();
      const r = await b.authorize(issuer, { client_id: 'c', response_type: 'code', redirect_uri: CB, state: 'o', code_challenge: p.challenge, code_challenge_method: 'S256', ...extra }, { login: 'alice', password: 'alice-pw' });
      const t = await post(`${issuer}/token`, { grant_type: 'authorization_code', code: r.url.searchParams.get('code'), redirect_uri: CB, code_verifier: p.verifier }, { basic: ['c', 's'] });
      return { pages: r.pages, tok: t.json };
    };
    let f = await flow({ scope: 'openid offline_access' });
    check('offline_access without prompt=consent -> no refresh token (offline_access dropped)', !f.tok.refresh_token && f.tok.scope === 'openid', f);
    f = await flow({ scope: 'openid offline_access', prompt: 'consent' });
    check('offline_access with prompt=consent -> refresh token, one consent page', !!f.tok.refresh_token && f.tok.scope === 'openid offline_access' && f.pages.join() === 'consent', f);
    f = await flow({ scope: 'late.read', resource: `${issuer}/late` });
    check('runtime resource: JWT with aud {issuer}/late, scope late.read (no refresh token: no offline_access)', decodeJWT(f.tok.access_token).payload.aud === `${issuer}/late` && f.tok.scope === 'late.read' && !f.tok.refresh_token, f);
    await fetch(`${issuer}/test/resources`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ indicator: '{issuer}/strict', scope: 'strict.read', defaultScope: '' }) });
    const p9 = pkce();
    const r9 = await b.authorize(issuer, { client_id: 'c', response_type: 'code', redirect_uri: CB, state: 'x', code_challenge: p9.challenge, code_challenge_method: 'S256', resource: `${issuer}/strict` });
    check('resource with defaultScope "" and no scope requested -> error=access_denied (oidc-provider behaviour)', r9.url?.searchParams.get('error') === 'access_denied', r9.url?.href);
    const g = (await get(`${issuer}/test/grants?account=alice`)).json;
    check('GET /test/grants lists the grant of alice/c with its tokens', g.grants.length === 1 && g.grants[0].client_id === 'c' && g.grants[0].tokens.RefreshToken === 1, g);
  } finally {
    await stop(idp);
  }
}

try {
  await offlineAccessMode();
  await issuerRole();
  await thirdPartyRole('opaque');
  await thirdPartyRole('jwt');
  await autoConsent();
} catch (err) {
  failed += 1;
  console.log(`FAIL unexpected: ${err.stack}`);
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
