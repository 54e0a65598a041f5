package identity

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// counting is a Verifier that counts the tokens it is asked to check: each one could be a
// call to the issuer.
type counting struct {
	Verifier
	checks atomic.Int64
}

func (c *counting) Verify(ctx context.Context, token string) (Claims, error) {
	c.checks.Add(1)
	return c.Verifier.Verify(ctx, token)
}

// peerAddr is the TCP peer of r: the client address when no proxy is trusted.
func peerAddr(r *http.Request) netip.Addr {
	ap, _ := netip.ParseAddrPort(r.RemoteAddr)
	return ap.Addr()
}

// badTokensFixture is RequireBearer with BadTokens at limit, on a development verifier that
// counts its checks, with a clock the test moves.
type badTokensFixture struct {
	dev     *Dev
	checks  *counting
	handler http.Handler
	clock   *clock
}

func newBadTokensFixture(t *testing.T, limit BadTokenLimit) *badTokensFixture {
	t.Helper()
	dev := NewDev([]byte(strings.Repeat("k", 32)), "https://urlflow.example/mcp")
	f := &badTokensFixture{dev: dev, checks: &counting{Verifier: dev}, clock: &clock{t: time.Now()}}
	bad := NewBadTokens(limit, peerAddr)
	bad.now = f.clock.Now
	f.handler = RequireBearer(f.checks, BearerOptions{ResourceMetadataURL: metadataURL, BadTokens: bad})(
		http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	return f
}

func (f *badTokensFixture) token(t *testing.T, name string) string {
	t.Helper()
	tok, err := f.dev.Issue(name)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// send sends token from the client at addr and returns the answer's status, its
// Retry-After and the error of its body.
func (f *badTokensFixture) send(t *testing.T, addr, token string) (status int, retryAfter, message string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	req.RemoteAddr = addr
	req.Header.Set("Authorization", "Bearer "+token)
	rec := httptest.NewRecorder()
	f.handler.ServeHTTP(rec, req)
	var body struct{ Error string }
	json.Unmarshal(rec.Body.Bytes(), &body)
	return rec.Code, rec.Header().Get("Retry-After"), body.Error
}

func TestAnAddressThatSendsBadTokensIsRefusedWithoutChecking(t *testing.T) {
	t.Parallel()
	f := newBadTokensFixture(t, BadTokenLimit{Failures: 3, Window: time.Minute})
	const attacker = "198.51.100.7:40000"
	signedInBefore := f.token(t, "alice")
	if status, _, _ := f.send(t, attacker, signedInBefore); status != http.StatusOK {
		t.Fatalf("a valid token: %d", status)
	}
	for i := range 3 {
		if status, _, _ := f.send(t, attacker, "garbage-"+strconv.Itoa(i)); status != http.StatusUnauthorized {
			t.Fatalf("bad token %d: %d, want 401", i, status)
		}
	}
	before := f.checks.checks.Load()
	for i := range 50 {
		status, retry, message := f.send(t, attacker, "garbage-more-"+strconv.Itoa(i))
		if seconds, err := strconv.Atoi(retry); status != http.StatusTooManyRequests || err != nil || seconds < 1 || seconds > 60 ||
			!strings.Contains(message, "too many bearer tokens") {
			t.Fatalf("bad token %d over the limit: %d, Retry-After %q, %q; want 429 with Retry-After", i, status, retry, message)
		}
	}
	if n := f.checks.checks.Load() - before; n != 0 {
		t.Fatalf("%d tokens over the limit were checked, want none", n)
	}

	// The choice: a token that verified before goes on working, a new one waits.
	if status, _, _ := f.send(t, attacker, signedInBefore); status != http.StatusOK {
		t.Errorf("a token that verified before the limit: %d, want 200", status)
	}
	if status, _, _ := f.send(t, attacker, f.token(t, "bob")); status != http.StatusTooManyRequests {
		t.Errorf("a token never seen from the address over the limit: %d, want 429", status)
	}
	// Other addresses are not affected, except the rest of the attacker's IPv6 /64.
	if status, _, _ := f.send(t, "198.51.100.8:40000", "garbage"); status != http.StatusUnauthorized {
		t.Errorf("a bad token from another address: %d, want 401", status)
	}
	// Once the window has passed, tokens are checked again.
	f.clock.Advance(time.Minute)
	if status, _, _ := f.send(t, attacker, f.token(t, "bob")); status != http.StatusOK {
		t.Errorf("a new valid token after the window: %d, want 200", status)
	}
}

func TestAnIPv6ClientIsCountedByItsPrefix(t *testing.T) {
	t.Parallel()
	f := newBadTokensFixture(t, BadTokenLimit{Failures: 2, Window: time.Minute})
	f.send(t, "[2001:db8:1:2::1]:40000", "garbage-1")
	f.send(t, "[2001:db8:1:2:ffff::9]:40000", "garbage-2")
	if status, _, _ := f.send(t, "[2001:db8:1:2::abcd]:40000", "garbage-3"); status != http.StatusTooManyRequests {
		t.Errorf("a third address of the same /64: %d, want 429", status)
	}
	if status, _, _ := f.send(t, "[2001:db8:1:3::1]:40000", "garbage-4"); status != http.StatusUnauthorized {
		t.Errorf("another /64: %d, want 401", status)
	}
}

func TestNewBadTokensWithoutALimitLimitsNothing(t *testing.T) {
	t.Parallel()
	for _, l := range []BadTokenLimit{{}, {Failures: 5}, {Window: time.Minute}} {
		if b := NewBadTokens(l, peerAddr); b != nil {
			t.Errorf("NewBadTokens(%+v) is not nil", l)
		}
	}
}
