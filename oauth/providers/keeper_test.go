package providers

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/urlflow/urlflow/internal/redistest"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/audit"
	"github.com/urlflow/urlflow/state/counters"
	"github.com/urlflow/urlflow/state/credentials"
	"github.com/urlflow/urlflow/state/flow"
	"github.com/urlflow/urlflow/state/vault"
)

// The stand-in routes of the provider acme (acmeConfig).
const (
	acmeTokenRoute  = "POST auth.acme.example/oauth/token"
	acmeRevokeRoute = "POST auth.acme.example/oauth/revoke"
)

// keeperTest is a Keeper on a real Redis, with the provider acme on a stand-in.
type keeperTest struct {
	keeper   *Keeper
	store    *flow.Store
	creds    *credentials.Store
	trail    *audit.Trail
	counters *counters.Counters
	s        *standIn
	acme     *Provider
}

func newKeeperTest(t testing.TB) *keeperTest {
	t.Helper()
	ring, err := vault.ParseKeyRing(vault.GenerateKeyRing("k1"))
	if err != nil {
		t.Fatal(err)
	}
	rdb := redistest.Start(t).Client(t)
	quiet := slog.New(slog.DiscardHandler)
	count := counters.New(rdb, quiet)
	store := flow.NewStore(rdb, flow.StoreOptions{Logger: quiet, Counters: count})
	trail := audit.New(rdb, audit.Options{Logger: quiet})
	creds := credentials.NewStore(rdb, credentials.Options{Logger: quiet, Audit: trail})
	s := newStandIn(t)
	return &keeperTest{keeper: NewKeeper(creds, vault.NewVault(ring), count, quiet), store: store, creds: creds, trail: trail,
		counters: count, s: s, acme: s.provider(t, acmeConfig("post"))}
}

