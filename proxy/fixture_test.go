package proxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/urlflow/urlflow/internal/redistest"
	"github.com/urlflow/urlflow/oauth/providers"
	"github.com/urlflow/urlflow/slots"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/audit"
	"github.com/urlflow/urlflow/state/counters"
	"github.com/urlflow/urlflow/state/credentials"
	"github.com/urlflow/urlflow/state/flow"
	"github.com/urlflow/urlflow/state/vault"
	"github.com/urlflow/urlflow/upstream"
)

// The tests of this package run a Proxy on a real redis-server, a real key ring, and real
// loopback servers: the APIs it calls and, for providers, a stand-in for the provider's
// token endpoint (real providers cannot be reached from the tests). Credentials are stored
// the way urlflow stores them, by the step that completes an elicitation (package flow).

// The counter of refused requests, as proxy.go counts it.
const carriedCounter = "urlflow_secret_in_request_total"

// fixture is a Proxy and everything it reads and writes.
type fixture struct {
	redis    *redistest.Server
	proxy    *Proxy
	vault    *vault.Vault
	creds    *credentials.Store
	flows    *flow.Store
	keeper   *providers.Keeper
	caller   *upstream.Caller
	trail    *audit.Trail
	counters *counters.Counters
	clock    *clock
	logs     *logBuffer
	log      *slog.Logger
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ring, err := vault.ParseKeyRing(vault.GenerateKeyRing("k1"))
	if err != nil {
		t.Fatal(err)
	}
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	logs := &logBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	clk := &clock{now: time.Now().UTC().Truncate(time.Second)}
	trail := audit.New(rdb, audit.Options{Logger: log})
	creds := credentials.NewStore(rdb, credentials.Options{Now: clk.Now, Logger: log, Audit: trail})
	count := counters.New(rdb, log)
	v := vault.NewVault(ring)
	keeper := providers.NewKeeper(creds, v, count, log)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	caller := upstream.New(tr)
	return &fixture{
		redis: srv, vault: v, creds: creds, keeper: keeper, caller: caller,
		flows: flow.NewStore(rdb, flow.StoreOptions{Logger: log, Counters: count}),
		trail: trail, counters: count, clock: clk, logs: logs, log: log,
		proxy: New(creds, v, keeper, caller, count, log),
	}
}

// withVault returns a Proxy like f's that opens secrets with v instead.
func (f *fixture) withVault(v *vault.Vault) *Proxy {
	return New(f.creds, v, f.keeper, f.caller, f.counters, f.log)
}

