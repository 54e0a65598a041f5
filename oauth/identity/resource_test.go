package identity

import (
	"cmp"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/urlflow/urlflow/internal/issuertest"
	"github.com/urlflow/urlflow/oauth"
	"github.com/urlflow/urlflow/state"
)

// testPublicURL is the public URL of the urlflow under test.
const testPublicURL = "https://urlflow.example"

// testResource is urlflow's MCP resource in these tests: what access tokens must name in aud.
const testResource = testPublicURL + "/mcp"

// discover discovers the issuer iss.
func discover(t testing.TB, iss *issuertest.Issuer) *oauth.Server {
	t.Helper()
	issuer, err := oauth.Discover(t.Context(), iss.URL, nil)
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	return issuer
}

// newResourceServer is a ResourceServer for testResource at iss, whose clock stands at now.
func newResourceServer(t testing.TB, iss *issuertest.Issuer, introspection *ClientCredentials, now time.Time) *ResourceServer {
	t.Helper()
	rs, err := NewResourceServer(discover(t, iss), ResourceServerConfig{Resource: testResource, Introspection: introspection})
	if err != nil {
		t.Fatalf("NewResourceServer: %v", err)
	}
	rs.now = func() time.Time { return now }
	return rs
}

// wholeSecond is the current time in whole seconds, as exp and nbf count it, so that a
// clock set to it meets the bounds of the clock skew exactly.
func wholeSecond() time.Time { return time.Now().Truncate(time.Second) }

// claimsAt are the claims of a valid access token of iss for alice at urlflow, issued at now.
func claimsAt(iss *issuertest.Issuer, now time.Time) map[string]any {
	return map[string]any{"iss": iss.URL, "sub": "alice", "aud": testResource, "scope": "mcp",
		"iat": now.Unix(), "exp": now.Add(10 * time.Minute).Unix()}
}

// with returns claims changed by change.
func with(claims map[string]any, change func(c map[string]any)) map[string]any {
	c := maps.Clone(claims)
	change(c)
	return c
}

// wantRefused fails the test unless err wraps ErrInvalidToken, says reason and quotes no
// part of token.
func wantRefused(t testing.TB, err error, token, reason string) {
	t.Helper()
	if !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("got %v, want ErrInvalidToken", err)
	}
	if !strings.Contains(err.Error(), reason) {
		t.Errorf("the refusal %q does not say %q", err, reason)
	}
	wantNoPartOf(t, err, token)
}

// wantNoPartOf fails the test if err quotes token or any of its dot-separated parts.
func wantNoPartOf(t testing.TB, err error, token string) {
	t.Helper()
	for _, part := range append(strings.Split(token, "."), token) {
		if len(part) >= 8 && strings.Contains(err.Error(), part) {
			t.Errorf("the error %q quotes the token", err)
		}
	}
}

func TestAccessTokenNamesIssuerSubjectAndScopes(t *testing.T) {
	t.Parallel()
	iss := issuertest.Start(t)
	now := wholeSecond()
	rs := newResourceServer(t, iss, nil, now)
	valid := claimsAt(iss, now)
	tests := []struct {
		name   string
		change func(c map[string]any)
		scopes []string
	}{
		{name: "scope claim", change: func(c map[string]any) { c["scope"] = "mcp  read" }, scopes: []string{"mcp", "read"}},
		{name: "scp list", change: func(c map[string]any) { delete(c, "scope"); c["scp"] = []string{"mcp", "write"} }, scopes: []string{"mcp", "write"}},
		{name: "scp string", change: func(c map[string]any) { delete(c, "scope"); c["scp"] = "mcp write" }, scopes: []string{"mcp", "write"}},
		{name: "no scopes", change: func(c map[string]any) { delete(c, "scope") }},
		{name: "audience list", change: func(c map[string]any) { c["aud"] = []string{"https://api.example", testResource} }, scopes: []string{"mcp"}},
		{name: "fractional expiry", change: func(c map[string]any) { c["exp"] = float64(now.Add(10*time.Minute).Unix()) + 0.5 }, scopes: []string{"mcp"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			id, err := rs.Verify(t.Context(), iss.AccessToken(t, with(valid, tt.change)))
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if want := (state.User{Issuer: iss.URL, Subject: "alice"}); id.User != want {
				t.Errorf("user %+v, want %+v", id.User, want)
			}
			if want := time.Unix(now.Add(10*time.Minute).Unix(), 0); !id.Expiry.Equal(want) {
				t.Errorf("expiry %v, want %v", id.Expiry, want)
			}
			if !slices.Equal(id.Scopes, tt.scopes) {
				t.Errorf("scopes %q, want %q", id.Scopes, tt.scopes)
			}
		})
	}
}

