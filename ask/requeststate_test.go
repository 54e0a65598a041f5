package ask

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/flow"
)

var (
	toolKey    = []byte(strings.Repeat("k", 32))
	serviceKey = []byte(strings.Repeat("s", 32))
	alice      = state.User{Issuer: "https://id.example", Subject: "alice"}
	bob        = state.User{Issuer: "https://id.example", Subject: "bob"}
	now        = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	// elicitation is one of alice's, whose state is issued at now.
	elicitation = &flow.Elicitation{ID: "ABCDEFGHIJKLMNOPQRSTUVWXYZ", User: alice, ExpiresAt: now.Add(time.Minute)}
)

// askerAt returns an Asker for requestStates only, whose clock says at.
func askerAt(at time.Time, toolKey, serviceKey []byte) *Asker {
	return New(Options{ToolStateKeys: [][]byte{toolKey}, ServiceStateKeys: [][]byte{serviceKey}, Now: func() time.Time { return at }})
}

func TestARequestStateRedeemsOnlyForItsCall(t *testing.T) {
	a := askerAt(now, toolKey, serviceKey)
	tool := ToolBinding("set_secret", json.RawMessage(`{"name":"k"}`))
	service := ServiceBinding("weather", state.KindSecret, "demo_api_key", "get_forecast:abc")
	forTool, forService := a.Issue(elicitation, tool), a.Issue(elicitation, service)
	for name, tt := range map[string]struct {
		text string
		b    Binding
	}{
		"tool, arguments spaced otherwise": {forTool, ToolBinding("set_secret", json.RawMessage(`{ "name" : "k" }`))},
		"service":                          {forService, service},
	} {
		if id, err := a.Redeem(tt.text, alice, tt.b); err != nil || id != elicitation.ID {
			t.Errorf("%s: a genuine state: %q, %v", name, id, err)
		}
	}
	flipped := []byte(forTool)
	flipped[3] ^= 1
	tests := []struct {
		name, text string
		b          Binding
		user       state.User
		at         time.Time
		why        string
	}{
		{"tampered payload", string(flipped), tool, alice, now, "changed"},
		{"another key", askerAt(now, serviceKey, toolKey).Issue(elicitation, tool), tool, alice, now, "changed"},
		{"a service's, sent back to a tool", forService, tool, alice, now, "changed"},
		{"a tool's, sent back by a service", forTool, service, alice, now, "changed"},
		{"no signature", strings.Split(forTool, ".")[0], tool, alice, now, "malformed"},
		{"empty", "", tool, alice, now, "malformed"},
		{"too long", strings.Repeat("a", 5000) + ".x", tool, alice, now, "malformed"},
		{"expired", forTool, tool, alice, now.Add(time.Minute + StateGrace + time.Second), "expired"},
		{"another user", forTool, tool, bob, now, "another user"},
		{"another tool", forTool, ToolBinding("call_api", json.RawMessage(`{"name":"k"}`)), alice, now, "another tool"},
		{"other arguments", forTool, ToolBinding("set_secret", json.RawMessage(`{"name":"other"}`)), alice, now, "other arguments"},
		{"another service", forService, ServiceBinding("calendar", state.KindSecret, "demo_api_key", "get_forecast:abc"), alice, now, "another service"},
		{"another slot", forService, ServiceBinding("weather", state.KindSecret, "notes_token", "get_forecast:abc"), alice, now, "another slot"},
		{"a provider", forService, ServiceBinding("weather", state.KindOAuth, "demo_api_key", "get_forecast:abc"), alice, now, "another provider"},
		{"another call", forService, ServiceBinding("weather", state.KindSecret, "demo_api_key", "other"), alice, now, "another call"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := askerAt(tt.at, toolKey, serviceKey).Redeem(tt.text, tt.user, tt.b)
			if !errors.Is(err, ErrBadState) || !strings.Contains(err.Error(), tt.why) {
				t.Fatalf("got %v, want a refusal saying %q", err, tt.why)
			}
			if len(tt.text) > 20 && strings.Contains(err.Error(), tt.text[:20]) {
				t.Fatalf("the error quotes the state: %v", err)
			}
		})
	}
}