// complete runs a flow for user's target (in service's namespace) to completion, storing
// the credential that seal makes for the elicitation, as the pages and the OAuth callback
// do. replace is set when the user enters a credential again.
func (f *fixture) complete(t *testing.T, user state.User, kind state.Kind, service, target string, replace bool,
	seal func(name, elicitationID string) *credentials.Credential) *credentials.Credential {
	t.Helper()
	ctx := context.Background()
	e, err := f.flows.Create(ctx, flow.NewElicitation{User: user, Kind: kind, Service: service, Target: target,
		Replace: replace, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.flows.Apply(ctx, e.ID, flow.BrowserOpen, state.ActorUser, ""); err != nil {
		t.Fatal(err)
	}
	name := credentials.Name(service, target)
	c := seal(name, e.ID)
	change, err := f.flows.Apply(ctx, e.ID, flow.Verified, state.ActorUser, "", flow.WithCredential(c))
	if err != nil || change.Elicitation.State != flow.Complete {
		t.Fatalf("completing the flow of %s: %+v, %v", name, change, err)
	}
	return f.credential(t, user, name)
}

// enterSecret stores value as user's secret for slot target of service ("" for urlflow's
// own), sealed by f's vault, and returns it as the store reads it.
func (f *fixture) enterSecret(t *testing.T, user state.User, service, target, value string, replace bool) *credentials.Credential {
	t.Helper()
	return f.enterSealed(t, f.vault, user, service, target, value, replace)
}

// enterSealed is enterSecret with the value sealed by v.
func (f *fixture) enterSealed(t *testing.T, v *vault.Vault, user state.User, service, target, value string, replace bool) *credentials.Credential {
	t.Helper()
	return f.complete(t, user, state.KindSecret, service, target, replace, func(name, id string) *credentials.Credential {
		sealed, err := v.Seal(user, name, state.NewSecret(value))
		if err != nil {
			t.Fatal(err)
		}
		return &credentials.Credential{Name: name, Kind: state.KindSecret, ElicitationID: id, StoredAt: f.clock.Now(), Sealed: sealed}
	})
}

// connect stores tok as user's connection to the provider target of service.
func (f *fixture) connect(t *testing.T, user state.User, service, target string, tok *providers.Token) *credentials.Credential {
	t.Helper()
	return f.complete(t, user, state.KindOAuth, service, target, false, func(name, id string) *credentials.Credential {
		c, err := f.keeper.Seal(user, name, id, tok, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return c
	})
}

// credential returns user's stored credential name.
func (f *fixture) credential(t *testing.T, user state.User, name string) *credentials.Credential {
	t.Helper()
	c, err := f.creds.Get(context.Background(), user, name)
	if err != nil {
		t.Fatalf("credential %s: %v", name, err)
	}
	return c
}

// lastUse returns when user's credential name was last used, nil if never.
func (f *fixture) lastUse(t *testing.T, user state.User, name string) *time.Time {
	t.Helper()
	conns, err := f.creds.Connections(context.Background(), user, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range conns {
		if credentials.Name(c.Service, c.Name) == name {
			return c.LastUsedAt
		}
	}
	t.Fatalf("no connection %s among %+v", name, conns)
	return nil
}

// audited returns the events of the audit trail about credential name of user, as
// "event actor reason".
func (f *fixture) audited(t *testing.T, user state.User, name string) []string {
	t.Helper()
	events, err := f.trail.Read(context.Background(), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range events {
		if e.UserKey == user.Key() && e.Credential == name {
			out = append(out, fmt.Sprintf("%s %s %s", e.Event, e.Actor, e.Reason))
		}
	}
	return out
}

// count returns the counter name with the label kind.
func (f *fixture) count(t *testing.T, name string, kind state.Kind) int64 {
	t.Helper()
	all, err := f.counters.All(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range all {
		if c.Name == name && slices.Equal(c.Labels, []counters.Label{{Name: "kind", Value: string(kind)}}) {
			return c.Value
		}
	}
	return 0
}

// wantNotShown fails the test if any of secrets shows in what (an error's text, an
// answer) or in anything logged so far.
func (f *fixture) wantNotShown(t *testing.T, what, text string, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(text, s) {
			t.Errorf("%s shows the secret %q: %s", what, s, text)
		}
		if strings.Contains(f.logs.String(), s) {
			t.Errorf("the logs show the secret %q:\n%s", s, f.logs)
		}
	}
}

// userNamed is a user of its own for each case sharing a fixture.
func userNamed(name string) state.User {
	return state.User{Issuer: "https://id.example", Subject: name}
}

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// logBuffer holds what is logged, for tests that check that no secret is.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// received is one request an API server received.
type received struct {
	Method   string
	Path     string // escaped
	RawQuery string
	Header   http.Header
	Body     string
}

// apiServer is a real API on loopback that keeps every request it receives, then answers
// with its handler (which can read the body again).
type apiServer struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []received
}

func newAPIServer(t *testing.T, h http.Handler) *apiServer {
	t.Helper()
	s := &apiServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.reqs = append(s.reqs, received{Method: r.Method, Path: r.URL.EscapedPath(), RawQuery: r.URL.RawQuery,
			Header: r.Header.Clone(), Body: string(body)})
		s.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// received returns the requests received so far.
func (s *apiServer) received() []received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reqs)
}

// wantNothing fails the test if the server received any request.
func (s *apiServer) wantNothing(t *testing.T) {
	t.Helper()
	if got := s.received(); len(got) != 0 {
		t.Fatalf("the API received %d requests, want none: %+v", len(got), got)
	}
}

// echo answers with what it received, in its body and in the header X-Echo, so that a
// test sees what of the credential the answer would show without redaction.
var echo = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	user, pass, _ := r.BasicAuth()
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Echo", r.Header.Get("Authorization")+" "+r.Header.Get("X-Api-Key"))
	fmt.Fprintf(w, "%s %s\nauthorization: %s\nx-api-key: %s\nbasic: %s:%s\nquery: %s\ndecoded query: %v\nbody: %s\n",
		r.Method, r.URL.RequestURI(), r.Header.Get("Authorization"), r.Header.Get("X-Api-Key"), user, pass,
		r.URL.RawQuery, r.URL.Query(), body)
})

// newSlot returns the slot demo_api_key with api, prepared as the configuration prepares it.
func newSlot(t *testing.T, api upstream.API) *slots.Slot {
	t.Helper()
	catalog, err := slots.NewCatalog([]slots.Slot{{Name: "demo_api_key", Label: "Demo API key", API: &api}}, "http://127.0.0.1:1")
	if err != nil {
		t.Fatalf("the test slot: %v", err)
	}
	slot, _ := catalog.Lookup("demo_api_key")
	return slot
}

// tokenEndpoint is a stand-in for a provider's token endpoint: it refreshes tokens,
// rotating both (refresh token generation n gives the tokens of generation n+1), and keeps
// the refresh requests.
type tokenEndpoint struct {
	*httptest.Server
	mu        sync.Mutex
	refreshes []url.Values
	// answer, if set, answers refresh n (from 1) instead of the rotation.
	answer func(n int) (status int, body string)
}

func newTokenEndpoint(t *testing.T) *tokenEndpoint {
	t.Helper()
	te := &tokenEndpoint{}
	te.Server = httptest.NewServer(http.HandlerFunc(te.serve))
	t.Cleanup(te.Close)
	return te
}

func (te *tokenEndpoint) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/token" || r.ParseForm() != nil {
		http.Error(w, "the stand-in answers POST /token only", http.StatusNotFound)
		return
	}
	te.mu.Lock()
	te.refreshes = append(te.refreshes, r.PostForm)
	n, answer := len(te.refreshes), te.answer
	te.mu.Unlock()
	var generation int
	fmt.Sscanf(r.PostForm.Get("refresh_token"), "rt%d-", &generation)
	status, body := http.StatusOK, fmt.Sprintf(`{"access_token":%q,"token_type":"bearer","expires_in":3600,"refresh_token":%q}`,
		accessToken(generation+1), refreshToken(generation+1))
	if r.PostForm.Get("grant_type") != "refresh_token" {
		status, body = http.StatusBadRequest, `{"error":"unsupported_grant_type"}`
	} else if answer != nil {
		status, body = answer(n)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, body)
}