func TestBadAccessTokensAreRefusedWithoutQuotingThem(t *testing.T) {
	t.Parallel()
	iss := issuertest.Start(t)
	now := wholeSecond()
	rs := newResourceServer(t, iss, nil, now)
	valid := claimsAt(iss, now)
	token := func(change func(c map[string]any)) string { return iss.AccessToken(t, with(valid, change)) }
	parts := strings.Split(token(func(map[string]any) {}), ".") // header, payload, signature
	forged := strings.Split(token(func(c map[string]any) { c["sub"] = "mallory" }), ".")

	publicPEM := func() []byte {
		der, err := x509.MarshalPKIXPublicKey(iss.Key().Public())
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	}()
	signHS256 := func(key []byte) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims(valid))
		tok.Header["kid"] = iss.Key().ID
		s, err := tok.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	unsigned, err := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims(valid)).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name, token, reason string
	}{
		{"wrong audience", token(func(c map[string]any) { c["aud"] = "https://other.example/mcp" }), "wrong audience (want " + testResource + ")"},
		{"audience list without urlflow", token(func(c map[string]any) { c["aud"] = []string{"a", "b"} }), "wrong audience"},
		{"no audience", token(func(c map[string]any) { delete(c, "aud") }), "wrong audience"},
		{"wrong issuer", token(func(c map[string]any) { c["iss"] = "https://evil.example" }), "wrong issuer"},
		{"expired beyond the clock skew", token(func(c map[string]any) { c["exp"] = now.Add(-DefaultClockSkew - time.Second).Unix() }), "expired"},
		{"not valid yet beyond the clock skew", token(func(c map[string]any) { c["nbf"] = now.Add(DefaultClockSkew + time.Second).Unix() }), "not valid yet"},
		{"no expiry", token(func(c map[string]any) { delete(c, "exp") }), "no expiry"},
		{"no subject", token(func(c map[string]any) { delete(c, "sub") }), "no subject"},
		{"expiry not a number", token(func(c map[string]any) { c["exp"] = "tomorrow" }), "not valid"},
		{"expiry beyond any date", token(func(c map[string]any) { c["exp"] = 1e300 }), "malformed claims"},
		{"valid from beyond any date", token(func(c map[string]any) { c["nbf"] = 1e300 }), "malformed claims"},
		{"bad signature", parts[0] + "." + parts[1] + "." + parts[2][:len(parts[2])-6] + "AAAAAA", "bad signature"},
		{"claims of another token", parts[0] + "." + forged[1] + "." + parts[2], "bad signature"},
		{"key the issuer does not publish", issuertest.NewKey(t).Sign(t, valid), "bad signature"},
		{"alg none", unsigned, "malformed"},
		{"HS256 with the issuer's public key", signHS256(publicPEM), "malformed"},
		{"three parts of garbage", "eyJub3QiOiJqc29uIn0.bm90LWEtdG9rZW4.c2lnbmF0dXJlLWJ5dGVz", "malformed"},
		{"not a JWT", "opaque-token-without-dots", "not a JWT"},
		{"encrypted JWT", "eyJhbGciOiJSU0EtT0FFUCJ9.a2V5LWJ5dGVz.aXYtYnl0ZXM.Y2lwaGVydGV4dA.dGFnLWJ5dGVz", "not a JWT"},
		{"empty", "", "not a JWT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := rs.Verify(t.Context(), tt.token)
			wantRefused(t, err, tt.token, tt.reason)
		})
	}
}

