package mcp

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/flow"
)

// The completion notification goes to the originating session only, and only while its
// user is the elicitation's user.

func TestCompletionIsNotifiedToTheOriginatingSessionOnly(t *testing.T) {
	t.Parallel()
	f := newFixture(t, withStyle(StyleError))
	origin := f.connect(alice, clientConfig{urlMode: true})
	sameUser := f.connect(alice, clientConfig{urlMode: true})
	otherUser := f.connect(bob, clientConfig{urlMode: true})

	_, err := origin.CallTool(t.Context(), setSecretParams(demoSlot))
	id := urlElicitationRequired(t, err)[0].ElicitationID
	f.browserCompletes(id, demoKey)

	if got := receive(t, origin.completions, "completion notification"); got != id {
		t.Fatalf("notification for %s, want %s", got, id)
	}
	e := f.waitFor(id, "recorded as written", func(e *flow.Elicitation) bool { return e.Delivery.WrittenAt != nil })
	if e.Delivery.Attempts != 1 {
		t.Fatalf("delivery: %+v", e.Delivery)
	}
	nothingIn(t, sameUser.completions, "notification in another session of the same user")
	nothingIn(t, otherUser.completions, "notification in another user's session")
}

func TestEveryEndByTheUserOrTheClockIsNotified(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		end  func(f *fixture, id string)
		want flow.State
	}{
		{"declined on the page", func(f *fixture, id string) { f.apply(id, flow.BrowserOpen, flow.PageDecline) }, flow.Declined},
		{"cancelled", func(f *fixture, id string) { f.apply(id, flow.CancelRequested) }, flow.Cancelled},
		{"expired", func(f *fixture, id string) { f.passDeadline(id) }, flow.Expired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, withStyle(StyleError))
			c := f.connect(alice, clientConfig{urlMode: true})
			_, err := c.CallTool(t.Context(), setSecretParams(demoSlot))
			id := urlElicitationRequired(t, err)[0].ElicitationID
			tt.end(f, id)
			if got := receive(t, c.completions, "completion notification"); got != id {
				t.Fatalf("notification for %s, want %s", got, id)
			}
			if e := f.get(id); e.State != tt.want {
				t.Fatalf("state %s, want %s", e.State, tt.want)
			}
		})
	}
}

func TestAFailedCheckIsNotNotified(t *testing.T) {
	t.Parallel()
	f := newFixture(t, withStyle(StyleError))
	c := f.connect(alice, clientConfig{urlMode: true})
	// The user may still try again after a failed check: nothing is sent for it.
	_, err := c.CallTool(t.Context(), setSecretParams(notesSlot))
	failed := urlElicitationRequired(t, err)[0].ElicitationID
	f.apply(failed, flow.BrowserOpen, flow.VerifyFailed)

	// A flow that ends afterwards is notified, and is the first notification.
	_, err = c.CallTool(t.Context(), setSecretParams(demoSlot))
	id := urlElicitationRequired(t, err)[0].ElicitationID
	f.browserCompletes(id, demoKey)
	if got := receive(t, c.completions, "completion notification"); got != id {
		t.Fatalf("notification for %s, want %s (the failed flow is %s)", got, id, failed)
	}
	if e := f.get(failed); e.State != flow.Failed || e.Delivery.Attempts != 0 || e.Delivery.QueuedAt != nil {
		t.Fatalf("the failed flow: %s %+v", e.State, e.Delivery)
	}
}

func TestNotificationIsWithheldFromASessionOfAnotherUser(t *testing.T) {
	t.Parallel()
	f := newFixture(t, withStyle(StyleError))
	c := f.connect(alice, clientConfig{urlMode: true})
	// The session was started by alice; a request in it now carries bob's token. (Over
	// HTTP the SDK refuses such a request; the notifier does not rely on that.)
	c.actAs(bob)
	_, err := c.CallTool(t.Context(), setSecretParams(demoSlot))
	id := urlElicitationRequired(t, err)[0].ElicitationID
	if e := f.get(id); e.User != bob || e.SessionID != c.sessionID {
		t.Fatalf("record: %+v", e)
	}

	withheld := f.logs.seen("session user differs from elicitation user; notification withheld", "elicitation_id", id)
	f.browserCompletes(id, demoKey)
	select {
	case <-withheld:
	case got := <-c.completions:
		t.Fatalf("bob's flow %s was notified in alice's session", got)
	case <-time.After(waitLimit):
		t.Fatal("the notifier neither withheld nor sent the notification")
	}
	nothingIn(t, c.completions, "notification of bob's flow in alice's session")
	if e := f.get(id); e.Delivery.Attempts != 0 || e.Delivery.WrittenAt != nil {
		t.Fatalf("delivery: %+v", e.Delivery)
	}
}

