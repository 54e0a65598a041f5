package recovery

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/urlflow/urlflow/internal/redistest"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/audit"
	"github.com/urlflow/urlflow/state/flow"
	"github.com/urlflow/urlflow/state/mcpsessions"
)

var (
	quiet    = slog.New(slog.DiscardHandler)
	alice    = state.User{Issuer: "https://id.example", Subject: "alice"}
	operator = flow.Act{Actor: state.ActorOperator, By: "ops", Reason: "the user asked on the helpdesk"}
)

// fixture is a Recovery on its own redis-server, with a hub that runs.
type fixture struct {
	t        *testing.T
	r        *Recovery
	flows    *flow.Store
	sessions *mcpsessions.Registry
	hub      *flow.Hub
	trail    *audit.Trail
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	rdb := redistest.Start(t).Client(t)
	f := &fixture{t: t, flows: flow.NewStore(rdb, flow.StoreOptions{Logger: quiet}), sessions: mcpsessions.New(rdb, nil),
		hub: flow.NewHub(rdb, quiet), trail: audit.New(rdb, audit.Options{Logger: quiet})}
	f.r = New(Options{Flows: f.flows, Sessions: f.sessions, Hub: f.hub, Audit: f.trail, TTL: time.Hour, DeliveryWait: 2 * time.Second})
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.hub.Run(ctx) }()
	t.Cleanup(func() { stop(); <-done })
	select {
	case <-f.hub.Connected():
	case <-time.After(10 * time.Second):
		t.Fatal("the hub did not subscribe")
	}
	return f
}

// flowIn creates a flow of alice in MCP session sessionID (none if empty) and applies
// events to it.
func (f *fixture) flowIn(sessionID string, events ...flow.Event) *flow.Elicitation {
	f.t.Helper()
	ctx := f.t.Context()
	e, err := f.flows.Create(ctx, flow.NewElicitation{User: alice, Kind: state.KindSecret, Target: "demo_api_key",
		Purpose: "a test", TTL: time.Hour, SessionID: sessionID})
	if err != nil {
		f.t.Fatal(err)
	}
	for _, ev := range events {
		c, err := f.flows.Apply(ctx, e.ID, ev, state.ActorClient, "a test")
		if err != nil {
			f.t.Fatal(err)
		}
		e = c.Elicitation
	}
	return e
}