func TestClockSkewIsToleratedAndNoMore(t *testing.T) {
	t.Parallel()
	iss := issuertest.Start(t)
	now := wholeSecond()
	valid := claimsAt(iss, now)
	const skew = 30 * time.Second
	rs, err := NewResourceServer(discover(t, iss), ResourceServerConfig{Resource: testResource, ClockSkew: skew})
	if err != nil {
		t.Fatal(err)
	}
	rs.now = func() time.Time { return now }
	tests := []struct {
		name   string
		change func(c map[string]any)
		reason string // "" for accepted
	}{
		{"expired within the skew", func(c map[string]any) { c["exp"] = now.Add(-skew).Unix() }, ""},
		{"expired beyond the skew", func(c map[string]any) { c["exp"] = now.Add(-skew - time.Second).Unix() }, "expired"},
		{"valid from within the skew", func(c map[string]any) { c["nbf"] = now.Add(skew).Unix() }, ""},
		{"valid from beyond the skew", func(c map[string]any) { c["nbf"] = now.Add(skew + time.Second).Unix() }, "not valid yet"},
		{"valid from a moment ago", func(c map[string]any) { c["nbf"] = now.Add(-time.Hour).Unix() }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tok := iss.AccessToken(t, with(valid, tt.change))
			_, err := rs.Verify(t.Context(), tok)
			if tt.reason == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			wantRefused(t, err, tok, tt.reason)
		})
	}
}

// clock is a time that a test moves by hand, safe for concurrent use.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// newResourceServerWithKeyClock is newResourceServer whose issuer's Keys read the time
// from keyTime, so that a test moves past the refetch interval without waiting it out.
func newResourceServerWithKeyClock(t testing.TB, iss *issuertest.Issuer, now time.Time, keyTime *clock) *ResourceServer {
	t.Helper()
	issuer := discover(t, iss)
	issuer.Keys = oauth.NewKeySet(issuer.Metadata.JWKSURI, issuer.Client, oauth.KeySetOptions{Now: keyTime.Now})
	rs, err := NewResourceServer(issuer, ResourceServerConfig{Resource: testResource})
	if err != nil {
		t.Fatalf("NewResourceServer: %v", err)
	}
	rs.now = func() time.Time { return now }
	return rs
}

// verifyAll verifies tokens one after another (as the attacker's measured requests came),
// and then all at once, and returns the errors of both in the order of tokens.
func verifyAll(t *testing.T, rs *ResourceServer, tokens []string) []error {
	t.Helper()
	errs := make([]error, 2*len(tokens))
	for i, tok := range tokens {
		_, errs[i] = rs.Verify(t.Context(), tok)
	}
	var wg sync.WaitGroup
	for i, tok := range tokens {
		wg.Go(func() { _, errs[len(tokens)+i] = rs.Verify(t.Context(), tok) })
	}
	wg.Wait()
	return errs
}

// TestForgedJWTsDoNotMakeUrlflowFetchKeys: an attacker measured 50 JWTs with a bad
// signature sent to /mcp causing 50 key fetches at the issuer. Tokens that no known key
// verifies, or that name a key the issuer does not publish, are refused without fetching
// the keys again before the refetch interval has passed.
func TestForgedJWTsDoNotMakeUrlflowFetchKeys(t *testing.T) {
	t.Parallel()
	stranger := issuertest.NewKey(t)
	tests := []struct {
		name   string
		forged func(iss *issuertest.Issuer, valid map[string]any) string
	}{
		{"bad signature", func(iss *issuertest.Issuer, valid map[string]any) string {
			parts := strings.Split(iss.AccessToken(t, valid), ".")
			return parts[0] + "." + parts[1] + "." + parts[2][:len(parts[2])-6] + "AAAAAA"
		}},
		{"unknown key ID", func(_ *issuertest.Issuer, valid map[string]any) string {
			stranger.ID = rand.Text() // a new key ID every time
			return stranger.Sign(t, valid)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			iss := issuertest.Start(t)
			now := wholeSecond()
			rs := newResourceServer(t, iss, nil, now)
			valid := claimsAt(iss, now)
			if _, err := rs.Verify(t.Context(), iss.AccessToken(t, valid)); err != nil {
				t.Fatalf("a valid token: %v", err)
			}
			forged := make([]string, 50)
			for i := range forged {
				forged[i] = tt.forged(iss, with(valid, func(c map[string]any) { c["jti"] = i }))
			}
			for i, err := range verifyAll(t, rs, forged) {
				wantRefused(t, err, forged[i%len(forged)], "bad signature")
			}
			if n := iss.Requests(iss.JWKSURI); n > 2 {
				t.Fatalf("50 forged tokens, sent twice, made urlflow fetch the keys %d times in all, want at most once besides the first", n)
			}
		})
	}
}

