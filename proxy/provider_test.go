package proxy

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/urlflow/urlflow/oauth/providers"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/audit"
	"github.com/urlflow/urlflow/state/credentials"
	"github.com/urlflow/urlflow/upstream"
)

// providerTest is a fixture with the provider acme: its token endpoint (a stand-in) and its
// API (a real server that accepts the access tokens accept allows).
type providerTest struct {
	*fixture
	tokens *tokenEndpoint
	api    *apiServer
	acme   *providers.Provider

	mu       sync.Mutex
	accepted func(token string) bool
}

func newProviderTest(t *testing.T) *providerTest {
	t.Helper()
	pt := &providerTest{fixture: newFixture(t), tokens: newTokenEndpoint(t), accepted: func(string) bool { return true }}
	pt.api = newAPIServer(t, bearerAPI(func(tok string) bool {
		pt.mu.Lock()
		defer pt.mu.Unlock()
		return pt.accepted(tok)
	}))
	pt.acme = newProvider(t, pt.tokens, pt.api.URL)
	return pt
}

// accept makes the API accept exactly the access tokens of the generations given.
func (pt *providerTest) accept(generations ...int) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	pt.accepted = func(tok string) bool {
		for _, g := range generations {
			if tok == accessToken(g) {
				return true
			}
		}
		return false
	}
}

// tokensSent returns the access tokens the API received, in order.
func (pt *providerTest) tokensSent() []string {
	var out []string
	for _, r := range pt.api.received() {
		out = append(out, strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
	}
	return out
}

// Who uses a connection: urlflow's own call_api, and a delegating service's proxy request.
var (
	ownConnection     = Use{Name: "acme", Actor: state.ActorClient, Via: "a call_api request"}
	serviceConnection = Use{Name: credentials.Name("svc", "acme"), Actor: state.ActorService, Via: "a proxy request of the service svc"}
)

func TestTheAccessTokenIsInjectedAndRedactedFromTheAnswer(t *testing.T) {
	t.Parallel()
	pt := newProviderTest(t)
	for _, u := range []Use{ownConnection, serviceConnection} {
		t.Run(u.Via, func(t *testing.T) {
			u.User = userNamed(u.Via)
			pt.connect(t, u.User, service(u), "acme", tokenExpiringIn(time.Hour))
			before := len(pt.api.received())
			pt.clock.Advance(time.Minute)

			resp, err := pt.proxy.Provider(t.Context(), u, pt.acme, upstream.Request{Method: "POST", Path: "/issues", Body: `{"title":"hi"}`})
			if err != nil || resp.Status != http.StatusOK {
				t.Fatalf("Provider = %+v, %v", resp, err)
			}
			got := pt.api.received()[before:]
			if len(got) != 1 || got[0].Method != "POST" || got[0].Path != "/v1/issues" || got[0].Header.Get("Authorization") != "Bearer "+accessToken(1) ||
				got[0].Body != `{"title":"hi"}` {
				t.Fatalf("the API received %+v; want the request with the access token as a bearer token", got)
			}
			if !strings.Contains(resp.Body, "authorization: "+upstream.Redacted) || !strings.Contains(resp.Body, "POST /v1/issues") {
				t.Errorf("the answer is not the API's with the token redacted: %s", resp.Body)
			}
			pt.wantNotShown(t, "the answer", resp.Body, accessToken(1), refreshToken(1))
			if last := pt.lastUse(t, u.User, u.Name); last == nil || !last.Equal(pt.clock.Now()) {
				t.Errorf("last use %v, want %v", last, pt.clock.Now())
			}
		})
	}
	if sent := pt.tokens.sent(); len(sent) != 0 {
		t.Errorf("a fresh token was refreshed: %v", sent)
	}
}

func TestATokenAboutToExpireIsRefreshedBeforeTheCall(t *testing.T) {
	t.Parallel()
	pt := newProviderTest(t)
	pt.accept(2)
	u := ownConnection
	u.User = userNamed("ada")
	pt.connect(t, u.User, "", "acme", tokenExpiringIn(30*time.Second))

	resp, err := pt.proxy.Provider(t.Context(), u, pt.acme, upstream.Request{Method: "GET", Path: "/me"})
	if err != nil || resp.Status != http.StatusOK {
		t.Fatalf("Provider = %+v, %v", resp, err)
	}
	if got := pt.tokensSent(); len(got) != 1 || got[0] != accessToken(2) {
		t.Errorf("the API received the tokens %q, want only the refreshed one", got)
	}
	sent := pt.tokens.sent()
	if len(sent) != 1 || sent[0].Get("refresh_token") != refreshToken(1) || sent[0].Get("client_id") != "urlflow" {
		t.Fatalf("refresh requests %v, want one with the stored refresh token", sent)
	}
	c := pt.credential(t, u.User, u.Name)
	if c.RefreshedAt == nil || c.NeedsReconnect {
		t.Errorf("stored connection %+v, want it refreshed", c)
	}
	if got := pt.audited(t, u.User, u.Name); len(got) != 1 || got[0] != audit.CredentialRefresh+" system " {
		t.Errorf("audited %q, want the refresh", got)
	}
	// The rotation is what is stored: the next call uses it without asking the provider.
	if _, err := pt.proxy.Provider(t.Context(), u, pt.acme, upstream.Request{Method: "GET", Path: "/me"}); err != nil {
		t.Fatal(err)
	}
	if got := pt.tokensSent(); len(got) != 2 || got[1] != accessToken(2) || len(pt.tokens.sent()) != 1 {
		t.Errorf("the second call sent %q after %d refreshes, want the stored token, no refresh", got, len(pt.tokens.sent()))
	}
}

func TestATokenTheAPIRefusesIsRefreshedOnceAndTheCallMadeOnceMore(t *testing.T) {
	t.Parallel()
	pt := newProviderTest(t)
	tests := []struct {
		name   string
		accept []int // the generations of token the API accepts
		status int   // of the answer
	}{
		{"the API accepts the refreshed token", []int{2}, http.StatusOK},
		{"the API refuses every token", nil, http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pt.accept(tt.accept...)
			u := ownConnection
			u.User = userNamed(tt.name)
			pt.connect(t, u.User, "", "acme", tokenExpiringIn(time.Hour))
			sentBefore, refreshesBefore := len(pt.tokensSent()), len(pt.tokens.sent())

			resp, err := pt.proxy.Provider(t.Context(), u, pt.acme, upstream.Request{Method: "GET", Path: "/me"})
			if err != nil || resp.Status != tt.status {
				t.Fatalf("Provider = %+v, %v; want status %d", resp, err, tt.status)
			}
			// One call with the stored token, one refresh, one call with the new token: no more.
			if got, want := pt.tokensSent()[sentBefore:], []string{accessToken(1), accessToken(2)}; !slices.Equal(got, want) {
				t.Errorf("the API received the tokens %q, want %q", got, want)
			}
			if sent := pt.tokens.sent()[refreshesBefore:]; len(sent) != 1 || sent[0].Get("refresh_token") != refreshToken(1) {
				t.Errorf("refresh requests %v, want one", sent)
			}
			pt.wantNotShown(t, "the answer", resp.Body, accessToken(1), accessToken(2))
			if last := pt.lastUse(t, u.User, u.Name); last == nil || !last.Equal(pt.clock.Now()) {
				t.Errorf("last use %v, want %v", last, pt.clock.Now())
			}
		})
	}
}

