package mcp

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/urlflow/urlflow/state/flow"
)

// The error style (−32042) and clients without URL mode, in the 2025-11-25 era.

// urlElicitationRequired returns the elicitations of a −32042 error, failing the test on
// any other error.
func urlElicitationRequired(t *testing.T, err error) []*sdk.ElicitParams {
	t.Helper()
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != sdk.CodeURLElicitationRequired {
		t.Fatalf("got %v, want the URL elicitation required error (%d)", err, sdk.CodeURLElicitationRequired)
	}
	var data struct {
		Elicitations []*sdk.ElicitParams `json:"elicitations"`
	}
	if err := json.Unmarshal(werr.Data, &data); err != nil {
		t.Fatalf("data of the −32042 error %s: %v", werr.Data, err)
	}
	return data.Elicitations
}

func TestErrorStyleAnswersURLElicitationRequiredAndNotifiesCompletion(t *testing.T) {
	t.Parallel()
	f := newFixture(t, withStyle(StyleError))
	c := f.connect(alice, clientConfig{urlMode: true})

	_, err := c.CallTool(t.Context(), setSecretParams(demoSlot))
	els := urlElicitationRequired(t, err)
	if len(els) != 1 || els[0].Mode != "url" || els[0].ElicitationID == "" || f.idOf(els[0].URL) != els[0].ElicitationID {
		t.Fatalf("elicitations: %+v", els)
	}
	id := els[0].ElicitationID
	nothingIn(t, c.elicitations, "elicitation/create in the error style")
	if e := f.get(id); e.State != flow.Pending || e.SessionID != c.sessionID {
		t.Fatalf("record: %+v", e)
	}
	_, err = c.CallTool(t.Context(), setSecretParams(demoSlot))
	if again := urlElicitationRequired(t, err); again[0].ElicitationID != id || again[0].URL != els[0].URL {
		t.Fatalf("calling again before the browser finished: %+v, first %+v", again[0], els[0])
	}

	f.browserCompletes(id, demoKey)
	if got := receive(t, c.completions, "completion notification"); got != id {
		t.Fatalf("notification for %s, want %s", got, id)
	}
	e := f.waitFor(id, "recorded as written", func(e *flow.Elicitation) bool { return e.Delivery.WrittenAt != nil })
	if e.Delivery.Attempts != 1 || e.Delivery.LastError != "" || e.Delivery.QueuedAt == nil {
		t.Fatalf("delivery: %+v", e.Delivery)
	}
	if owed, err := f.store.Deliveries().IsUndelivered(f.ctx, alice, c.sessionID, id); err != nil || owed {
		t.Fatalf("still owed after it was written: %v %v", owed, err)
	}

	res := c.call("set_secret", map[string]any{"name": demoSlot})
	if got := flowOf(t, res); res.IsError || got.Status != "stored" {
		t.Fatalf("the retry: %+v", got)
	}
}

func TestClientWithoutURLModeGetsALinkToOpen(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  clientConfig
	}{
		{"form mode only", clientConfig{}},
		{"no elicitation", clientConfig{noElicitation: true}},
	}
	for _, style := range []Style{StylePush, StyleError} {
		for _, tt := range tests {
			t.Run(string(style)+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				f := newFixture(t, withStyle(style))
				c := f.connect(alice, tt.cfg)

				started := time.Now()
				res := c.call("set_secret", map[string]any{"name": demoSlot})
				got := flowOf(t, res)
				if res.IsError || got.Status != "user_action_required" || got.State != flow.Pending || got.Name != demoSlot {
					t.Fatalf("isError=%v %+v", res.IsError, got)
				}
				if f.idOf(got.URL) != got.ElicitationID || got.ExpiresAt == nil ||
					got.ExpiresAt.Before(started.Add(f.opts.TTL-time.Minute)) || got.ExpiresAt.After(time.Now().Add(f.opts.TTL)) {
					t.Fatalf("link: %+v", got)
				}
				if text := textOf(res); !strings.Contains(text, got.URL) || !strings.Contains(text, "same request will then succeed") {
					t.Errorf("text: %q", text)
				}
				nothingIn(t, c.elicitations, "elicitation/create")

				again := flowOf(t, c.call("set_secret", map[string]any{"name": demoSlot}))
				if again.ElicitationID != got.ElicitationID || again.URL != got.URL {
					t.Fatalf("the second call gave another link: %+v, first %+v", again, got)
				}

				f.browserCompletes(got.ElicitationID, demoKey)
				res = c.call("set_secret", map[string]any{"name": demoSlot})
				if done := flowOf(t, res); res.IsError || done.Status != "stored" {
					t.Fatalf("after the browser finished: %+v", done)
				}
				// The client declared no URL mode: the notification is not owed to it.
				eventually(t, "the skipped notification recorded", func() bool {
					return f.get(got.ElicitationID).Delivery.LastError == "not sent: the client declared no URL-mode elicitation"
				})
				if e := f.get(got.ElicitationID); e.Delivery.WrittenAt != nil || e.Delivery.Attempts != 0 || e.Delivery.SkippedAt == nil || e.NotificationOwed() {
					t.Fatalf("delivery: %+v, owed %v", e.Delivery, e.NotificationOwed())
				}
				if owed, err := f.store.Deliveries().IsUndelivered(f.ctx, alice, c.sessionID, got.ElicitationID); err != nil || owed {
					t.Fatalf("still in the undelivered set after it was skipped: %v %v", owed, err)
				}
				nothingIn(t, c.completions, "completion notification")
			})
		}
	}
}