// TestKeysAreFetchedAgainOncePerIntervalAtMost: past the refetch interval, 50 forged
// tokens together cause one fetch, and the next ones none until the interval has passed
// again.
func TestKeysAreFetchedAgainOncePerIntervalAtMost(t *testing.T) {
	t.Parallel()
	iss := issuertest.Start(t)
	now := wholeSecond()
	keyTime := &clock{t: now}
	rs := newResourceServerWithKeyClock(t, iss, now, keyTime)
	valid := claimsAt(iss, now)
	if _, err := rs.Verify(t.Context(), iss.AccessToken(t, valid)); err != nil {
		t.Fatalf("a valid token: %v", err)
	}
	stranger := issuertest.NewKey(t)
	forged := func() []string {
		tokens := make([]string, 50)
		for i := range tokens {
			stranger.ID = rand.Text()
			tokens[i] = stranger.Sign(t, valid)
		}
		return tokens
	}
	half := oauth.DefaultRefetchInterval / 2
	for _, round := range []struct {
		since   time.Duration // since the first fetch
		fetches int           // in all
	}{{half, 1}, {2 * half, 2}, {3 * half, 2}, {4 * half, 3}} {
		keyTime.Advance(half)
		tokens := forged()
		for i, err := range verifyAll(t, rs, tokens) {
			wantRefused(t, err, tokens[i%len(tokens)], "bad signature")
		}
		if n := iss.Requests(iss.JWKSURI); n != round.fetches {
			t.Fatalf("%s after the first fetch: the keys were fetched %d times in all, want %d", round.since, n, round.fetches)
		}
	}
}

// TestKeyRotatedAtTheIssuerIsAcceptedAfterTheInterval: a token signed with a key the issuer
// published since the last fetch is refused until the refetch interval has passed, then
// accepted, and both keys are known from then on.
func TestKeyRotatedAtTheIssuerIsAcceptedAfterTheInterval(t *testing.T) {
	t.Parallel()
	iss := issuertest.Start(t)
	now := wholeSecond()
	keyTime := &clock{t: now}
	rs := newResourceServerWithKeyClock(t, iss, now, keyTime)
	verify := func(token string) {
		t.Helper()
		if _, err := rs.Verify(t.Context(), token); err != nil {
			t.Fatalf("Verify: %v", err)
		}
	}
	wantFetches := func(want int, why string) {
		t.Helper()
		if n := iss.Requests(iss.JWKSURI); n != want {
			t.Fatalf("the keys were fetched %d times in all, want %d: %s", n, want, why)
		}
	}
	old := iss.AccessToken(t, claimsAt(iss, now))
	verify(old)
	verify(old)
	wantFetches(1, "two tokens of one key")

	iss.RotateKey(t)
	rotated := iss.AccessToken(t, claimsAt(iss, now))
	keyTime.Advance(oauth.DefaultRefetchInterval - time.Second)
	_, err := rs.Verify(t.Context(), rotated)
	wantRefused(t, err, rotated, "bad signature")
	wantFetches(1, "not again within the interval")

	keyTime.Advance(time.Second)
	verify(rotated)
	wantFetches(2, "once more for the new key")
	verify(old)
	verify(rotated)
	keyTime.Advance(time.Hour)
	verify(old)
	verify(rotated)
	wantFetches(2, "no more once both keys are known")
}