func TestConcurrentCallsRefusedWithTheSameTokenRefreshItOnce(t *testing.T) {
	t.Parallel()
	pt := newProviderTest(t)
	pt.accept(2)
	u := ownConnection
	u.User = userNamed("ada")
	pt.connect(t, u.User, "", "acme", tokenExpiringIn(time.Hour))

	const calls = 4
	var wg sync.WaitGroup
	errs := make(chan error, calls)
	for range calls {
		wg.Go(func() {
			resp, err := pt.proxy.Provider(context.Background(), u, pt.acme, upstream.Request{Method: "GET", Path: "/me"})
			if err == nil && resp.Status != http.StatusOK {
				err = errors.New("status " + http.StatusText(resp.Status))
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("a call failed: %v", err)
		}
	}
	if sent := pt.tokens.sent(); len(sent) != 1 {
		t.Errorf("%d refreshes, want 1", len(sent))
	}
	got := strings.Join(pt.tokensSent(), " ")
	old, refreshed := strings.Count(got, accessToken(1)), strings.Count(got, accessToken(2))
	if refreshed != calls || old > calls || len(pt.tokensSent()) != old+refreshed {
		t.Errorf("the API received %q: want every call once with the refreshed token, after at most one refusal each", got)
	}
}

func TestARefreshTheProviderRefusesAsksForANewConnection(t *testing.T) {
	t.Parallel()
	pt := newProviderTest(t)
	pt.accept() // the API refuses every token
	tests := []struct {
		name      string
		token     *providers.Token
		refusedBy string // what makes the proxy refresh: "expiry" or "api"
		answer    func(int) (int, string)
		reconnect bool // ErrReconnect, and the connection marked so
		refreshes int  // refresh requests of the first call
	}{
		{"a revoked grant", tokenExpiringIn(30 * time.Second), "expiry", answer(400, `{"error":"invalid_grant"}`), true, 1},
		{"no refresh token", withoutRefreshToken(tokenExpiringIn(30 * time.Second)), "expiry", nil, true, 0},
		{"a revoked grant, found by the API's refusal", tokenExpiringIn(time.Hour), "api", answer(400, `{"error":"invalid_grant"}`), true, 1},
		{"no refresh token, found by the API's refusal", withoutRefreshToken(tokenExpiringIn(time.Hour)), "api", nil, true, 0},
		{"a provider that is down", tokenExpiringIn(30 * time.Second), "expiry", answer(503, `{"error":"temporarily_unavailable"}`), false, 1},
		{"a provider that is rate limiting", tokenExpiringIn(time.Hour), "api", answer(429, `{"error":"slow_down"}`), false, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pt.tokens.answerWith(tt.answer)
			u := serviceConnection
			u.User = userNamed(tt.name)
			pt.connect(t, u.User, "svc", "acme", tt.token)
			sentBefore, refreshesBefore := len(pt.tokensSent()), len(pt.tokens.sent())

			for call := 1; call <= 2; call++ {
				resp, err := pt.proxy.Provider(t.Context(), u, pt.acme, upstream.Request{Method: "GET", Path: "/me"})
				if !errors.Is(err, ErrNoToken) || resp != nil || errors.Is(err, providers.ErrReconnect) != tt.reconnect || errors.Is(err, providers.ErrNotConnected) {
					t.Fatalf("call %d: Provider = %+v, %v; want ErrNoToken, ErrReconnect %v", call, resp, err, tt.reconnect)
				}
				pt.wantNotShown(t, "the error", err.Error(), accessToken(1), refreshToken(1), "client-secret-of-urlflow")
			}
			// A connection marked for reconnecting is neither refreshed again nor used; one that
			// failed for a passing trouble is tried again on the next call.
			wantRefreshes, wantSent := tt.refreshes, 0
			if tt.refusedBy == "api" {
				wantSent = 1 // the first call's, which the API refused
			}
			if !tt.reconnect {
				wantRefreshes, wantSent = 2*tt.refreshes, 2*wantSent
			}
			if n := len(pt.tokens.sent()) - refreshesBefore; n != wantRefreshes {
				t.Errorf("%d refresh requests, want %d", n, wantRefreshes)
			}
			if got := pt.tokensSent()[sentBefore:]; len(got) != wantSent {
				t.Errorf("the API received %q, want %d requests", got, wantSent)
			}
			if c := pt.credential(t, u.User, u.Name); c.NeedsReconnect != tt.reconnect || c.Locked() {
				t.Errorf("stored: needs reconnect %v, locked %v; want needs reconnect %v, not locked", c.NeedsReconnect, c.Locked(), tt.reconnect)
			}
			if last := pt.lastUse(t, u.User, u.Name); last != nil {
				t.Errorf("recorded as used at %v", last)
			}
		})
	}
}

func answer(status int, body string) func(int) (int, string) {
	return func(int) (int, string) { return status, body }
}

func withoutRefreshToken(tok *providers.Token) *providers.Token {
	tok.RefreshToken = ""
	return tok
}

func TestAProviderCallWithoutAConnectionIsRefusedUnsent(t *testing.T) {
	t.Parallel()
	pt := newProviderTest(t)
	ada, bob := userNamed("ada"), userNamed("bob")
	pt.connect(t, bob, "", "acme", tokenExpiringIn(time.Hour))     // another user's
	pt.connect(t, ada, "svc", "acme", tokenExpiringIn(time.Hour))  // a service's, not urlflow's own
	pt.enterSecret(t, ada, "other", "acme", accessToken(1), false) // a secret under the provider's name
	pt.connect(t, ada, "", "acme", withoutRefreshToken(&providers.Token{AccessToken: accessToken(1)}))
	if _, err := pt.creds.Delete(t.Context(), ada, "acme", state.ActorUser, "disconnect tool"); err != nil {
		t.Fatal(err) // connected, then disconnected
	}
	tests := []struct {
		name         string
		use          Use
		notConnected bool
	}{
		{"never connected", Use{User: userNamed("carol"), Name: "acme"}, true},
		{"disconnected, while another user and a service are connected", Use{User: ada, Name: "acme"}, true},
		{"a service, while urlflow's own is connected", Use{User: bob, Name: credentials.Name("svc", "acme")}, true},
		{"a stored secret, not a connection", Use{User: ada, Name: credentials.Name("other", "acme")}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := pt.proxy.Provider(t.Context(), tt.use, pt.acme, upstream.Request{Method: "GET", Path: "/me"})
			if !errors.Is(err, ErrNoToken) || resp != nil || errors.Is(err, providers.ErrNotConnected) != tt.notConnected || errors.Is(err, providers.ErrReconnect) {
				t.Fatalf("Provider = %+v, %v; want ErrNoToken, not connected %v", resp, err, tt.notConnected)
			}
			pt.wantNotShown(t, "the error", err.Error(), accessToken(1))
		})
	}
	pt.api.wantNothing(t)
	if sent := pt.tokens.sent(); len(sent) != 0 {
		t.Errorf("refreshed %v", sent)
	}
}

