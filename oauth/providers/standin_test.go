package providers

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/urlflow/urlflow/internal/issuertest"
)

// The configuration every provider of these tests shares. The secret values are distinctive
// so that a test can tell they never reach an error message.
const (
	testClientID     = "client-id-4711"
	testClientSecret = "client-secret-never-in-errors"
	testSecretEnv    = "URLFLOW_TEST_CLIENT_SECRET"
	testPublicURL    = "https://urlflow.example"
	testRedirectURI  = testPublicURL + "/oauth/callback"
	testState        = "state-0f9e8d7c"
	testCode         = "authorization-code-never-in-errors"
	testVerifier     = "verifier-never-in-errors-0123456789abcdefghijklmnop"
)

// standIn is a local stand-in for the third-party providers. Its client sends every request
// to one httptest server whatever the URL's scheme and host, keeping the path, the query and
// the original host (as the Host header, by which the stand-in routes), and records the
// request as the code under test sent it. So the presets keep their real URLs and the tests
// assert them.
type standIn struct {
	srv *httptest.Server

	mu     sync.Mutex
	routes map[string]http.HandlerFunc // "METHOD host/path"
	sent   []sentRequest
}

// sentRequest is one request as the code under test sent it, before the rewrite.
type sentRequest struct {
	Method string
	Host   string
	Path   string
	Query  url.Values
	Header http.Header
	Body   []byte
}

func newStandIn(t testing.TB) *standIn {
	s := &standIn{routes: map[string]http.HandlerFunc{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

// handle makes the stand-in answer route ("POST github.com/login/oauth/access_token") with h.
func (s *standIn) handle(route string, h http.HandlerFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.routes[route] = h
}

func (s *standIn) serve(w http.ResponseWriter, r *http.Request) {
	route := r.Method + " " + r.Host + r.URL.Path
	s.mu.Lock()
	h := s.routes[route]
	s.mu.Unlock()
	if h == nil {
		http.Error(w, "the stand-in has no answer for "+route, http.StatusNotFound)
		return
	}
	h(w, r)
}

// client is the http.Client to give NewProviders.
func (s *standIn) client() *http.Client {
	return &http.Client{Transport: rewriteTransport{s}, Timeout: 10 * time.Second}
}

// requests returns what was sent so far.
func (s *standIn) requests() []sentRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.sent)
}

// only returns the one request sent, failing the test if there were more or none.
func (s *standIn) only(t testing.TB) sentRequest {
	t.Helper()
	reqs := s.requests()
	if len(reqs) != 1 {
		t.Fatalf("sent %d requests, want 1: %v", len(reqs), routesOf(reqs))
	}
	return reqs[0]
}

// reset forgets the requests sent so far.
func (s *standIn) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = nil
}

func routesOf(reqs []sentRequest) []string {
	var routes []string
	for _, r := range reqs {
		routes = append(routes, r.route())
	}
	return routes
}

type rewriteTransport struct{ s *standIn }

func (rt rewriteTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		var err error
		body, err = io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
	}
	rt.s.mu.Lock()
	rt.s.sent = append(rt.s.sent, sentRequest{Method: req.Method, Host: req.URL.Host, Path: req.URL.Path,
		Query: req.URL.Query(), Header: req.Header.Clone(), Body: body})
	rt.s.mu.Unlock()

	out := req.Clone(req.Context())
	out.URL.Scheme, out.URL.Host = "http", rt.s.srv.Listener.Addr().String()
	out.Host = req.URL.Host
	out.Body, out.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	return rt.s.srv.Client().Transport.RoundTrip(out)
}

// route is "METHOD host/path", as in standIn.handle.
func (r sentRequest) route() string { return r.Method + " " + r.Host + r.Path }

// form parses a form-encoded body.
func (r sentRequest) form(t testing.TB) url.Values {
	t.Helper()
	if ct := r.Header.Get("Content-Type"); ct != "application/x-www-form-urlencoded" {
		t.Errorf("%s: Content-Type %q, want a form", r.route(), ct)
	}
	v, err := url.ParseQuery(string(r.Body))
	if err != nil {
		t.Fatalf("%s: body %q is not a form: %v", r.route(), r.Body, err)
	}
	return v
}

// json parses a JSON object body.
func (r sentRequest) json(t testing.TB) map[string]any {
	t.Helper()
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s: Content-Type %q, want JSON", r.route(), ct)
	}
	var v map[string]any
	if err := json.Unmarshal(r.Body, &v); err != nil {
		t.Fatalf("%s: body %q is not a JSON object: %v", r.route(), r.Body, err)
	}
	return v
}

// basicAuth returns the credentials of HTTP basic authentication.
func (r sentRequest) basicAuth() (user, password string, ok bool) {
	return (&http.Request{Header: r.Header}).BasicAuth()
}

