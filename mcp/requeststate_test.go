package mcp

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/urlflow/urlflow/internal/signed"
	"github.com/urlflow/urlflow/state"
)

var (
	testKey = []byte(strings.Repeat("k", 32))
	alice   = state.User{Issuer: "https://id.example", Subject: "alice"}
	bob     = state.User{Issuer: "https://id.example", Subject: "bob"}
	now     = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	elicID  = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
)

func sealed(t *testing.T) string {
	t.Helper()
	return requestStates{signed.NewSealer(testKey)}.seal(requestState{User: alice.Key(), Tool: "set_secret",
		Arguments: argumentsDigest(json.RawMessage(`{"name":"k"}`)), ElicitationID: elicID, Expires: now.Add(time.Minute).Unix()})
}

func TestRequestStateOpensOnlyForItsCall(t *testing.T) {
	rs := requestStates{signed.NewSealer(testKey)}
	good := sealed(t)
	args := argumentsDigest(json.RawMessage(`{ "name" : "k" }`)) // spacing does not matter
	st, err := rs.open(good, now, alice, "set_secret", args)
	if err != nil || st.ElicitationID != elicID {
		t.Fatalf("genuine state: %+v %v", st, err)
	}
	flipped := []byte(good)
	flipped[3] ^= 1
	tests := []struct {
		name, text, tool, args string
		user                   state.User
		at                     time.Time
		why                    string
	}{
		{"tampered payload", string(flipped), "set_secret", args, alice, now, "changed"},
		{"other key", requestStates{signed.NewSealer([]byte(strings.Repeat("x", 32)))}.seal(requestState{User: alice.Key(), Tool: "set_secret", Arguments: args, ElicitationID: elicID, Expires: now.Add(time.Minute).Unix()}), "set_secret", args, alice, now, "changed"},
		{"no signature", strings.Split(good, ".")[0], "set_secret", args, alice, now, "malformed"},
		{"empty", "", "set_secret", args, alice, now, "malformed"},
		{"expired", good, "set_secret", args, alice, now.Add(2 * time.Minute), "expired"},
		{"another user", good, "set_secret", args, bob, now, "another user"},
		{"another tool", good, "call_api", args, alice, now, "another tool"},
		{"other arguments", good, "set_secret", argumentsDigest(json.RawMessage(`{"name":"other"}`)), alice, now, "other arguments"},
		{"too long", strings.Repeat("a", 5000) + ".x", "set_secret", args, alice, now, "malformed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := rs.open(tt.text, tt.at, tt.user, tt.tool, tt.args)
			if !errors.Is(err, errBadRequestState) || !strings.Contains(err.Error(), tt.why) {
				t.Fatalf("got %v, want a refusal saying %q", err, tt.why)
			}
			if len(tt.text) > 20 && strings.Contains(err.Error(), tt.text[:20]) {
				t.Fatalf("the error quotes the state: %v", err)
			}
		})
	}
}

func TestArgumentsDigestIgnoresKeyOrderAndSpacing(t *testing.T) {
	a := argumentsDigest(json.RawMessage(`{"b":1,"a":{"y":2,"x":[1,2]}}`))
	b := argumentsDigest(json.RawMessage(` { "a" : { "x" : [1, 2], "y" : 2 }, "b" : 1 } `))
	c := argumentsDigest(json.RawMessage(`{"b":1,"a":{"y":2,"x":[2,1]}}`))
	if a != b || a == c || argumentsDigest(nil) == a {
		t.Fatalf("digests: %s %s %s", a, b, c)
	}
}

// FuzzOpenRequestState checks that no text panics open or is accepted unless it is the
// genuine state.
func FuzzOpenRequestState(f *testing.F) {
	good := requestStates{signed.NewSealer(testKey)}.seal(requestState{User: alice.Key(), Tool: "set_secret", Arguments: "d", ElicitationID: elicID, Expires: now.Add(time.Minute).Unix()})
	f.Add(good)
	f.Add("e30.AAAA")
	f.Add(".")
	f.Fuzz(func(t *testing.T, text string) {
		_, err := requestStates{signed.NewSealer(testKey)}.open(text, now, alice, "set_secret", "d")
		if err == nil && text != good {
			t.Fatalf("accepted a forged state %q", text)
		}
	})
}
