// Package issuertest runs an OpenID provider inside the test process, for tests of code that
// relies on one: urlflow's resource server, its browser sign-in and the pages built on them.
// It offers discovery, a JWKS with rotating RSA keys, access tokens minted with any claims,
// the authorization code flow with PKCE and nonce, and token introspection (RFC 7662).
//
// The one idea to hold: the issuer is as strict as a real one where the client is concerned
// (client authentication, redirect URI, PKCE S256, single-use codes), so that a client that
// sends something wrong fails here as it would in production; it misbehaves only where a
// test asks it to (SetAnswer, Override, tokens the test signs).
package issuertest

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"golang.org/x/oauth2"
)

// Paths of the issuer's endpoints, under its URL.
const (
	discoveryPath     = "/.well-known/openid-configuration"
	authorizationPath = "/authorize"
	tokenPath         = "/token"
	jwksPath          = "/jwks"
	introspectionPath = "/introspect"
)

// Lifetimes of what the issuer hands out.
const (
	accessTokenTTL = 10 * time.Minute
	idTokenTTL     = 5 * time.Minute
)

// Issuer is an OpenID provider running on a local httptest server for one test. It has one
// registered confidential client, ClientID with ClientSecret.
type Issuer struct {
	// URL is the issuer identifier, as discovery and every token it signs name it.
	URL string
	// Endpoints, as the discovery document names them.
	AuthorizationEndpoint string
	TokenEndpoint         string
	JWKSURI               string
	IntrospectionEndpoint string
	// ClientID and ClientSecret identify the registered client. The secret holds characters
	// that HTTP basic authentication must form-encode (RFC 6749, 2.3.1), so a client that
	// forgets to is refused.
	ClientID     string
	ClientSecret string

	srv *httptest.Server

	mu        sync.Mutex
	keys      []*Key // published; the last one signs
	redirects []string
	answer    Answer
	codes     map[string]grant
	opaque    map[string]map[string]any
	overrides map[string]http.Handler
	requests  map[string]int
}

// grant is what an authorization code stands for until it is exchanged.
type grant struct {
	user        User
	redirectURI string
	challenge   string
	nonce       string
	scope       string
	resource    string
}

// User is someone who can sign in at the issuer, with what its ID tokens say of them.
type User struct {
	Subject           string
	PreferredUsername string
	Name              string
	Email             string
	// Groups, when set, is the groups claim of the ID token.
	Groups []string
}

// Answer is how the authorization endpoint answers the authorization requests that follow
// SetAnswer.
type Answer struct {
	// User signs in and consents. With no User and no Error, the issuer answers
	// login_required: nobody is signed in.
	User User
	// Error, when set, is the OAuth error code sent back instead of a code, such as
	// access_denied.
	Error string
	// Iss, when set, is sent as the iss parameter of the answer (RFC 9207): the issuer's own
	// URL, or another one to test a mix-up.
	Iss string
}

// Start starts an issuer with one signing key and stops it when the test ends. It allows
// no redirect URI until AllowRedirect.
func Start(t testing.TB) *Issuer {
	t.Helper()
	i := &Issuer{
		ClientID:     "urlflow",
		ClientSecret: rand.Text() + "+/:%",
		keys:         []*Key{NewKey(t)},
		codes:        map[string]grant{},
		opaque:       map[string]map[string]any{},
		overrides:    map[string]http.Handler{},
		requests:     map[string]int{},
	}
	i.srv = httptest.NewServer(http.HandlerFunc(i.serve))
	t.Cleanup(i.srv.Close)
	i.URL = i.srv.URL
	i.AuthorizationEndpoint = i.URL + authorizationPath
	i.TokenEndpoint = i.URL + tokenPath
	i.JWKSURI = i.URL + jwksPath
	i.IntrospectionEndpoint = i.URL + introspectionPath
	return i
}