// wantBasicClient fails the test unless r authenticates the client with HTTP basic.
func (r sentRequest) wantBasicClient(t testing.TB) {
	t.Helper()
	if u, p, ok := r.basicAuth(); !ok || u != testClientID || p != testClientSecret {
		t.Errorf("%s: basic auth %q %q %v, want the client's", r.route(), u, p, ok)
	}
}

// wantNoAuthorization fails the test if r has an Authorization header.
func (r sentRequest) wantNoAuthorization(t testing.TB) {
	t.Helper()
	if a := r.Header.Get("Authorization"); a != "" {
		t.Errorf("%s: Authorization %q, want none", r.route(), a)
	}
}

// wantBearer fails the test unless r carries token as a bearer token.
func (r sentRequest) wantBearer(t testing.TB, token string) {
	t.Helper()
	if a := r.Header.Get("Authorization"); a != "Bearer "+token {
		t.Errorf("%s: Authorization %q, want Bearer %s", r.route(), a, token)
	}
}

// wantValues fails the test unless every key of want has exactly that value in got ("" for
// absent).
func wantValues(t testing.TB, what string, got url.Values, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got.Get(k) != v || (v == "" && got.Has(k)) {
			t.Errorf("%s: %s = %q, want %q", what, k, got.Get(k), v)
		}
	}
}

// wantFields is wantValues for a JSON object of strings.
func wantFields(t testing.TB, what string, got map[string]any, want map[string]string) {
	t.Helper()
	for k, v := range want {
		g, has := got[k]
		if (v == "" && has) || (v != "" && g != v) {
			t.Errorf("%s: %s = %v, want %q", what, k, g, v)
		}
	}
}

// reply answers with status, a Content-Type and a body.
func reply(status int, contentType, body string) http.HandlerFunc {
	return issuertest.Reply(status, contentType, body).ServeHTTP
}

// replyJSON answers with status and a JSON body.
func replyJSON(status int, body string) http.HandlerFunc {
	return reply(status, "application/json; charset=utf-8", body)
}

// replyForm answers with status and a form-encoded body (GitHub's default).
func replyForm(status int, body string) http.HandlerFunc {
	return reply(status, "application/x-www-form-urlencoded; charset=utf-8", body)
}

func testGetenv(name string) (string, bool) {
	if name == testSecretEnv {
		return testClientSecret, true
	}
	return "", false
}

// testConfig is a provider configuration with the test client, to complete.
func testConfig(name string) Config {
	return Config{Name: name, ClientID: testClientID, ClientSecretEnv: testSecretEnv}
}

// newProviders is New talking to s.
func (s *standIn) newProviders(configs ...Config) (*Set, error) {
	return New(context.Background(), configs, Options{PublicURL: testPublicURL, Getenv: testGetenv, HTTPClient: s.client()})
}

// provider configures one provider talking to s.
func (s *standIn) provider(t testing.TB, cfg Config) *Provider {
	t.Helper()
	ps, err := s.newProviders(cfg)
	if err != nil {
		t.Fatalf("NewProviders: %v", err)
	}
	p, ok := ps.Lookup(cfg.Name)
	if !ok {
		t.Fatalf("no provider %s", cfg.Name)
	}
	return p
}

// preset configures the preset named preset (the provider has the same name), edited by
// edit if given.
func (s *standIn) preset(t testing.TB, preset string, edit func(*Config)) *Provider {
	t.Helper()
	cfg := testConfig(preset)
	cfg.Preset = preset
	if edit != nil {
		edit(&cfg)
	}
	return s.provider(t, cfg)
}

// wantNoSecret fails the test if err's message contains any of secrets (or the client
// secret, the code or the verifier).
func wantNoSecret(t testing.TB, err error, secrets ...string) {
	t.Helper()
	if err == nil {
		return
	}
	for _, s := range append(secrets, testClientSecret, testCode, testVerifier) {
		if s != "" && strings.Contains(err.Error(), s) {
			t.Errorf("the error %q contains the secret %q", err, s)
		}
	}
}

// wantToken fails the test unless got is want, with an expiry expiresIn from now (none if
// zero).
func wantToken(t testing.TB, got *Token, want Token, expiresIn time.Duration) {
	t.Helper()
	if got == nil {
		t.Fatal("no token")
	}
	if got.AccessToken != want.AccessToken || got.RefreshToken != want.RefreshToken || got.TokenType != want.TokenType ||
		!slices.Equal(got.Scopes, want.Scopes) || got.Account != want.Account {
		t.Errorf("token\n got %+v\nwant %+v", *got, want)
	}
	switch left := time.Until(got.Expiry); {
	case expiresIn == 0 && !got.Expiry.IsZero():
		t.Errorf("expiry %v, want none", got.Expiry)
	case expiresIn != 0 && (left > expiresIn || left < expiresIn-time.Minute):
		t.Errorf("expiry in %v, want %v", left, expiresIn)
	}
}
