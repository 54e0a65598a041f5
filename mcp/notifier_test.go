package mcp

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/urlflow/urlflow/recovery"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/flow"
	"github.com/urlflow/urlflow/state/mcpsessions"
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

// testHeartbeat is the replica heartbeat of the tests of ended sessions: liveness lapses,
// and the sweep looks, within a fraction of a second.
const testHeartbeat = 600 * time.Millisecond

// sessionEndedWithin waits until the delivery of id records that its session ended, and
// checks what an operator then sees: the flow neither owes a notification nor is stuck, its
// history says why, and a retry of the notification is a conflict that names a new attempt.
func (f *fixture) sessionEndedWithin(id, sessionID string, limit time.Duration, why string) *flow.Elicitation {
	f.t.Helper()
	started := time.Now()
	e := f.waitFor(id, "its delivery ended as session ended", func(e *flow.Elicitation) bool { return e.Delivery.SessionEndedAt != nil })
	if took := time.Since(started); took > limit {
		f.t.Errorf("the ended session was recorded after %v, want within %v", took, limit)
	}
	if e.NotificationOwed() || e.Delivery.WrittenAt != nil || !strings.Contains(e.Delivery.SessionEnded, why) {
		f.t.Fatalf("delivery: %+v", e.Delivery)
	}
	if !hasEntry(f.history(id), flow.SessionEnded, state.ActorSystem, e.State, e.State) {
		f.t.Fatalf("history: %+v", f.history(id))
	}
	sum, err := f.store.Index().Summarize(f.ctx, flow.Filter{})
	if err != nil || sum.OwedNotifications != 0 || sum.Stuck[flow.StuckNotification] != 0 {
		f.t.Fatalf("summary: %+v %v", sum, err)
	}
	_, err = f.opts.Recovery.Resend(f.ctx, e, flow.Act{Actor: state.ActorOperator, Reason: "test"})
	var conflict *recovery.Conflict
	if !errors.As(err, &conflict) || !strings.Contains(conflict.Why, "--new") || !strings.Contains(conflict.Why, why) {
		f.t.Fatalf("retry of the notification: %v, want a conflict naming --new and why", err)
	}
	return e
}

// TestANotificationOwedToASessionItsClientClosedEnds: the client closes its session while
// the notification of its ended flow is owed (it never opened its stream). That owed
// notification used to stay, the flow stuck, for the 7 days of retention.
func TestANotificationOwedToASessionItsClientClosedEnds(t *testing.T) {
	t.Parallel()
	f := newFixture(t, withStyle(StyleError), withReplicaHeartbeat(testHeartbeat))
	endpoint, token := f.serveHTTP()
	c := f.connectHTTP(endpoint, token("dev"), "2025-11-25", clientConfig{urlMode: true}, false)
	_, err := c.CallTool(t.Context(), setSecretParams(demoSlot))
	id := urlElicitationRequired(t, err)[0].ElicitationID
	f.browserCompletes(id, demoKey)
	f.waitFor(id, "an attempt recorded", func(e *flow.Elicitation) bool { return e.Delivery.Attempts > 0 })

	c.Close()
	f.sessionEndedWithin(id, c.sessionID, time.Second, endedByClient)
	if owed, err := f.store.Deliveries().IsUndelivered(f.ctx, devUser("dev"), c.sessionID, id); err != nil || owed {
		t.Fatalf("still in the ended session's undelivered set: %v %v", owed, err)
	}
}

// TestANotificationOfAFlowThatEndsAfterItsSessionEnds: the session was closed before the
// flow ended; nobody holds it, and the sweep records the end within seconds.
func TestANotificationOfAFlowThatEndsAfterItsSessionEnds(t *testing.T) {
	t.Parallel()
	f := newFixture(t, withStyle(StyleError), withReplicaHeartbeat(testHeartbeat))
	c := f.connect(alice, clientConfig{urlMode: true})
	_, err := c.CallTool(t.Context(), setSecretParams(demoSlot))
	id := urlElicitationRequired(t, err)[0].ElicitationID
	c.Close()
	eventually(t, "the closed session forgotten and unregistered", func() bool {
		_, live := f.server.sessions.get(c.sessionID)
		_, err := f.mcpSessions.Live(f.ctx, c.sessionID)
		return !live && err != nil
	})

	f.browserCompletes(id, demoKey)
	f.sessionEndedWithin(id, c.sessionID, 3*time.Second, mcpsessions.EndedUnregistered)
}

// TestANotificationOwedToADeadReplicasSessionEnds: the replica that holds the session dies
// (as under SIGKILL: it unregisters nothing). Its sessions count as ended once its
// heartbeat lapses, not when their registrations do (90 s), and a retry of the
// notification is a conflict at once, where it answered 200 and "requeued" to the dead
// session.
func TestANotificationOwedToADeadReplicasSessionEnds(t *testing.T) {
	t.Parallel()
	f := newFixture(t, withStyle(StyleError), withReplicaHeartbeat(testHeartbeat))
	doomed, kill := f.startKillableReplica("replica-doomed")
	endpoint, token := f.serveHTTPOf(doomed)
	c := f.connectHTTP(endpoint, token("dev"), "2025-11-25", clientConfig{urlMode: true}, false)
	_, err := c.CallTool(t.Context(), setSecretParams(demoSlot))
	id := urlElicitationRequired(t, err)[0].ElicitationID

	kill()
	f.browserCompletes(id, demoKey) // on the replica that lives
	if _, err := f.mcpSessions.Live(f.ctx, c.sessionID); err != nil {
		t.Fatalf("the dead replica's session should still be registered (until it lapses): %v", err)
	}
	e := f.sessionEndedWithin(id, c.sessionID, 4*testHeartbeat, "stopped answering: replica-doomed")
	if owed, err := f.store.Deliveries().IsUndelivered(f.ctx, devUser("dev"), c.sessionID, id); err != nil || !owed {
		t.Fatalf("left the session's undelivered set; a replica that still held the session would not find it: %v %v", owed, err)
	}
	if !strings.Contains(e.Delivery.Describe(time.Now()), "before it could be told") {
		t.Fatalf("described as %q", e.Delivery.Describe(time.Now()))
	}
}

