package web

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/urlflow/urlflow/state/ratelimit"
	"github.com/urlflow/urlflow/web/limits"
)

// wantTooManyBadTokens fails the test unless got is the 429 of a client address over the
// bad-token limit: Retry-After within the window and a JSON error.
func wantTooManyBadTokens(t *testing.T, got answer, window time.Duration) {
	t.Helper()
	var body map[string]string
	got.decode(t, &body)
	seconds, err := strconv.Atoi(got.Header.Get("Retry-After"))
	if got.Status != http.StatusTooManyRequests || err != nil || seconds < 1 || seconds > int(window.Seconds()) ||
		!strings.Contains(body["error"], "too many bearer tokens") {
		t.Fatalf("got %d %v (Retry-After %q), want 429 with Retry-After and an error", got.Status, body, got.Header.Get("Retry-After"))
	}
}

// TestGarbageTokensFromOneAddressStopCallingTheIssuer: an attacker measured 50 garbage
// opaque tokens causing 50 introspection calls. Different tokens from one address are
// introspected up to the bad-token limit, and then refused without asking the issuer, at
// /mcp and the API alike.
func TestGarbageTokensFromOneAddressStopCallingTheIssuer(t *testing.T) {
	t.Parallel()
	limit := ratelimit.Limit{Events: 20, Window: time.Minute}
	f := newFixture(t, fixtureOptions{oidc: true, introspection: true, rateLimits: limits.Rates{BadTokens: limit}})
	signedIn := f.token(t, "alice")
	f.send(t, nil, request{method: http.MethodGet, path: "/mcp", token: signedIn}).want(t, http.StatusOK)
	for i := range 50 {
		got := f.send(t, nil, request{method: http.MethodGet, path: "/mcp", token: "opaque-garbage-" + strconv.Itoa(i)})
		if i < limit.Events {
			got.want(t, http.StatusUnauthorized)
			continue
		}
		wantTooManyBadTokens(t, got, limit.Window)
	}
	if n := f.issuer.Requests(f.issuer.IntrospectionEndpoint); n != limit.Events {
		t.Fatalf("50 garbage tokens were introspected %d times, want %d (the limit)", n, limit.Events)
	}
	wantTooManyBadTokens(t, f.send(t, nil, request{method: http.MethodGet, path: "/api/v1/elicitations/" + f.newFlow(t, "alice").ID,
		token: "opaque-garbage-for-the-api"}), limit.Window)
	// A token that verified before the limit goes on working, and is counted as a user's.
	f.send(t, nil, request{method: http.MethodGet, path: "/mcp", token: signedIn}).want(t, http.StatusOK)
	if n := f.issuer.Requests(f.issuer.IntrospectionEndpoint); n != limit.Events {
		t.Fatalf("introspected %d times in all, want no more over the limit", n)
	}
	if !strings.Contains(f.logs.String(), "too many did not verify") || !strings.Contains(f.logs.String(), "client=127.0.0.1/32") {
		t.Errorf("the refusal is not logged with the client address:\n%s", f.logs.String())
	}
}

// TestForwardedForIsBelievedOnlyFromATrustedProxy: the test's requests come from
// 127.0.0.1. Untrusted, its X-Forwarded-For changes nothing; as a trusted proxy, the
// client is the rightmost address it forwarded for that is not itself a trusted proxy.
func TestForwardedForIsBelievedOnlyFromATrustedProxy(t *testing.T) {
	t.Parallel()
	limit := ratelimit.Limit{Events: 3, Window: time.Minute}
	badToken := func(f *fixture, forwardedFor string) answer {
		return f.send(t, nil, request{method: http.MethodGet, path: "/mcp", token: "garbage",
			header: http.Header{"X-Forwarded-For": {forwardedFor}}})
	}

	t.Run("from an untrusted peer", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, fixtureOptions{rateLimits: limits.Rates{BadTokens: limit}})
		for i := range limit.Events {
			badToken(f, "203.0.113."+strconv.Itoa(i)).want(t, http.StatusUnauthorized)
		}
		wantTooManyBadTokens(t, badToken(f, "203.0.113.200"), limit.Window)
	})

	t.Run("from a trusted proxy", func(t *testing.T) {
		t.Parallel()
		trusted, err := ParseTrustedProxies("127.0.0.1, 10.0.0.0/8")
		if err != nil {
			t.Fatal(err)
		}
		f := newFixture(t, fixtureOptions{rateLimits: limits.Rates{BadTokens: limit}, trustedProxies: trusted})
		for range limit.Events {
			badToken(f, "203.0.113.7").want(t, http.StatusUnauthorized)
		}
		wantTooManyBadTokens(t, badToken(f, "203.0.113.7"), limit.Window)
		// The client writes what it likes on the left; the proxies append on the right.
		wantTooManyBadTokens(t, badToken(f, "198.51.100.1, 203.0.113.7"), limit.Window)
		wantTooManyBadTokens(t, badToken(f, "198.51.100.1, 203.0.113.7, 10.1.2.3"), limit.Window)
		badToken(f, "203.0.113.8").want(t, http.StatusUnauthorized)
		badToken(f, "203.0.113.7, 203.0.113.9").want(t, http.StatusUnauthorized)
	})
}

