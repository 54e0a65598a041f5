package mcp

import (
	"strings"
	"testing"

	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/flow"
)

// The words of results tell a model which tool fits what was asked for: set_secret for a
// secret, connect for a third-party account; never the other.

// wording is what the texts about one kind of flow must and must not say.
type wording struct {
	kind   state.Kind
	target string
	// again is the call that asks again; wrong the tool that does not fit.
	again, wrong string
	// action is what the user does on the page; done what the page then says.
	action, done string
}

var wordings = []wording{
	{state.KindSecret, demoSlot, "call set_secret again", "connect", "enter your Demo API key", "stored"},
	{state.KindOAuth, acme, "call connect with provider acme again", "set_secret", "connect your Acme account", "connected"},
}

func TestEveryEndNamesTheToolThatFitsWhatWasAsked(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ends := []struct {
		name  string
		end   func(id string)
		ended string // what the text says of an ended flow; empty while it runs
	}{
		{"declined", func(id string) { f.apply(id, flow.ClientDecline) }, "was declined"},
		{"cancelled", func(id string) { f.apply(id, flow.ClientCancel) }, "was cancelled"},
		{"expired", func(id string) { f.passDeadline(id) }, "expired before it was used"},
		{"consented", func(id string) { f.apply(id, flow.ClientAccept) }, ""},
		{"failed", func(id string) { f.apply(id, flow.BrowserOpen, flow.VerifyFailed) }, ""},
	}
	for _, w := range wordings {
		for _, end := range ends {
			e := f.create(alice, w.kind, w.target)
			end.end(e.ID)
			text := textOf(f.server.outcome(t.Context(), f.get(e.ID)))
			says := []string{end.ended, w.again, "Nothing was " + w.done + "."}
			if end.ended == "" {
				says = []string{"Still waiting for you to " + w.action, "When the page says it is " + w.done, w.again}
			}
			for _, want := range says {
				if !strings.Contains(strings.ToLower(text), strings.ToLower(want)) {
					t.Errorf("%s %s: %q does not say %q", w.target, end.name, text, want)
				}
			}
			if strings.Contains(text, w.wrong) {
				t.Errorf("%s %s: %q names %s, which does not fit", w.target, end.name, text, w.wrong)
			}
		}
	}
}

func TestTheLinkSaysWhatTheUserDoesThere(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, w := range wordings {
		e := f.create(alice, w.kind, w.target)
		message := f.server.elicitParams(t.Context(), e, true).Message
		link := textOf(f.server.userActionRequired(t.Context(), e))
		status := describe(f.get(e.ID), f.server.asked(t.Context(), e), "https://urlflow.test/e/"+e.ID)
		switch w.kind {
		case state.KindOAuth:
			if !strings.Contains(message, "approve it at Acme") || strings.Contains(message, "enter it") {
				t.Errorf("%s: the elicitation's message %q does not say the user approves access at Acme", w.target, message)
			}
		default:
			if !strings.Contains(message, "enter it in your browser") {
				t.Errorf("%s: the elicitation's message %q does not say the user enters it", w.target, message)
			}
		}
		if !strings.Contains(link, w.action) || !strings.Contains(link, "When the page says it is "+w.done) {
			t.Errorf("%s: the link's text %q does not say %q and %q", w.target, link, w.action, w.done)
		}
		if strings.Contains(link, w.wrong) || strings.Contains(message, w.wrong) || strings.Contains(status, w.wrong) {
			t.Errorf("%s: a text names %s, which does not fit:\n%q\n%q\n%q", w.target, w.wrong, message, link, status)
		}
	}
}

// TestADeclinedConnectionAsksForAConnectionAgain is the case found with Claude Code: a
// 2026-07-28 client that declines a connection is told to call connect, not set_secret.
func TestADeclinedConnectionAsksForAConnectionAgain(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.connectModern(alice, clientConfig{urlMode: true})
	args := map[string]any{"provider": acme}
	first := c.call("connect", args)
	if p := inputRequired(t, first); !strings.Contains(p.Message, "approve it at Acme") {
		t.Errorf("the input request's message: %q", p.Message)
	}
	res := c.retry("connect", args, first.RequestState, "decline")
	if got := flowOf(t, res); got.State != flow.Declined || !strings.Contains(got.Message, "call connect with provider acme again") ||
		strings.Contains(got.Message, "set_secret") {
		t.Fatalf("after a decline: %+v", got)
	}
}