func TestARequestCarryingTheAccessTokenIsRefusedAndLocksNothing(t *testing.T) {
	t.Parallel()
	pt := newProviderTest(t)
	tok := accessToken(1)
	tests := []struct {
		name  string
		req   upstream.Request
		where string
	}{
		{"in the path", upstream.Request{Method: "GET", Path: "/tokens/" + tok}, "path"},
		{"in a query value", upstream.Request{Method: "GET", Path: "/me", Query: url.Values{"access_token": {tok}}}, "query"},
		{"percent-encoded in a query value", upstream.Request{Method: "GET", Path: "/me", Query: url.Values{"t": {url.QueryEscape("Bearer " + tok)}}}, "query"},
		{"in a body", upstream.Request{Method: "POST", Path: "/share", Body: `{"token":"` + tok + `"}`}, "body"},
	}
	for _, tt := range tests {
		for _, u := range []Use{ownConnection, serviceConnection} {
			t.Run(tt.name+" of "+u.Via, func(t *testing.T) {
				u.User = userNamed(t.Name())
				pt.connect(t, u.User, service(u), "acme", tokenExpiringIn(time.Hour))

				resp, err := pt.proxy.Provider(t.Context(), u, pt.acme, tt.req)
				var carried *CarriedError
				if !errors.As(err, &carried) || resp != nil || *carried != (CarriedError{Where: tt.where, Kind: state.KindOAuth}) {
					t.Fatalf("Provider = %+v, %v; want a refusal of the %s, not locked", resp, err, tt.where)
				}
				pt.wantNotShown(t, "the error", err.Error(), tok)
				c := pt.credential(t, u.User, u.Name)
				if c.Locked() || c.NeedsReconnect || c.RefreshedAt != nil {
					t.Errorf("the connection changed: %+v", c)
				}
				if got := pt.audited(t, u.User, u.Name); len(got) != 0 {
					t.Errorf("audited %q", got)
				}
				if last := pt.lastUse(t, u.User, u.Name); last != nil {
					t.Errorf("recorded as used at %v", last)
				}
				// Nothing is locked: the next clean call goes out.
				if resp, err := pt.proxy.Provider(t.Context(), u, pt.acme, upstream.Request{Method: "GET", Path: "/me"}); err != nil || resp.Status != http.StatusOK {
					t.Errorf("the next clean call: %+v, %v", resp, err)
				}
			})
		}
	}
	if got := pt.api.received(); len(got) != 2*len(tests) {
		t.Errorf("the API received %d requests, want only the %d clean ones", len(got), 2*len(tests))
	}
	for _, r := range pt.api.received() {
		if r.Path != "/v1/me" || r.RawQuery != "" {
			t.Errorf("the API received %s?%s, a request that carried the token", r.Path, r.RawQuery)
		}
	}
	if sent := pt.tokens.sent(); len(sent) != 0 {
		t.Errorf("refreshed %v", sent)
	}
	if n := pt.count(t, carriedCounter, state.KindOAuth); n != int64(2*len(tests)) {
		t.Errorf("%s{kind=oauth} = %d, want %d", carriedCounter, n, 2*len(tests))
	}
	if n := pt.count(t, carriedCounter, state.KindSecret); n != 0 {
		t.Errorf("%s{kind=secret} = %d, want 0", carriedCounter, n)
	}
	if !strings.Contains(pt.logs.String(), "request carrying an access token refused") {
		t.Errorf("the refusal is not logged:\n%s", pt.logs)
	}
}

func TestAProviderCallWhileTheStoreIsDownIsNoTokenButNoReconnect(t *testing.T) {
	t.Parallel()
	pt := newProviderTest(t)
	u := ownConnection
	u.User = userNamed("ada")
	pt.connect(t, u.User, "", "acme", tokenExpiringIn(time.Hour))
	pt.redis.Stop()

	resp, err := pt.proxy.Provider(t.Context(), u, pt.acme, upstream.Request{Method: "GET", Path: "/me"})
	if !errors.Is(err, ErrNoToken) || resp != nil || errors.Is(err, providers.ErrReconnect) || errors.Is(err, providers.ErrNotConnected) {
		t.Fatalf("Provider = %+v, %v; want ErrNoToken for a passing trouble", resp, err)
	}
	pt.api.wantNothing(t)

	pt.redis.Restart(t)
	if c := pt.credential(t, u.User, u.Name); c.NeedsReconnect {
		t.Errorf("marked for reconnecting by a store failure: %+v", c)
	}
	if resp, err := pt.proxy.Provider(t.Context(), u, pt.acme, upstream.Request{Method: "GET", Path: "/me"}); err != nil || resp.Status != http.StatusOK {
		t.Errorf("once the store is back: %+v, %v", resp, err)
	}
}