// TestASessionFoundEndedThatLivesIsStillTold: another replica recorded the session as ended
// (its replica was cut from Redis), but the replica holds it after all: when it is back (its
// event subscription reconnects and it rechecks), it writes the notification, and the
// record says it was written after the session had been found ended.
func TestASessionFoundEndedThatLivesIsStillTold(t *testing.T) {
	t.Parallel()
	f := newFixture(t, withStyle(StyleError))
	c := f.connect(alice, clientConfig{urlMode: true})
	_, err := c.CallTool(t.Context(), setSecretParams(demoSlot))
	id := urlElicitationRequired(t, err)[0].ElicitationID
	hold := f.server.notifier.carry(id) // keeps this replica from writing it for now
	f.browserCompletes(id, demoKey)
	settled, err := f.store.Deliveries().SessionEnded(f.ctx, id, c.sessionID, "the replica that held the session stopped answering: test-replica", false)
	if err != nil || !settled {
		t.Fatalf("record the session ended: %v %v", settled, err)
	}
	hold.written = true // let go without delivering, as if the replica had been cut off
	hold.release(f.ctx)

	f.server.notifier.recheckAll(f.ctx) // what the hub's reconnection runs
	if got := receive(t, c.completions, "the notification"); got != id {
		t.Fatalf("notified %s, want %s", got, id)
	}
	e := f.waitFor(id, "recorded as written", func(e *flow.Elicitation) bool { return e.Delivery.WrittenAt != nil })
	if e.Delivery.SessionEndedAt == nil || !strings.Contains(e.Delivery.Describe(time.Now()), "it lived after all") {
		t.Fatalf("delivery: %+v", e.Delivery)
	}
	var notified *flow.Entry
	for _, h := range f.history(id) {
		if h.Event == flow.Notified {
			notified = &h
		}
	}
	if notified == nil || !strings.Contains(notified.Reason, "lived after all") {
		t.Fatalf("history: %+v", f.history(id))
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

// TestAWrittenNotificationThatCannotBeRecordedIsRecordedLater: Redis fails just as the
// push-style call writes the completion notification, and again when the notifier would
// try. The client has it: it must get no second copy, and the record must say written once
// Redis answers. It used to say owed for ever (the flow stuck while its session lived), and
// the client got the notification twice.
func TestAWrittenNotificationThatCannotBeRecordedIsRecordedLater(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var failures atomic.Int32
	failures.Store(2)
	c, id := f.storedWithWrittenNotification(t, func() bool { return failures.Add(-1) >= 0 })
	e := f.waitFor(id, "recorded as written", func(e *flow.Elicitation) bool { return e.Delivery.WrittenAt != nil })
	if e.NotificationOwed() || failures.Load() >= 0 {
		t.Fatalf("delivery %+v, failures left %d", e.Delivery, failures.Load())
	}
	nothingIn(t, c.completions, "a second copy of the notification")
}

// TestAWrittenNotificationIsNotSentAgainWhileItWaitsToBeRecorded: while Redis cannot
// record that the call wrote the notification, the record still reads as owed; a delivery
// started then (a notice, a reopened stream) must not send a second copy. (CI once saw
// TestAWrittenNotificationThatCannotBeRecordedIsRecordedLater get one, when the step's
// notice was handled after the call let go.)
func TestAWrittenNotificationIsNotSentAgainWhileItWaitsToBeRecorded(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c, id := f.storedWithWrittenNotification(t, func() bool { return true }) // never recorded
	f.server.notifier.deliver(f.ctx, id)                                     // as a notice or a reopened stream would
	nothingIn(t, c.completions, "a second copy of the notification")
}

// storedWithWrittenNotification runs a push-style set_secret of alice to "stored" and its
// completion notification, while recording a written notification fails whenever
// unrecorded says so (Redis away); it returns alice's client and the elicitation's ID.
func (f *fixture) storedWithWrittenNotification(t *testing.T, unrecorded func() bool) (*testClient, string) {
	t.Helper()
	record := f.server.notifier.recordDelivery
	f.server.notifier.recordDelivery = func(ctx context.Context, id string, via flow.Stream, attemptErr error) (*flow.Elicitation, error) {
		if attemptErr == nil && unrecorded() {
			return nil, errors.New("write in one step: dial tcp: connect: connection refused")
		}
		return record(ctx, id, via, attemptErr)
	}
	c := f.connect(alice, clientConfig{urlMode: true})
	call := c.start(setSecretParams(demoSlot))
	asked := receive(t, c.elicitations, "elicitation/create")
	f.waitForState(asked.ElicitationID, flow.Consented)
	f.browserCompletes(asked.ElicitationID, demoKey)
	if out := receive(t, call, "result"); out.err != nil || flowOf(t, out.res).Status != "stored" {
		t.Fatalf("result: %+v", out)
	}
	if got := receive(t, c.completions, "the notification"); got != asked.ElicitationID {
		t.Fatalf("notified %s", got)
	}
	return c, asked.ElicitationID
}