func TestIntrospectedTokensAreCheckedLikeJWTs(t *testing.T) {
	t.Parallel()
	iss := issuertest.Start(t)
	now := wholeSecond()
	rs := newResourceServer(t, iss, &ClientCredentials{ClientID: iss.ClientID, ClientSecret: iss.ClientSecret}, now)
	valid := claimsAt(iss, now)

	opaque := iss.OpaqueToken(valid)
	id, err := rs.Verify(t.Context(), opaque)
	if err != nil {
		t.Fatalf("an active token: %v", err)
	}
	if want := (state.User{Issuer: iss.URL, Subject: "alice"}); id.User != want || !slices.Equal(id.Scopes, []string{"mcp"}) {
		t.Errorf("identity %+v", id)
	}
	if _, err := rs.Verify(t.Context(), iss.OpaqueToken(with(valid, func(c map[string]any) { delete(c, "iss") }))); err != nil {
		t.Errorf("an active token whose answer names no issuer: %v", err)
	}

	tests := []struct {
		name, token, reason string
	}{
		{"inactive", "opaque-token-the-issuer-never-issued", "not active"},
		{"wrong issuer", iss.OpaqueToken(with(valid, func(c map[string]any) { c["iss"] = "https://evil.example" })), "wrong issuer"},
		{"wrong audience", iss.OpaqueToken(with(valid, func(c map[string]any) { c["aud"] = "https://other.example/mcp" })), "wrong audience"},
		{"expired", iss.OpaqueToken(with(valid, func(c map[string]any) { c["exp"] = now.Add(-time.Hour).Unix() })), "expired"},
		{"not valid yet", iss.OpaqueToken(with(valid, func(c map[string]any) { c["nbf"] = now.Add(time.Hour).Unix() })), "not valid yet"},
		{"no expiry", iss.OpaqueToken(with(valid, func(c map[string]any) { delete(c, "exp") })), "no expiry"},
		{"no subject", iss.OpaqueToken(with(valid, func(c map[string]any) { delete(c, "sub") })), "no subject"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := rs.Verify(t.Context(), tt.token)
			wantRefused(t, err, tt.token, tt.reason)
		})
	}

	t.Run("a JWT is not introspected", func(t *testing.T) {
		before := iss.Requests(iss.IntrospectionEndpoint)
		if _, err := rs.Verify(t.Context(), iss.AccessToken(t, valid)); err != nil {
			t.Fatal(err)
		}
		if n := iss.Requests(iss.IntrospectionEndpoint); n != before {
			t.Errorf("a JWT was introspected")
		}
	})
}

// An issuer that cannot answer introspection is no evidence that the token is bad: the
// error does not wrap ErrInvalidToken (so the client is not told to sign in again), and
// the token is refused all the same.
func TestIntrospectionTroubleIsNotATokenRefusal(t *testing.T) {
	t.Parallel()
	iss := issuertest.Start(t)
	now := wholeSecond()
	token := iss.OpaqueToken(claimsAt(iss, now))
	tests := []struct {
		name   string
		secret string       // the client secret urlflow sends; the right one if empty
		answer http.Handler // of the introspection endpoint; the issuer's own if nil
		reason string
	}{
		{name: "wrong client credentials", secret: "not-the-secret", reason: "introspection answered 401"},
		{name: "server error", answer: issuertest.Reply(503, "application/json", `{"error":"temporarily_unavailable"}`), reason: "introspection answered 503"},
		{name: "malformed JSON", answer: issuertest.Reply(200, "application/json", `{"active": tru`), reason: "introspection answer"},
		{name: "not JSON", answer: issuertest.Reply(200, "text/html", "<html>sign in</html>"), reason: "introspection answer"},
	}
	for _, tt := range tests {
		// One introspection endpoint answers at a time: these run one after another.
		t.Run(tt.name, func(t *testing.T) {
			client := ClientCredentials{ClientID: iss.ClientID, ClientSecret: cmp.Or(tt.secret, iss.ClientSecret)}
			rs := newResourceServer(t, iss, &client, now)
			if tt.answer != nil {
				iss.Override(iss.IntrospectionEndpoint, tt.answer)
				defer iss.Override(iss.IntrospectionEndpoint, nil)
			}
			before := iss.Requests(iss.IntrospectionEndpoint)
			id, err := rs.Verify(t.Context(), token)
			if err == nil || errors.Is(err, ErrInvalidToken) || !strings.Contains(err.Error(), tt.reason) {
				t.Fatalf("Verify = %+v, %v; want an error saying %q, not ErrInvalidToken", id, err, tt.reason)
			}
			wantNoPartOf(t, err, token)
			wantNoSecret(t, err, iss.ClientSecret)
			if n := iss.Requests(iss.IntrospectionEndpoint) - before; n != 1 {
				t.Errorf("introspected %d times, want once", n)
			}
		})
	}
}

func TestIntrospectionNeedsAnIssuerThatOffersIt(t *testing.T) {
	t.Parallel()
	_, err := NewResourceServer(&oauth.Server{URL: "https://idp.example"},
		ResourceServerConfig{Resource: testResource, Introspection: &ClientCredentials{ClientID: "urlflow", ClientSecret: "s"}})
	if err == nil || !strings.Contains(err.Error(), "no introspection endpoint") {
		t.Fatalf("NewResourceServer: %v", err)
	}
}