// TestRequestStatesIssuedBeforeTheyWereOneFormatStillRedeem: the two formats that came
// before (one for urlflow's tools, one for services) had the keys of this one, so a retry
// in flight across an upgrade goes on.
func TestRequestStatesIssuedBeforeTheyWereOneFormatStillRedeem(t *testing.T) {
	a := askerAt(now, toolKey, serviceKey)
	x := now.Add(time.Minute).Unix()
	args := ArgumentsDigest(json.RawMessage(`{"name":"k"}`))
	oldTool := a.tools.Seal(map[string]any{"v": 1, "u": alice.Key(), "t": "set_secret", "a": args, "e": elicitation.ID, "x": x})
	oldService := a.services.Seal(map[string]any{"v": 1, "s": "weather", "u": alice.Key(), "t": "secret:demo_api_key",
		"c": "get_forecast:abc", "e": elicitation.ID, "x": x})
	if id, err := a.Redeem(oldTool, alice, ToolBinding("set_secret", json.RawMessage(`{"name":"k"}`))); err != nil || id != elicitation.ID {
		t.Errorf("a tool's state of the earlier format: %q, %v", id, err)
	}
	if id, err := a.Redeem(oldService, alice, ServiceBinding("weather", state.KindSecret, "demo_api_key", "get_forecast:abc")); err != nil || id != elicitation.ID {
		t.Errorf("a service's state of the earlier format: %q, %v", id, err)
	}
}

func TestArgumentsDigestIgnoresKeyOrderAndSpacing(t *testing.T) {
	a := ArgumentsDigest(json.RawMessage(`{"b":1,"a":{"y":2,"x":[1,2]}}`))
	b := ArgumentsDigest(json.RawMessage(` { "a" : { "x" : [1, 2], "y" : 2 }, "b" : 1 } `))
	c := ArgumentsDigest(json.RawMessage(`{"b":1,"a":{"y":2,"x":[2,1]}}`))
	if a != b || a == c || ArgumentsDigest(nil) == a {
		t.Fatalf("digests: %s %s %s", a, b, c)
	}
}

// FuzzRedeem checks that no text panics Redeem or is accepted unless it is the genuine
// state.
func FuzzRedeem(f *testing.F) {
	a := askerAt(now, toolKey, serviceKey)
	b := ToolBinding("set_secret", json.RawMessage(`{"name":"k"}`))
	good := a.Issue(elicitation, b)
	f.Add(good)
	f.Add("e30.AAAA")
	f.Add(".")
	f.Fuzz(func(t *testing.T, text string) {
		_, err := a.Redeem(text, alice, b)
		if err == nil && text != good {
			t.Fatalf("accepted a forged state %q", text)
		}
	})
}

// BenchmarkRequestState measures what every 2026-07-28 retry pays to trust its
// requestState: the digest of the arguments, and issuing or redeeming the state.
//
//	go test -run='^$' -bench=RequestState ./ask
func BenchmarkRequestState(b *testing.B) {
	a := askerAt(now, toolKey, serviceKey)
	args := json.RawMessage(`{"name":"demo_api_key","method":"GET","path":"/whoami","query":{"page":"2"}}`)
	binding := ToolBinding("call_api", args)
	b.Run("digest", func(b *testing.B) {
		for b.Loop() {
			ArgumentsDigest(args)
		}
	})
	b.Run("issue", func(b *testing.B) {
		for b.Loop() {
			a.Issue(elicitation, binding)
		}
	})
	b.Run("redeem", func(b *testing.B) {
		text := a.Issue(elicitation, binding)
		for b.Loop() {
			if _, err := a.Redeem(text, alice, binding); err != nil {
				b.Fatal(err)
			}
		}
	})
}