// AllowRedirect registers uri as a redirect URI of the client. The authorization endpoint
// sends the browser back only to a registered URI, compared exactly.
func (i *Issuer) AllowRedirect(uri string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.redirects = append(i.redirects, uri)
}

// SetAnswer sets how the authorization endpoint answers from now on.
func (i *Issuer) SetAnswer(a Answer) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.answer = a
}

// Key returns the key that signs the issuer's tokens now.
func (i *Issuer) Key() *Key {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.keys[len(i.keys)-1]
}

// RotateKey publishes a new key, with a new key ID, and signs with it from now on. The
// older keys stay published, as a real issuer keeps them while their tokens live.
func (i *Issuer) RotateKey(t testing.TB) *Key {
	t.Helper()
	k := NewKey(t)
	i.mu.Lock()
	defer i.mu.Unlock()
	i.keys = append(i.keys, k)
	return k
}

// AccessClaims returns the claims of a valid access token (RFC 9068) of the issuer for
// subject and audience, valid for ten minutes from now. Change them to make an invalid
// one.
func (i *Issuer) AccessClaims(subject, audience string) map[string]any {
	now := time.Now()
	return map[string]any{
		"iss": i.URL, "sub": subject, "aud": audience, "client_id": i.ClientID,
		"iat": now.Unix(), "exp": now.Add(accessTokenTTL).Unix(), "jti": rand.Text(),
	}
}

// AccessToken returns a JWT with claims, signed with the issuer's current key.
func (i *Issuer) AccessToken(t testing.TB, claims map[string]any) string {
	t.Helper()
	return i.Key().Sign(t, claims)
}

// OpaqueToken returns a new opaque token that the introspection endpoint reports as active,
// with claims. Every other token is inactive there.
func (i *Issuer) OpaqueToken(claims map[string]any) string {
	token := "opaque-" + rand.Text()
	i.mu.Lock()
	defer i.mu.Unlock()
	i.opaque[token] = claims
	return token
}

// Override makes the endpoint at endpointURL (one of the Issuer's endpoint URLs) answer with
// h instead, for tests of an issuer that misbehaves. A nil h gives the endpoint back to the
// issuer.
func (i *Issuer) Override(endpointURL string, h http.Handler) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if h == nil {
		delete(i.overrides, pathOf(endpointURL))
		return
	}
	i.overrides[pathOf(endpointURL)] = h
}

// Reply is a handler for Override that answers with status, a Content-Type and a body, as
// a misbehaving endpoint might.
func Reply(status int, contentType, body string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		io.WriteString(w, body)
	})
}

// Requests returns how many requests the endpoint at endpointURL has received.
func (i *Issuer) Requests(endpointURL string) int {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.requests[pathOf(endpointURL)]
}