func TestDiscoveryOfAnIssuerThatIsNotThereFails(t *testing.T) {
	t.Parallel()
	iss := issuertest.Start(t)
	if _, err := oauth.Discover(t.Context(), iss.URL+"/elsewhere", nil); err == nil {
		t.Error("discovered an issuer without a discovery document")
	}
	// The document names iss.URL, not the URL asked for.
	if _, err := oauth.Discover(t.Context(), iss.URL+"/", nil); err == nil {
		t.Error("discovered an issuer whose document names another")
	}
}

// wantNoSecret fails the test if err quotes any of secrets.
func wantNoSecret(t testing.TB, err error, secrets ...string) {
	t.Helper()
	if err != nil && slices.ContainsFunc(secrets, func(s string) bool { return s != "" && strings.Contains(err.Error(), s) }) {
		t.Errorf("the error %q quotes a secret", err)
	}
}

// TestKeysThatCannotBeFetchedAreNotATokenRefusal: when the issuer's key set does not
// answer, a token is not called invalid (which would send the client to sign in again);
// the failed fetch counts toward the refetch interval, and once the interval has passed
// and the keys answer, the same token is accepted.
func TestKeysThatCannotBeFetchedAreNotATokenRefusal(t *testing.T) {
	t.Parallel()
	iss := issuertest.Start(t)
	now := wholeSecond()
	keyTime := &clock{t: now}
	rs := newResourceServerWithKeyClock(t, iss, now, keyTime)
	token := iss.AccessToken(t, claimsAt(iss, now))
	iss.Override(iss.JWKSURI, issuertest.Reply(http.StatusBadGateway, "text/plain", "upstream down"))
	for range 3 {
		_, err := rs.Verify(t.Context(), token)
		if !errors.Is(err, oauth.ErrKeysUnavailable) || errors.Is(err, ErrInvalidToken) {
			t.Fatalf("Verify with the key set down = %v, want ErrKeysUnavailable and not ErrInvalidToken", err)
		}
		wantNoPartOf(t, err, token)
	}
	if n := iss.Requests(iss.JWKSURI); n != 1 {
		t.Fatalf("the key set that did not answer was asked %d times, want once per interval", n)
	}
	iss.Override(iss.JWKSURI, nil)
	if _, err := rs.Verify(t.Context(), token); !errors.Is(err, oauth.ErrKeysUnavailable) {
		t.Fatalf("Verify within the interval after a failed fetch = %v, want ErrKeysUnavailable", err)
	}
	keyTime.Advance(oauth.DefaultRefetchInterval)
	if _, err := rs.Verify(t.Context(), token); err != nil {
		t.Fatalf("Verify once the key set answers: %v", err)
	}
}

func TestAccessTokenNamesItsClientAndActor(t *testing.T) {
	t.Parallel()
	iss := issuertest.Start(t)
	now := wholeSecond()
	rs := newResourceServer(t, iss, nil, now)
	valid := claimsAt(iss, now)
	for _, tc := range []struct {
		name              string
		change            func(c map[string]any)
		client, actor     string
		clientOnly, fails bool
	}{
		{name: "a user's token", change: func(c map[string]any) { c["client_id"] = "claude-code" }, client: "claude-code"},
		{name: "azp", change: func(c map[string]any) { delete(c, "client_id"); c["azp"] = "vscode" }, client: "vscode"},
		{name: "client credentials", change: func(c map[string]any) { c["client_id"], c["sub"] = "weather", "weather" }, client: "weather", clientOnly: true},
		{name: "client credentials, Auth0 style", change: func(c map[string]any) { c["client_id"], c["sub"] = "weather", "weather@clients" }, client: "weather", clientOnly: true},
		{name: "exchanged", change: func(c map[string]any) { c["act"] = map[string]any{"sub": "weather"} }, actor: "weather"},
		{name: "an act without a subject", change: func(c map[string]any) { c["act"] = map[string]any{} }, fails: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			claims := with(valid, func(c map[string]any) { delete(c, "client_id"); tc.change(c) })
			id, err := rs.Verify(t.Context(), iss.AccessToken(t, claims))
			if tc.fails {
				wantRefused(t, err, "", "act")
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if id.ClientID != tc.client || id.Actor != tc.actor || id.ClientOnly() != tc.clientOnly {
				t.Errorf("client %q, actor %q, client only %v", id.ClientID, id.Actor, id.ClientOnly())
			}
		})
	}
}
