package identity

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/urlflow/urlflow/state"
)

func TestRememberChecksAnAcceptedTokenAgainOnlyAfterAMinuteOrItsExpiry(t *testing.T) {
	clk := &clock{t: time.Now()}
	dev := NewDev([]byte(strings.Repeat("k", 32)), "https://urlflow.example/mcp")
	dev.now = clk.Now
	checks := &counting{Verifier: dev}
	r := Remember(checks).(*remembering)
	r.now = clk.Now
	alice, err := dev.Issue("alice")
	if err != nil {
		t.Fatal(err)
	}
	bob, _ := dev.Issue("bob")
	verify := func(token string, wantChecks int64) Claims {
		t.Helper()
		claims, err := r.Verify(t.Context(), token)
		if err != nil {
			t.Fatalf("verify: %v", err)
		}
		if got := checks.checks.Load(); got != wantChecks {
			t.Fatalf("the token was checked %d times in all, want %d", got, wantChecks)
		}
		return claims
	}
	if c := verify(alice, 1); c.User != dev.User("alice") {
		t.Fatalf("claims: %+v", c)
	}
	clk.Advance(RememberedTokenLifetime - time.Second)
	if c := verify(alice, 1); c.User != dev.User("alice") {
		t.Fatalf("remembered claims: %+v", c)
	}
	if c := verify(bob, 2); c.User != dev.User("bob") { // another token is its own
		t.Fatalf("claims of another token: %+v", c)
	}
	clk.Advance(2 * time.Second)
	verify(alice, 3)

	// Never past the token's expiry: 20 s before it, the token is remembered until then;
	// past it, it is checked on every request (the verifier allows 30 s of clock skew),
	// and then refused.
	clk.Advance(DevTokenTTL - 61*time.Second - 20*time.Second)
	verify(alice, 4)
	clk.Advance(19 * time.Second)
	verify(alice, 4)
	clk.Advance(2 * time.Second)
	verify(alice, 5)
	verify(alice, 6)
	clk.Advance(RememberedTokenLifetime)
	if _, err := r.Verify(t.Context(), alice); !errors.Is(err, ErrInvalidToken) || checks.checks.Load() != 7 {
		t.Fatalf("an expired token: %v after %d checks, want it checked and refused", err, checks.checks.Load())
	}
}

func TestRememberDoesNotRememberARefusal(t *testing.T) {
	dev := NewDev([]byte(strings.Repeat("k", 32)), "https://urlflow.example/mcp")
	checks := &counting{Verifier: dev}
	r := Remember(checks)
	for i := range 3 {
		if _, err := r.Verify(t.Context(), "not.a.token"); !errors.Is(err, ErrInvalidToken) {
			t.Fatalf("a bad token: %v", err)
		}
		if got := checks.checks.Load(); got != int64(i+1) {
			t.Fatalf("the bad token was checked %d times after %d tries", got, i+1)
		}
	}
}

// accepting accepts every token, for an hour.
type accepting struct{}

func (accepting) Verify(context.Context, string) (Claims, error) {
	return Claims{User: state.User{Issuer: "https://issuer.example", Subject: "alice"}, Expiry: time.Now().Add(time.Hour)}, nil
}

// TestRememberLeavesOpaqueTokensToTheirIntrospection: an opaque token is introspected,
// and the verifier keeps the issuer's answers for as long as it should; remembering them
// again would accept a revoked token for longer.
func TestRememberLeavesOpaqueTokensToTheirIntrospection(t *testing.T) {
	checks := &counting{Verifier: accepting{}}
	r := Remember(checks)
	for i := range 3 {
		if _, err := r.Verify(t.Context(), "opaque-token"); err != nil {
			t.Fatal(err)
		}
		if got := checks.checks.Load(); got != int64(i+1) {
			t.Fatalf("the opaque token was checked %d times after %d tries", got, i+1)
		}
	}
}

// TestRememberingTwiceIsOneMemory: the parts of the HTTP surface that each remember the
// verifier they are given (/mcp and the API) share one memory when given the same one, so
// that a token the one accepted is not checked again by the other.
func TestRememberingTwiceIsOneMemory(t *testing.T) {
	dev := NewDev([]byte(strings.Repeat("k", 32)), "https://urlflow.example/mcp")
	checks := &counting{Verifier: dev}
	shared := Remember(checks)
	mcpSide, apiSide := Remember(shared), Remember(shared)
	alice, err := dev.Issue("alice")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []Verifier{mcpSide, apiSide, mcpSide} {
		if _, err := v.Verify(t.Context(), alice); err != nil {
			t.Fatal(err)
		}
	}
	if got := checks.checks.Load(); got != 1 {
		t.Errorf("the token was checked %d times, want once", got)
	}
}