// connect stores tok as user's connection to acme, the way a completed connect flow does.
func (k *keeperTest) connect(t testing.TB, user state.User, tok *Token) {
	t.Helper()
	ctx := context.Background()
	e, err := k.store.Create(ctx, flow.NewElicitation{User: user, Kind: state.KindOAuth, Target: k.acme.Name, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.store.Apply(ctx, e.ID, flow.BrowserOpen, state.ActorUser, ""); err != nil {
		t.Fatal(err)
	}
	c, err := k.keeper.Seal(user, k.acme.Name, e.ID, tok, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if c.Account != tok.Account.Name || c.Kind != state.KindOAuth || strings.Contains(string(c.Sealed.Ciphertext), tok.AccessToken) {
		t.Fatalf("sealed credential %+v", c)
	}
	if _, err := k.store.Apply(ctx, e.ID, flow.Verified, state.ActorUser, "", flow.WithCredential(c)); err != nil {
		t.Fatal(err)
	}
}

// credential returns user's stored connection to acme.
func (k *keeperTest) credential(t testing.TB, user state.User) *credentials.Credential {
	t.Helper()
	c, err := k.creds.Get(context.Background(), user, k.acme.Name)
	if err != nil {
		t.Fatalf("the connection: %v", err)
	}
	return c
}

// userNamed is a user of its own for each subtest sharing a Keeper.
func userNamed(name string) state.User {
	return state.User{Issuer: "https://idp.example", Subject: name}
}

// tokenExpiringIn is a token obtained an hour ago that expires in d.
func tokenExpiringIn(d time.Duration) *Token {
	now := time.Now().UTC()
	return &Token{AccessToken: "old-access-token", RefreshToken: "old-refresh-token", TokenType: "Bearer",
		Expiry: now.Add(d), Obtained: now.Add(-time.Hour), Scopes: []string{"read"}, Account: Account{ID: "42", Name: "ada"}}
}

// refreshed is the stand-in's answer to a refresh: a new access token, a rotated refresh
// token and more scopes.
var refreshed = replyJSON(200, `{"access_token":"new-access-token","token_type":"bearer","expires_in":3600,"refresh_token":"new-refresh-token","scope":"read write"}`)

func TestTokensAreRefreshedOnlyWhenStale(t *testing.T) {
	t.Parallel()
	now := time.Now()
	tests := []struct {
		name     string
		token    Token
		rejected string
		stale    bool
	}{
		{"an hour left", Token{AccessToken: "a", Expiry: now.Add(time.Hour), Obtained: now.Add(-time.Hour)}, "", false},
		{"no expiry", Token{AccessToken: "a"}, "", false},
		{"half a minute left", Token{AccessToken: "a", Expiry: now.Add(30 * time.Second), Obtained: now.Add(-time.Hour)}, "", true},
		{"expired", Token{AccessToken: "a", Expiry: now.Add(-time.Second)}, "", true},
		{"half a minute left, unknown age", Token{AccessToken: "a", Expiry: now.Add(30 * time.Second)}, "", true},
		{"fresh two-minute token", Token{AccessToken: "a", Expiry: now.Add(2 * time.Minute), Obtained: now}, "", false},
		{"two-minute token with 20s left", Token{AccessToken: "a", Expiry: now.Add(20 * time.Second), Obtained: now.Add(-100 * time.Second)}, "", true},
		{"rejected by the provider", Token{AccessToken: "a", Expiry: now.Add(time.Hour)}, "a", true},
		{"another token rejected", Token{AccessToken: "a", Expiry: now.Add(time.Hour)}, "b", false},
	}
	for _, tt := range tests {
		if got := stale(&tt.token, tt.rejected); got != tt.stale {
			t.Errorf("%s: stale = %v, want %v", tt.name, got, tt.stale)
		}
	}
}

func TestKeeperHandsOutAFreshTokenUnchanged(t *testing.T) {
	t.Parallel()
	k := newKeeperTest(t)
	tests := []struct {
		name      string
		token     *Token
		expiresIn time.Duration
	}{
		{"expiring in an hour", tokenExpiringIn(time.Hour), time.Hour},
		{"never expiring", &Token{AccessToken: "forever", Account: Account{ID: "1"}}, 0},
	}
	for _, tt := range tests {
		user := userNamed(tt.name)
		k.connect(t, user, tt.token)
		got, err := k.keeper.Token(t.Context(), user, k.acme.Name, k.acme, "")
		if err != nil {
			t.Fatalf("%s: Token: %v", tt.name, err)
		}
		wantToken(t, got, *tt.token, tt.expiresIn)
		if !got.Expiry.Equal(tt.token.Expiry) || !got.Obtained.Equal(tt.token.Obtained) {
			t.Errorf("%s: times changed: %+v", tt.name, got)
		}
	}
	if reqs := k.s.requests(); len(reqs) != 0 {
		t.Errorf("asked the provider %q", routesOf(reqs))
	}
}

func TestKeeperRefreshesATokenAboutToExpireAndStoresTheRotation(t *testing.T) {
	t.Parallel()
	k := newKeeperTest(t)
	user := userNamed("alice")
	k.connect(t, user, tokenExpiringIn(30*time.Second))
	k.s.handle(acmeTokenRoute, refreshed)

	got, err := k.keeper.Token(t.Context(), user, k.acme.Name, k.acme, "")
	if err != nil {
		t.Fatalf("Token: %v", err)
	}
	want := Token{AccessToken: "new-access-token", RefreshToken: "new-refresh-token", TokenType: "Bearer",
		Scopes: []string{"read", "write"}, Account: Account{ID: "42", Name: "ada"}}
	wantToken(t, got, want, time.Hour)
	wantValues(t, "refresh request", k.s.only(t).form(t), map[string]string{"grant_type": "refresh_token", "refresh_token": "old-refresh-token"})

	c := k.credential(t, user)
	if c.RefreshedAt == nil || time.Since(*c.RefreshedAt) > time.Minute || strings.Join(c.Scopes, " ") != "read write" || c.NeedsReconnect {
		t.Errorf("stored connection %+v", c)
	}
	// What was stored is what the next caller gets, without asking the provider again.
	k.s.reset()
	again, err := k.keeper.Token(t.Context(), user, k.acme.Name, k.acme, "")
	if err != nil {
		t.Fatalf("Token again: %v", err)
	}
	wantToken(t, again, want, time.Hour)
	if reqs := k.s.requests(); len(reqs) != 0 {
		t.Errorf("asked the provider again: %q", routesOf(reqs))
	}
}

func TestKeeperRefreshesAnAccessTokenTheProviderRejected(t *testing.T) {
	t.Parallel()
	k := newKeeperTest(t)
	k.s.handle(acmeTokenRoute, refreshed)

	alice := userNamed("alice")
	k.connect(t, alice, tokenExpiringIn(time.Hour))
	got, err := k.keeper.Token(t.Context(), alice, k.acme.Name, k.acme, "old-access-token")
	if err != nil || got.AccessToken != "new-access-token" {
		t.Fatalf("Token after a rejection = %+v, %v; want the refreshed token", got, err)
	}
	if n := len(k.s.requests()); n != 1 {
		t.Fatalf("%d requests, want one refresh", n)
	}

	// A rejection of a token that was already replaced is not a reason to refresh again.
	got, err = k.keeper.Token(t.Context(), alice, k.acme.Name, k.acme, "old-access-token")
	if err != nil || got.AccessToken != "new-access-token" {
		t.Fatalf("Token after a stale rejection = %+v, %v; want the stored token", got, err)
	}
	if n := len(k.s.requests()); n != 1 {
		t.Errorf("%d requests, want no second refresh", n)
	}
}

func TestConcurrentCallersWithAnExpiredTokenRefreshOnce(t *testing.T) {
	t.Parallel()
	k := newKeeperTest(t)
	user := userNamed("alice")
	k.connect(t, user, tokenExpiringIn(-time.Minute))
	var refreshes atomic.Int32
	entered, release := make(chan struct{}), make(chan struct{})
	unblock := sync.OnceFunc(func() { close(release) })
	t.Cleanup(unblock) // before the stand-in closes, which waits for the handler
	k.s.handle(acmeTokenRoute, func(w http.ResponseWriter, r *http.Request) {
		if refreshes.Add(1) == 1 {
			close(entered)
		}
		<-release // the refresh holds the lock while the other callers arrive
		refreshed(w, r)
	})

	const callers = 8
	var wg sync.WaitGroup
	got := make([]*Token, callers)
	errs := make([]error, callers)
	for i := range callers {
		wg.Go(func() { got[i], errs[i] = k.keeper.Token(t.Context(), user, k.acme.Name, k.acme, "") })
	}
	waitFor(t, entered, "a refresh")
	unblock()
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	waitFor(t, finished, "the callers")
	for i := range callers {
		if errs[i] != nil || got[i].AccessToken != "new-access-token" || got[i].RefreshToken != "new-refresh-token" {
			t.Errorf("caller %d got %+v, %v", i, got[i], errs[i])
		}
	}
	if n := refreshes.Load(); n != 1 {
		t.Errorf("%d refreshes at the provider, want 1", n)
	}
}

func TestRefusedRefreshMeansReconnect(t *testing.T) {
	t.Parallel()
	k := newKeeperTest(t)
	user := userNamed("alice")
	k.connect(t, user, tokenExpiringIn(-time.Minute))
	k.s.handle(acmeTokenRoute, replyJSON(400, `{"error":"invalid_grant","error_description":"old-refresh-token is revoked"}`))

	_, err := k.keeper.Token(t.Context(), user, k.acme.Name, k.acme, "")
	if !errors.Is(err, ErrReconnect) {
		t.Fatalf("Token: %v, want ErrReconnect", err)
	}
	wantNoSecret(t, err, "old-refresh-token", "old-access-token")
	if c := k.credential(t, user); !c.NeedsReconnect {
		t.Errorf("the connection is not marked to reconnect: %+v", c)
	}
	// Marked, it is not offered to the provider again: not to refresh, not to revoke.
	k.s.reset()
	if _, err := k.keeper.Token(t.Context(), user, k.acme.Name, k.acme, ""); !errors.Is(err, ErrReconnect) {
		t.Errorf("Token again: %v, want ErrReconnect", err)
	}
	d, err := k.keeper.Disconnect(t.Context(), user, k.acme.Name, k.acme, state.ActorClient, "disconnect tool")
	deleted, revokeErr := d.Deleted, d.RevokeErr
	if !deleted || revokeErr != nil || err != nil {
		t.Errorf("Disconnect = %v, %v, %v; want deleted without revoking", deleted, revokeErr, err)
	}
	if reqs := k.s.requests(); len(reqs) != 0 {
		t.Errorf("asked the provider %q", routesOf(reqs))
	}
	wantCounted(t, k.counters, `urlflow_token_refreshes_total{provider="acme",result="reconnect"}`)
}

func TestRefreshFailingForAPassingReasonKeepsTheConnection(t *testing.T) {
	t.Parallel()
	k := newKeeperTest(t)
	user := userNamed("alice")
	k.connect(t, user, tokenExpiringIn(-time.Minute))
	k.s.handle(acmeTokenRoute, replyJSON(503, `{"error":"temporarily_unavailable"}`))
	_, err := k.keeper.Token(t.Context(), user, k.acme.Name, k.acme, "")
	if err == nil || errors.Is(err, ErrReconnect) {
		t.Fatalf("Token: %v, want an error that is not ErrReconnect", err)
	}
	wantNoSecret(t, err, "old-refresh-token", "old-access-token")
	if c := k.credential(t, user); c.NeedsReconnect {
		t.Error("a passing failure marked the connection to reconnect")
	}

	k.s.handle(acmeTokenRoute, refreshed)
	if got, err := k.keeper.Token(t.Context(), user, k.acme.Name, k.acme, ""); err != nil || got.AccessToken != "new-access-token" {
		t.Fatalf("Token once the provider is back = %+v, %v", got, err)
	}
	wantCounted(t, k.counters, `urlflow_token_refreshes_total{provider="acme",result="error"}`)
	wantCounted(t, k.counters, `urlflow_token_refreshes_total{provider="acme",result="ok"}`)
}

func TestKeeperWithoutAConnection(t *testing.T) {
	t.Parallel()
	k := newKeeperTest(t)
	user := userNamed("alice")
	if _, err := k.keeper.Token(t.Context(), user, k.acme.Name, k.acme, ""); !errors.Is(err, ErrNotConnected) {
		t.Errorf("Token: %v, want ErrNotConnected", err)
	}
	d, err := k.keeper.Disconnect(t.Context(), user, k.acme.Name, k.acme, state.ActorClient, "disconnect tool")
	deleted, revokeErr := d.Deleted, d.RevokeErr
	if deleted || revokeErr != nil || err != nil {
		t.Errorf("Disconnect = %v, %v, %v; want nothing deleted", deleted, revokeErr, err)
	}
	// Another user's connection is not this user's.
	k.connect(t, userNamed("bob"), tokenExpiringIn(time.Hour))
	if _, err := k.keeper.Token(t.Context(), user, k.acme.Name, k.acme, ""); !errors.Is(err, ErrNotConnected) {
		t.Errorf("Token with only Bob connected: %v, want ErrNotConnected", err)
	}
	// A secret of the same name is no connection to use.
	carol := userNamed("carol")
	e, err := k.store.Create(t.Context(), flow.NewElicitation{User: carol, Kind: state.KindSecret, Target: k.acme.Name, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.store.Apply(t.Context(), e.ID, flow.BrowserOpen, state.ActorUser, ""); err != nil {
		t.Fatal(err)
	}
	secret := &credentials.Credential{Name: k.acme.Name, Kind: state.KindSecret, ElicitationID: e.ID, StoredAt: time.Now()}
	if _, err := k.store.Apply(t.Context(), e.ID, flow.Verified, state.ActorUser, "", flow.WithCredential(secret)); err != nil {
		t.Fatal(err)
	}
	if _, err := k.keeper.Token(t.Context(), carol, k.acme.Name, k.acme, ""); err == nil || !strings.Contains(err.Error(), "not a third-party connection") {
		t.Errorf("Token of a secret: %v", err)
	}
	if reqs := k.s.requests(); len(reqs) != 0 {
		t.Errorf("asked the provider %q", routesOf(reqs))
	}
}

func TestDisconnectRevokesWhereItCanAndDeletesAnyway(t *testing.T) {
	t.Parallel()
	k := newKeeperTest(t)
	noRevocation := acmeConfig("post")
	noRevocation.RevocationURL = ""
	tests := []struct {
		name      string
		provider  *Provider
		answer    http.HandlerFunc // of the revocation endpoint
		revokeErr string           // "" if revoking succeeds
	}{
		{name: "revoked", provider: k.acme, answer: reply(200, "text/plain", "")},
		{name: "revocation refused", provider: k.acme, answer: replyJSON(400, `{"error":"invalid_token","error_description":"old-refresh-token"}`), revokeErr: "400"},
		{name: "revocation failing", provider: k.acme, answer: reply(500, "text/plain", "old-refresh-token"), revokeErr: "500"},
		{name: "no revocation", provider: k.s.provider(t, noRevocation), revokeErr: ErrNoRevocation.Error()},
	}
	for _, tt := range tests {
		// One revocation endpoint answers at a time: these run one after another.
		t.Run(tt.name, func(t *testing.T) {
			user := userNamed(tt.name)
			k.connect(t, user, tokenExpiringIn(time.Hour))
			k.s.reset()
			k.s.handle(acmeRevokeRoute, tt.answer)
			d, err := k.keeper.Disconnect(t.Context(), user, tt.provider.Name, tt.provider, state.ActorClient, "disconnect tool")
			deleted, revokeErr := d.Deleted, d.RevokeErr
			if !deleted || err != nil {
				t.Fatalf("Disconnect = %v, %v, %v; want deleted", deleted, revokeErr, err)
			}
			if (tt.revokeErr == "") != (revokeErr == nil) || (revokeErr != nil && !strings.Contains(revokeErr.Error(), tt.revokeErr)) {
				t.Errorf("revocation error %v, want %q", revokeErr, tt.revokeErr)
			}
			wantNoSecret(t, revokeErr, "old-refresh-token", "old-access-token")
			if tt.answer != nil {
				wantValues(t, "revocation", k.s.only(t).form(t), map[string]string{"token": "old-refresh-token", "token_type_hint": "refresh_token"})
			}
			if _, err := k.creds.Get(t.Context(), user, k.acme.Name); !errors.Is(err, state.ErrNotFound) {
				t.Errorf("the connection is still there: %v", err)
			}
			log, err := k.trail.Read(t.Context(), time.Time{})
			if err != nil || len(log) == 0 {
				t.Fatalf("audit trail %v, %v", log, err)
			}
			if last := log[len(log)-1]; last.Event != audit.CredentialDeleted || last.Actor != state.ActorClient || last.Credential != k.acme.Name {
				t.Errorf("audit %+v", last)
			}
		})
	}
}

// A disconnect that lands while a refresh is on its way is not undone when the refresh
// comes back: the refreshed token is not stored, and the caller learns that there is no
// connection.
func TestDisconnectDuringARefreshIsNotUndone(t *testing.T) {
	t.Parallel()
	k := newKeeperTest(t)
	user := userNamed("alice")
	k.connect(t, user, tokenExpiringIn(-time.Minute))
	k.s.handle(acmeRevokeRoute, reply(200, "text/plain", ""))

	tok, err := k.duringRefresh(t, user, refreshed, func() {
		if d, err := k.keeper.Disconnect(t.Context(), user, k.acme.Name, k.acme, state.ActorClient, "disconnect tool"); !d.Deleted || err != nil {
			t.Fatalf("Disconnect = %v, %v", d.Deleted, err)
		}
	})
	if !errors.Is(err, ErrNotConnected) || tok != nil {
		t.Errorf("Token = %+v, %v; want ErrNotConnected", tok, err)
	}
	if _, err := k.creds.Get(t.Context(), user, k.acme.Name); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("the refresh brought the connection back: %v", err)
	}
}

// waitFor waits until done is closed, and fails the test if that takes more than ten
// seconds.
func waitFor(t testing.TB, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not come within ten seconds", what)
	}
}

// wantCounted fails the test unless the counter series was counted.
func wantCounted(t testing.TB, c *counters.Counters, series string) {
	t.Helper()
	counters, err := c.All(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range counters {
		if c.Series == series && c.Value > 0 {
			return
		}
	}
	t.Errorf("%s not counted: %+v", series, counters)
}

// A connection sealed with a key urlflow no longer has cannot be used, nor revoked, but it
// can still be removed.
func TestConnectionSealedWithALostKeyCanStillBeDisconnected(t *testing.T) {
	t.Parallel()
	k := newKeeperTest(t)
	user := userNamed("alice")
	k.connect(t, user, tokenExpiringIn(time.Hour))
	ring, err := vault.ParseKeyRing(vault.GenerateKeyRing("k2"))
	if err != nil {
		t.Fatal(err)
	}
	other := NewKeeper(k.creds, vault.NewVault(ring), k.counters, nil)
	if _, err := other.Token(t.Context(), user, k.acme.Name, k.acme, ""); !errors.Is(err, vault.ErrUnopenable) {
		t.Errorf("Token: %v, want ErrUnopenable", err)
	}
	d, err := other.Disconnect(t.Context(), user, k.acme.Name, k.acme, state.ActorClient, "disconnect tool")
	deleted, revokeErr := d.Deleted, d.RevokeErr
	if !deleted || !errors.Is(revokeErr, vault.ErrUnopenable) || err != nil {
		t.Errorf("Disconnect = %v, %v, %v; want deleted, not revoked", deleted, revokeErr, err)
	}
	if reqs := k.s.requests(); len(reqs) != 0 {
		t.Errorf("asked the provider %q", routesOf(reqs))
	}
}

// The provider, or whoever controls the account, chooses the account's name, which the
// page, the history and the model (connect, list_connections) show: Exchange
// bounds and cleans it however the provider gives it, so the connection is stored with the
// clean name. The ID is kept as sent.
func TestAnAccountNameIsStoredBoundedAndCleaned(t *testing.T) {
	hostile := "\u202eadmin\a\x1b[31m \t\n" + strings.Repeat("x", 300) + "\u2069"
	quoted, _ := json.Marshal(hostile)
	// clean is what is kept of prefix + hostile: 100 runes, the last an ellipsis.
	clean := func(prefix string) string {
		return prefix + "admin[31m " + strings.Repeat("x", 100-1-utf8.RuneCountInString(prefix)-len("admin[31m ")) + "…"
	}

	t.Run("from the userinfo endpoint, stored", func(t *testing.T) {
		k := newKeeperTest(t)
		k.s.handle(acmeTokenRoute, replyJSON(200, `{"access_token":"acme-at","token_type":"bearer","expires_in":3600}`))
		k.s.handle("GET api.acme.example/v1/me", replyJSON(200, `{"data":{"user":{"id":"\u202e42","handle":`+string(quoted)+`}}}`))
		tok, err := k.acme.Exchange(context.Background(), testCode, testVerifier)
		if err != nil {
			t.Fatal(err)
		}
		want := Account{ID: "\u202e42", Name: clean("")}
		if tok.Account != want {
			t.Fatalf("Exchange read the account %+q, want %+q", tok.Account, want)
		}
		user := userNamed("ada")
		k.connect(t, user, tok)
		if c := k.credential(t, user); c.Account != want.Name {
			t.Errorf("stored the account %+q", c.Account)
		}
		stored, err := k.keeper.Token(context.Background(), user, k.acme.Name, k.acme, "")
		if err != nil || stored.Account != want {
			t.Errorf("the sealed token's account %+q (%v), want %+q", stored.Account, err, want)
		}
	})
	t.Run("a name with nothing visible gives way to the ID", func(t *testing.T) {
		s := newStandIn(t)
		p := s.provider(t, acmeConfig("post"))
		s.handle(acmeTokenRoute, replyJSON(200, `{"access_token":"acme-at","token_type":"bearer"}`))
		s.handle("GET api.acme.example/v1/me", replyJSON(200, `{"data":{"user":{"id":"\u202e42","handle":"\u2066\u200b\u0007"}}}`))
		tok, err := p.Exchange(context.Background(), testCode, testVerifier)
		if err != nil {
			t.Fatal(err)
		}
		if tok.Account != (Account{ID: "\u202e42", Name: "42"}) {
			t.Errorf("Exchange read the account %+q", tok.Account)
		}
	})
	for _, tt := range []struct {
		preset string
		routes map[string]http.HandlerFunc
		want   Account
	}{
		{"slack", map[string]http.HandlerFunc{
			"POST slack.com/api/oauth.v2.access": replyJSON(200, `{"ok":true,"authed_user":{"id":"U1234","scope":"users:read",`+
				`"access_token":"xoxp-1234","token_type":"user"},"team":{"id":"T9TK3CUKW","name":"Softball"}}`),
			"POST slack.com/api/auth.test": replyJSON(200, `{"ok":true,"user":"grace","team":`+string(quoted)+`}`),
		}, Account{ID: "T9TK3CUKW/U1234", Name: clean("grace in ")}},
		{"notion", map[string]http.HandlerFunc{
			"POST api.notion.com/v1/oauth/token": replyJSON(200, `{"access_token":"ntn_4f6bdb2e1a","token_type":"bearer",`+
				`"workspace_id":"w1","workspace_name":`+string(quoted)+`,"owner":{"type":"user","user":{"id":"u1","name":"Ada"}}}`),
		}, Account{ID: "w1/u1", Name: clean("Ada in ")}},
	} {
		t.Run("from the "+tt.preset+" preset", func(t *testing.T) {
			s := newStandIn(t)
			p := s.preset(t, tt.preset, nil)
			for route, h := range tt.routes {
				s.handle(route, h)
			}
			tok, err := p.Exchange(context.Background(), testCode, testVerifier)
			if err != nil {
				t.Fatal(err)
			}
			if tok.Account != tt.want {
				t.Errorf("Exchange read the account %+q, want %+q", tok.Account, tt.want)
			}
		})
	}
}

// A refresh writes back only onto the connection it refreshed: when the user connects
// again, or urlflow locks the connection, while the provider answers, what was stored
// meanwhile stays, whatever the provider said. The caller gets the token stored now.
func TestARefreshDoesNotOverwriteWhatWasStoredMeanwhile(t *testing.T) {
	t.Parallel()
	refused := replyJSON(400, `{"error":"invalid_grant"}`)
	for name, answer := range map[string]http.HandlerFunc{"refreshed": refreshed, "refused": refused} {
		t.Run("connected again while "+name, func(t *testing.T) {
			t.Parallel()
			k, user := newKeeperTest(t), userNamed("alice")
			k.connect(t, user, tokenExpiringIn(-time.Minute))
			again := tokenExpiringIn(time.Hour)
			again.AccessToken = "reconnected-access-token"
			tok, err := k.duringRefresh(t, user, answer, func() { k.connect(t, user, again) })
			if err != nil || tok == nil || tok.AccessToken != again.AccessToken {
				t.Errorf("Token = %+v, %v; want the connection made meanwhile", tok, err)
			}
			c := k.credential(t, user)
			if stored, err := k.keeper.open(user, c); err != nil || stored.AccessToken != again.AccessToken || c.NeedsReconnect {
				t.Errorf("stored now: %+v (needs reconnect %v), %v; want the connection made meanwhile", stored, c.NeedsReconnect, err)
			}
		})
		t.Run("locked while "+name, func(t *testing.T) {
			t.Parallel()
			k, user := newKeeperTest(t), userNamed("alice")
			k.connect(t, user, tokenExpiringIn(-time.Minute))
			k.duringRefresh(t, user, answer, func() {
				if ok, err := k.creds.Lock(t.Context(), user, k.credential(t, user), state.ActorSystem, "test"); !ok || err != nil {
					t.Fatalf("Lock = %v, %v", ok, err)
				}
			})
			if c := k.credential(t, user); !c.Locked() {
				t.Errorf("the refresh unlocked the connection: %+v", c)
			}
		})
	}
}

// duringRefresh asks for user's token, which is stale, runs meanwhile while the provider
// holds the refresh request, then lets the provider answer with answer.
func (k *keeperTest) duringRefresh(t *testing.T, user state.User, answer http.HandlerFunc, meanwhile func()) (*Token, error) {
	entered, release := make(chan struct{}), make(chan struct{})
	unblock := sync.OnceFunc(func() { close(release) })
	t.Cleanup(unblock) // before the stand-in closes, which waits for the handler
	k.s.handle(acmeTokenRoute, func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
		answer(w, r)
	})
	var (
		tok *Token
		err error
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tok, err = k.keeper.Token(context.Background(), user, k.acme.Name, k.acme, "")
	}()
	waitFor(t, entered, "a refresh")
	meanwhile()
	unblock()
	waitFor(t, done, "the refreshing caller")
	return tok, err
}
