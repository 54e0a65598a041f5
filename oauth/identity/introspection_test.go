package identity

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/urlflow/urlflow/internal/issuertest"
)

// newIntrospectingServer is a ResourceServer for testResource at iss that introspects
// opaque tokens, with its clock at c.
func newIntrospectingServer(t testing.TB, iss *issuertest.Issuer, c *clock) *ResourceServer {
	t.Helper()
	rs := newResourceServer(t, iss, &ClientCredentials{ClientID: iss.ClientID, ClientSecret: iss.ClientSecret}, c.Now())
	rs.now = c.Now
	return rs
}

// TestAGarbageTokenShownAgainIsNotIntrospectedAgain: an attacker measured 50 garbage
// opaque tokens causing 50 introspection calls. The issuer's refusal is kept for
// InactiveAnswerLifetime.
func TestAGarbageTokenShownAgainIsNotIntrospectedAgain(t *testing.T) {
	t.Parallel()
	iss := issuertest.Start(t)
	c := &clock{t: wholeSecond()}
	rs := newIntrospectingServer(t, iss, c)
	const garbage = "opaque-garbage-the-issuer-never-issued"
	for range 50 {
		_, err := rs.Verify(t.Context(), garbage)
		wantRefused(t, err, garbage, "not active")
	}
	if n := iss.Requests(iss.IntrospectionEndpoint); n != 1 {
		t.Fatalf("one garbage token, 50 times, was introspected %d times, want once", n)
	}
	c.Advance(InactiveAnswerLifetime)
	_, err := rs.Verify(t.Context(), garbage)
	wantRefused(t, err, garbage, "not active")
	if n := iss.Requests(iss.IntrospectionEndpoint); n != 2 {
		t.Fatalf("introspected %d times in all, want once more once the refusal is %s old", n, InactiveAnswerLifetime)
	}
}

// TestAnActiveTokenIsBelievedForAMinuteAndNeverPastItsExpiry: the issuer is asked once
// per ActiveAnswerLifetime at most, and again once the token's exp has passed.
func TestAnActiveTokenIsBelievedForAMinuteAndNeverPastItsExpiry(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		lifetime time.Duration // of the token
		believed time.Duration
	}{
		{"long-lived token", time.Hour, ActiveAnswerLifetime},
		{"token that expires sooner", 20 * time.Second, 20 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			iss := issuertest.Start(t)
			c := &clock{t: wholeSecond()}
			rs := newIntrospectingServer(t, iss, c)
			token := iss.OpaqueToken(with(claimsAt(iss, c.Now()), func(m map[string]any) { m["exp"] = c.Now().Add(tt.lifetime).Unix() }))
			verify := func(wantIntrospections int) {
				t.Helper()
				id, err := rs.Verify(t.Context(), token)
				if err != nil || id.User.Subject != "alice" || len(id.Scopes) != 1 || id.Scopes[0] != "mcp" {
					t.Fatalf("Verify = %+v, %v", id, err)
				}
				if n := iss.Requests(iss.IntrospectionEndpoint); n != wantIntrospections {
					t.Fatalf("introspected %d times in all, want %d", n, wantIntrospections)
				}
			}
			for range 50 {
				verify(1)
			}
			c.Advance(tt.believed - time.Second)
			verify(1)
			c.Advance(time.Second)
			verify(2) // asked again, and still active (an exp just passed is within the clock skew)
		})
	}
}

// TestIntrospectionTroubleIsNotKept: an issuer that did not answer says nothing about the
// token, so the next check asks again.
func TestIntrospectionTroubleIsNotKept(t *testing.T) {
	t.Parallel()
	iss := issuertest.Start(t)
	c := &clock{t: wholeSecond()}
	rs := newIntrospectingServer(t, iss, c)
	token := iss.OpaqueToken(claimsAt(iss, c.Now()))
	iss.Override(iss.IntrospectionEndpoint, issuertest.Reply(http.StatusServiceUnavailable, "application/json", `{}`))
	for range 2 {
		if _, err := rs.Verify(t.Context(), token); err == nil || errors.Is(err, ErrInvalidToken) {
			t.Fatalf("Verify with introspection down = %v, want an error that is not ErrInvalidToken", err)
		}
	}
	iss.Override(iss.IntrospectionEndpoint, nil)
	if _, err := rs.Verify(t.Context(), token); err != nil {
		t.Fatalf("Verify once introspection answers: %v", err)
	}
	if n := iss.Requests(iss.IntrospectionEndpoint); n != 3 {
		t.Fatalf("introspected %d times, want 3: failures are not kept", n)
	}
}