func TestClientAddr(t *testing.T) {
	t.Parallel()
	trusted, err := ParseTrustedProxies(" 10.0.0.0/8 ,192.0.2.1, 2001:db8::/32,")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name         string
		trusted      TrustedProxies
		peer         string
		forwardedFor []string // header lines
		want         string
	}{
		{"no proxy trusted", nil, "192.0.2.1:1234", []string{"203.0.113.7"}, "192.0.2.1"},
		{"an untrusted peer", trusted, "198.51.100.1:1234", []string{"203.0.113.7"}, "198.51.100.1"},
		{"a trusted peer without the header", trusted, "192.0.2.1:1234", nil, "192.0.2.1"},
		{"a trusted peer", trusted, "192.0.2.1:1234", []string{"203.0.113.7"}, "203.0.113.7"},
		{"a spoofed entry on the left", trusted, "192.0.2.1:1234", []string{"6.6.6.6, 203.0.113.7"}, "203.0.113.7"},
		{"a chain of trusted proxies", trusted, "10.0.0.1:1234", []string{"6.6.6.6, 203.0.113.7, 192.0.2.1, 10.9.9.9"}, "203.0.113.7"},
		{"several header lines", trusted, "10.0.0.1:1234", []string{"6.6.6.6", "203.0.113.7", "10.9.9.9"}, "203.0.113.7"},
		{"entries with ports", trusted, "10.0.0.1:1234", []string{"203.0.113.7:5555, [2001:db8::1]:443"}, "203.0.113.7"},
		{"IPv6", trusted, "[2001:db8::1]:1234", []string{"2001:db9::7"}, "2001:db9::7"},
		{"an IPv4-mapped peer", trusted, "[::ffff:192.0.2.1]:1234", []string{"203.0.113.7"}, "203.0.113.7"},
		{"garbage ends the search at the proxy that wrote it", trusted, "192.0.2.1:1234", []string{"203.0.113.7, unknown, 10.0.0.2"}, "10.0.0.2"},
		{"only trusted proxies", trusted, "192.0.2.1:1234", []string{"10.0.0.2"}, "10.0.0.2"},
		{"an unreadable peer", trusted, "not-an-address", []string{"203.0.113.7"}, "invalid IP"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/mcp", nil)
			r.RemoteAddr = tt.peer
			for _, line := range tt.forwardedFor {
				r.Header.Add("X-Forwarded-For", line)
			}
			if got := tt.trusted.ClientAddr(r).String(); got != tt.want {
				t.Errorf("ClientAddr = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestParseTrustedProxies(t *testing.T) {
	t.Parallel()
	got, err := ParseTrustedProxies("10.1.2.3/8, 192.0.2.1, ::ffff:192.0.2.2, 2001:db8::/32")
	want := TrustedProxies{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.1/32"),
		netip.MustParsePrefix("192.0.2.2/32"), netip.MustParsePrefix("2001:db8::/32")}
	if err != nil || len(got) != len(want) {
		t.Fatalf("ParseTrustedProxies = %v, %v; want %v", got, err, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("entry %d = %s, want %s", i, got[i], want[i])
		}
	}
	for _, bad := range []string{"example.com", "10.0.0.0/33", "192.0.2.1:80", "fe80::1%eth0"} {
		if _, err := ParseTrustedProxies(bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("ParseTrustedProxies(%q) = %v, want an error naming it", bad, err)
		}
	}
}