// Authorize sends a browser to authURL without following the answer, and returns where the
// issuer sends it back: the redirect URI with the code or the error. It fails the test
// unless the issuer redirects.
func (i *Issuer) Authorize(t testing.TB, authURL string) *url.URL {
	t.Helper()
	browser := &http.Client{
		Timeout:       10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := browser.Get(authURL)
	if err != nil {
		t.Fatalf("open the authorization URL: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("the authorization endpoint answered %d, want a redirect", resp.StatusCode)
	}
	back, err := resp.Location()
	if err != nil {
		t.Fatalf("the authorization endpoint's redirect: %v", err)
	}
	return back
}

func pathOf(endpointURL string) string {
	u, err := url.Parse(endpointURL)
	if err != nil {
		return endpointURL
	}
	return u.Path
}

func (i *Issuer) serve(w http.ResponseWriter, r *http.Request) {
	i.mu.Lock()
	i.requests[r.URL.Path]++
	override := i.overrides[r.URL.Path]
	i.mu.Unlock()
	if override != nil {
		override.ServeHTTP(w, r)
		return
	}
	switch r.URL.Path {
	case discoveryPath:
		i.serveDiscovery(w)
	case jwksPath:
		i.serveKeys(w)
	case authorizationPath:
		i.serveAuthorization(w, r)
	case tokenPath:
		i.serveToken(w, r)
	case introspectionPath:
		i.serveIntrospection(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (i *Issuer) serveDiscovery(w http.ResponseWriter) {
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                i.URL,
		"authorization_endpoint":                i.AuthorizationEndpoint,
		"token_endpoint":                        i.TokenEndpoint,
		"jwks_uri":                              i.JWKSURI,
		"introspection_endpoint":                i.IntrospectionEndpoint,
		"response_types_supported":              []string{"code"},
		"grant_types_supported":                 []string{"authorization_code"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"RS256"},
		"code_challenge_methods_supported":      []string{"S256"},
		"scopes_supported":                      []string{"openid", "profile", "email"},
		"token_endpoint_auth_methods_supported": []string{"client_secret_basic", "client_secret_post"},
	})
}

func (i *Issuer) serveKeys(w http.ResponseWriter) {
	i.mu.Lock()
	var set jose.JSONWebKeySet
	for _, k := range i.keys {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.Public(), KeyID: k.ID, Algorithm: string(jose.RS256), Use: "sig"})
	}
	i.mu.Unlock()
	writeJSON(w, http.StatusOK, set)
}

// serveAuthorization answers an authorization request as SetAnswer said. A request it
// cannot send back safely (unknown client, unregistered redirect URI) gets an error page,
// never a redirect.
func (i *Issuer) serveAuthorization(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	redirectURI := q.Get("redirect_uri")
	i.mu.Lock()
	registered := slices.Contains(i.redirects, redirectURI)
	answer := i.answer
	i.mu.Unlock()
	if q.Get("client_id") != i.ClientID {
		http.Error(w, "unknown client", http.StatusBadRequest)
		return
	}
	if !registered {
		http.Error(w, "redirect_uri is not registered", http.StatusBadRequest)
		return
	}
	back := url.Values{}
	if s := q.Get("state"); s != "" {
		back.Set("state", s)
	}
	if answer.Iss != "" {
		back.Set("iss", answer.Iss)
	}
	switch {
	case q.Get("response_type") != "code":
		back.Set("error", "unsupported_response_type")
	case q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "":
		back.Set("error", "invalid_request")
		back.Set("error_description", "PKCE with S256 is required")
	case answer.Error != "":
		back.Set("error", answer.Error)
	case answer.User.Subject == "":
		back.Set("error", "login_required")
	default:
		code := rand.Text()
		i.mu.Lock()
		i.codes[code] = grant{user: answer.User, redirectURI: redirectURI, challenge: q.Get("code_challenge"),
			nonce: q.Get("nonce"), scope: q.Get("scope"), resource: q.Get("resource")}
		i.mu.Unlock()
		back.Set("code", code)
	}
	http.Redirect(w, r, redirectURI+"?"+back.Encode(), http.StatusFound)
}

// serveToken exchanges an authorization code. The code is spent by its first use, whether
// the exchange succeeds or not.
func (i *Issuer) serveToken(w http.ResponseWriter, r *http.Request) {
	if !i.authenticClient(w, r) {
		return
	}
	if gt := r.PostForm.Get("grant_type"); gt != "authorization_code" {
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type")
		return
	}
	code := r.PostForm.Get("code")
	i.mu.Lock()
	g, ok := i.codes[code]
	delete(i.codes, code)
	key := i.keys[len(i.keys)-1]
	i.mu.Unlock()
	switch {
	case !ok:
		oauthError(w, http.StatusBadRequest, "invalid_grant")
		return
	case r.PostForm.Get("redirect_uri") != g.redirectURI:
		oauthError(w, http.StatusBadRequest, "invalid_grant")
		return
	case oauth2.S256ChallengeFromVerifier(r.PostForm.Get("code_verifier")) != g.challenge:
		oauthError(w, http.StatusBadRequest, "invalid_grant")
		return
	}
	now := time.Now()
	audience := g.resource
	if audience == "" {
		audience = i.ClientID
	}
	access := i.AccessClaims(g.user.Subject, audience)
	access["scope"] = g.scope
	idClaims := map[string]any{
		"iss": i.URL, "sub": g.user.Subject, "aud": i.ClientID, "azp": i.ClientID,
		"iat": now.Unix(), "exp": now.Add(idTokenTTL).Unix(),
	}
	for claim, v := range map[string]string{"nonce": g.nonce, "preferred_username": g.user.PreferredUsername,
		"name": g.user.Name, "email": g.user.Email} {
		if v != "" {
			idClaims[claim] = v
		}
	}
	if len(g.user.Groups) > 0 {
		idClaims["groups"] = g.user.Groups
	}
	accessToken, err1 := key.sign(access)
	idToken, err2 := key.sign(idClaims)
	if err1 != nil || err2 != nil {
		oauthError(w, http.StatusInternalServerError, "server_error")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"access_token": accessToken, "token_type": "Bearer",
		"expires_in": int(accessTokenTTL.Seconds()), "id_token": idToken, "scope": g.scope})
}