// operatorActions returns the causes of the operator actions in the audit trail.
func (f *fixture) operatorActions() []string {
	f.t.Helper()
	var causes []string
	err := f.trail.Export(f.t.Context(), time.Time{}, time.Now().Add(time.Hour), func(ev audit.Event) error {
		if ev.Event == audit.OperatorAction {
			causes = append(causes, ev.Cause+" by "+ev.By+": "+ev.Reason)
		}
		return nil
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return causes
}

func TestCancelEndsARunningFlowAndRefusesAnEndedOne(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	e := f.flowIn("", flow.ClientAccept)
	cancelled, err := f.r.Cancel(t.Context(), e, operator)
	if err != nil || cancelled.State != flow.Cancelled {
		t.Fatalf("Cancel = %+v, %v", cancelled, err)
	}
	var conflict *Conflict
	if _, err := f.r.Cancel(t.Context(), cancelled, operator); !errors.As(err, &conflict) ||
		conflict.Elicitation.State != flow.Cancelled || !strings.Contains(conflict.Why, "already ended") {
		t.Fatalf("a second Cancel = %v, want a conflict with the ended flow", err)
	}
	user := flow.Act{Actor: state.ActorUser, Reason: "changed my mind"}
	if _, err := f.r.Cancel(t.Context(), f.flowIn(""), user); err != nil {
		t.Fatal(err)
	}
	if got := f.operatorActions(); len(got) != 1 || got[0] != "cancel by ops: the user asked on the helpdesk" {
		t.Errorf("operator actions in the audit trail: %q; want the operator's cancel alone", got)
	}
}

func TestRetryStartsOneNewAttemptOfAFlowThatEndedWithoutSuccess(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	var conflict *Conflict
	declined := f.flowIn("", flow.ClientDecline)
	next, err := f.r.Retry(ctx, declined, operator)
	if err != nil || next.State != flow.Pending || next.RetryOf != declined.ID || next.User != alice {
		t.Fatalf("Retry = %+v, %v", next, err)
	}
	if _, err := f.r.Retry(ctx, declined, operator); !errors.As(err, &conflict) || !strings.Contains(conflict.Why, "already retried as "+next.ID) {
		t.Fatalf("a second Retry = %v, want a conflict naming %s", err, next.ID)
	}
	complete := f.flowIn("", flow.BrowserOpen)
	if c, err := f.flows.Apply(ctx, complete.ID, flow.Verified, state.ActorUser, "stored"); err == nil {
		complete = c.Elicitation
	}
	if _, err := f.r.Retry(ctx, complete, operator); !errors.As(err, &conflict) || !strings.Contains(conflict.Why, "complete") {
		t.Fatalf("Retry of a complete flow = %v, want a conflict", err)
	}
	if _, err := f.r.Retry(ctx, f.flowIn(""), operator); !errors.As(err, &conflict) || !strings.Contains(conflict.Why, "pending") {
		t.Fatalf("Retry of a running flow = %v, want a conflict", err)
	}
	if got := f.operatorActions(); len(got) != 1 || !strings.HasPrefix(got[0], "retry_new by ops") {
		t.Errorf("operator actions in the audit trail: %q", got)
	}
}

func TestResendAsksForTheNotificationAgainWhileTheSessionLives(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	var conflict *Conflict
	if _, err := f.r.Resend(ctx, f.flowIn("", flow.ClientDecline), operator); !errors.As(err, &conflict) ||
		!strings.Contains(conflict.Why, "no client session") {
		t.Fatalf("Resend without a session = %v", err)
	}
	if _, err := f.r.Resend(ctx, f.flowIn("gone", flow.ClientDecline), operator); !errors.As(err, &conflict) ||
		!strings.Contains(conflict.Why, "has ended") {
		t.Fatalf("Resend to a session that ended = %v", err)
	}

	// A session still registered by a replica that stopped beating (it died) has ended: the
	// retry answered 200 and requeued to it until its registration lapsed.
	if err := f.sessions.Register(ctx, mcpsessions.Session{ID: "on-a-dead-replica", User: alice, Replica: "dead"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := f.r.Resend(ctx, f.flowIn("on-a-dead-replica", flow.ClientDecline), operator); !errors.As(err, &conflict) ||
		!strings.Contains(conflict.Why, "stopped answering: dead") || !strings.Contains(conflict.Why, "--new") {
		t.Fatalf("Resend to a session of a dead replica = %v", err)
	}

	// The replica that holds the session writes the notification when asked again.
	if err := f.sessions.Register(ctx, mcpsessions.Session{ID: "live", User: alice, Replica: "r1"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := f.sessions.Beat(ctx, "r1", time.Minute); err != nil {
		t.Fatal(err)
	}
	e := f.flowIn("live", flow.ClientDecline)
	if _, err := f.flows.Deliveries().Record(ctx, e.ID, flow.SessionStream, nil); err != nil {
		t.Fatal(err)
	}
	f.hub.OnNotice(func(ctx context.Context, n flow.Notice) {
		if n.ID == e.ID && n.What == flow.NoticeRequeue {
			f.flows.Deliveries().Record(ctx, e.ID, flow.SessionStream, errors.New("stream not connected"))
		}
	})
	got, err := f.r.Resend(ctx, e, operator)
	if err != nil || got.Delivery.Attempts != 2 || got.Delivery.LastError != "stream not connected" || got.Delivery.WrittenAt != nil {
		t.Fatalf("Resend = %+v, %v; want the requeued notification's attempt", got, err)
	}
}