func TestNotificationOwedToAClosedSessionStaysQueued(t *testing.T) {
	t.Parallel()
	f := newFixture(t, withStyle(StyleError))
	c := f.connect(alice, clientConfig{urlMode: true})
	_, err := c.CallTool(t.Context(), setSecretParams(demoSlot))
	id := urlElicitationRequired(t, err)[0].ElicitationID
	c.Close()
	// The replica forgets the session, then unregisters it in Redis (sessionRegistry.end):
	// wait for both.
	eventually(t, "the closed session forgotten and unregistered", func() bool {
		_, live := f.server.sessions.get(c.sessionID)
		_, err := f.mcpSessions.Live(f.ctx, c.sessionID)
		return !live && err != nil
	})

	f.browserCompletes(id, demoKey)
	e := f.get(id)
	if e.Delivery.QueuedAt == nil || e.Delivery.WrittenAt != nil || e.Delivery.Attempts != 0 {
		t.Fatalf("delivery: %+v", e.Delivery)
	}
	if owed, err := f.store.Deliveries().IsUndelivered(f.ctx, alice, c.sessionID, id); err != nil || !owed {
		t.Fatalf("not owed any more: %v %v", owed, err)
	}
}

func TestANewAttemptIsOfferedToTheOriginatingSession(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	answers := make(chan string, 2)
	answers <- "decline"
	answers <- "accept"
	c := f.connect(alice, clientConfig{urlMode: true, answer: func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
		return &sdk.ElicitResult{Action: <-answers}, nil
	}})
	first := flowOf(t, c.call("set_secret", map[string]any{"name": demoSlot}))
	if first.State != flow.Declined {
		t.Fatalf("first attempt: %+v", first)
	}
	receive(t, c.elicitations, "elicitation/create of the first attempt")

	// The recovery API starts a new attempt ({"new": true}).
	next, err := f.store.Retry(f.ctx, first.ElicitationID, flow.Act{Actor: state.ActorUser}, f.opts.TTL)
	if err != nil {
		t.Fatal(err)
	}
	asked := receive(t, c.elicitations, "elicitation/create of the new attempt")
	if asked.ElicitationID != next.ID || f.idOf(asked.URL) != next.ID {
		t.Fatalf("offered %+v, want %s", asked, next.ID)
	}
	e := f.waitForState(next.ID, flow.Consented)
	if e.RetryOf != first.ElicitationID || e.SessionID != c.sessionID {
		t.Fatalf("new attempt: %+v", e)
	}
}

// TestRunClosesItsSessionsAndJoinsItsWorkBeforeReturning shuts the server down with a
// session open and a notification owed to a client that never takes it: Run returns
// promptly, and by then the session is unregistered and the delivery loop has stopped,
// so that urlflow can close Redis after Run without cutting anything off.
func TestRunClosesItsSessionsAndJoinsItsWorkBeforeReturning(t *testing.T) {
	t.Parallel()
	f := newFixture(t, withStyle(StyleError))
	c := f.connect(alice, clientConfig{urlMode: true})
	if _, err := f.mcpSessions.Live(f.ctx, c.sessionID); err != nil {
		t.Fatalf("the session is not registered: %v", err)
	}
	f.shutdown()
	if _, err := f.mcpSessions.Live(f.ctx, c.sessionID); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("after Run returned the session is still registered: %v", err)
	}
	if !strings.Contains(f.logs.text(), "mcp session ended") {
		t.Fatalf("the session did not end:\n%s", f.logs.text())
	}
}