// serveIntrospection answers RFC 7662 introspection for the opaque tokens of OpaqueToken.
func (i *Issuer) serveIntrospection(w http.ResponseWriter, r *http.Request) {
	if !i.authenticClient(w, r) {
		return
	}
	i.mu.Lock()
	claims, ok := i.opaque[r.PostForm.Get("token")]
	answer := map[string]any{"active": ok}
	if ok {
		for k, v := range claims {
			answer[k] = v
		}
		answer["active"] = true
	}
	i.mu.Unlock()
	writeJSON(w, http.StatusOK, answer)
}

// authenticClient parses the form of r and checks the client's credentials, sent with HTTP
// basic authentication (form-encoded first) or in the form. It answers the request itself
// when they are wrong.
func (i *Issuer) authenticClient(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return false
	}
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request")
		return false
	}
	id, secret := r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	if user, password, ok := r.BasicAuth(); ok {
		id, _ = url.QueryUnescape(user)
		secret, _ = url.QueryUnescape(password)
	}
	if id != i.ClientID || secret != i.ClientSecret {
		w.Header().Set("WWW-Authenticate", `Basic realm="issuertest"`)
		oauthError(w, http.StatusUnauthorized, "invalid_client")
		return false
	}
	return true
}

func oauthError(w http.ResponseWriter, status int, code string) {
	writeJSON(w, status, map[string]string{"error": code})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// Key is an RSA key that signs JWTs with RS256. A Key from NewKey belongs to no issuer: it
// signs what a stranger to the issuer could sign.
type Key struct {
	// ID is the key ID, in the JWKS and in the header of every token the key signs.
	ID      string
	private *rsa.PrivateKey
}

// NewKey returns a new 2048-bit RSA key with a new key ID.
func NewKey(t testing.TB) *Key {
	t.Helper()
	private, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatalf("generate a signing key: %v", err)
	}
	return &Key{ID: rand.Text()[:12], private: private}
}

// Public returns the public half of k, as the JWKS publishes it.
func (k *Key) Public() *rsa.PublicKey { return &k.private.PublicKey }

// Sign returns a compact JWT with claims, signed by k with RS256 and naming k's ID.
func (k *Key) Sign(t testing.TB, claims map[string]any) string {
	t.Helper()
	token, err := k.sign(claims)
	if err != nil {
		t.Fatalf("sign a token: %v", err)
	}
	return token
}

func (k *Key) sign(claims map[string]any) (string, error) {
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", fmt.Errorf("encode claims: %w", err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: k.private, KeyID: k.ID}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return "", err
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		return "", err
	}
	return jws.CompactSerialize()
}