// answerWith makes the endpoint answer refresh n (from 1) with answer(n); nil restores the
// rotation.
func (te *tokenEndpoint) answerWith(answer func(n int) (status int, body string)) {
	te.mu.Lock()
	defer te.mu.Unlock()
	te.answer = answer
}

// sent returns the forms of the refresh requests received so far.
func (te *tokenEndpoint) sent() []url.Values {
	te.mu.Lock()
	defer te.mu.Unlock()
	return slices.Clone(te.refreshes)
}

// accessToken and refreshToken name the tokens of generation n: 1 is the one connected,
// the stand-in hands out n+1 for refresh token n.
func accessToken(n int) string  { return fmt.Sprintf("at%d-Q7mZp9Lw2Rv8Kd4Xn6", n) }
func refreshToken(n int) string { return fmt.Sprintf("rt%d-Hs3Jc8Vb1Ny5Tf0Gq2", n) }

// tokenExpiringIn is generation 1, obtained an hour ago and expiring in d.
func tokenExpiringIn(d time.Duration) *providers.Token {
	now := time.Now().UTC()
	return &providers.Token{AccessToken: accessToken(1), RefreshToken: refreshToken(1), TokenType: "Bearer",
		Expiry: now.Add(d), Obtained: now.Add(-time.Hour), Scopes: []string{"read"}, Account: providers.Account{ID: "42", Name: "ada"}}
}

// newProvider configures the provider acme with explicit endpoints at te and its API at
// apiURL, as the configuration file does.
func newProvider(t *testing.T, te *tokenEndpoint, apiURL string) *providers.Provider {
	t.Helper()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	getenv := func(name string) (string, bool) { return "client-secret-of-urlflow", name == "ACME_SECRET" }
	ps, err := providers.New(context.Background(), []providers.Config{{
		Name: "acme", Label: "Acme", ClientID: "urlflow", ClientSecretEnv: "ACME_SECRET",
		AuthorizationURL: te.URL + "/authorize", TokenURL: te.URL + "/token", UserinfoURL: te.URL + "/userinfo",
		API: &upstream.API{BaseURL: apiURL + "/v1", Methods: []string{"GET", "POST"}},
	}}, providers.Options{PublicURL: "http://127.0.0.1:1", Getenv: getenv, HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatalf("the test provider: %v", err)
	}
	p, _ := ps.Lookup("acme")
	return p
}

// bearerAPI is an API that accepts the access tokens accept says yes to (401 otherwise)
// and echoes the request.
func bearerAPI(accept func(token string) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || !accept(tok) {
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			http.Error(w, "invalid token", http.StatusUnauthorized)
			return
		}
		echo(w, r)
	})
}
