package webhooks

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/urlflow/urlflow/internal/redistest"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/flow"
)

var (
	quiet = slog.New(slog.DiscardHandler)
	alice = state.User{Issuer: "https://id.example", Subject: "alice"}
)

// endFlow creates a flow of service and cancels it.
func endFlow(t *testing.T, flows *flow.Store, service string) *flow.Elicitation {
	t.Helper()
	e, err := flows.Create(t.Context(), flow.NewElicitation{User: alice, Kind: state.KindSecret, Target: "demo_api_key",
		Service: service, Purpose: "a test", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	c, err := flows.Apply(t.Context(), e.ID, flow.CancelRequested, state.ActorService, "test")
	if err != nil || c.Elicitation.State != flow.Cancelled {
		t.Fatalf("cancel: %+v, %v", c, err)
	}
	return c.Elicitation
}

func TestAFlowThatEndsQueuesOneDeliveryOfItsEnd(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		q := New(b.Client, func(s, _ string) bool { return s == "weather" }, nil)
		flows := flow.NewStore(b.Client, flow.StoreOptions{Logger: quiet, Outboxes: []flow.Outbox{q}})
		ctx := t.Context()
		running, err := flows.Create(ctx, flow.NewElicitation{User: alice, Kind: state.KindSecret, Target: "demo_api_key",
			Service: "weather", Purpose: "a test", TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := flows.Apply(ctx, running.ID, flow.ClientAccept, state.ActorClient, "test"); err != nil {
			t.Fatal(err)
		}
		if due, err := q.Due(ctx, time.Now().Add(time.Hour), 10); err != nil || len(due) != 0 {
			t.Fatalf("a running flow queued %v, %v", due, err)
		}
		e := endFlow(t, flows, "weather")
		due, err := q.Due(ctx, time.Now().Add(time.Minute), 10)
		if err != nil || len(due) != 1 || due[0] != e.ID {
			t.Fatalf("due after the end: %v, %v; want %s", due, err, e.ID)
		}
		d, body, ok, err := q.Claim(ctx, e.ID, time.Now().Add(time.Minute), time.Minute)
		var msg Message
		if err != nil || !ok || d.ID != ID(e.ID) || d.Type != "elicitation.cancelled" || d.Service != "weather" ||
			json.Unmarshal(body, &msg) != nil || msg.Data.Elicitation.ID != e.ID || strings.Contains(string(body), "\"url\"") {
			t.Fatalf("claimed %+v %s, %v, %v", d, body, ok, err)
		}
		// An event after the end changes nothing, and queues nothing more.
		if _, err := flows.Apply(ctx, e.ID, flow.CancelRequested, state.ActorService, "again"); err != nil {
			t.Fatal(err)
		}
		if err := q.Record(ctx, d, body, time.Now(), 200, nil, time.Time{}); err != nil {
			t.Fatal(err)
		}
		if due, _ := q.Due(ctx, time.Now().Add(time.Hour), 10); len(due) != 0 {
			t.Errorf("still due after delivery: %v", due)
		}
		if got, err := q.Delivery(ctx, e.ID); err != nil || got.DeliveredAt == nil || got.Attempts != 1 {
			t.Errorf("the record: %+v, %v", got, err)
		}
	})
}

func TestOneReplicaAtATimeAttemptsADelivery(t *testing.T) {
	t.Parallel()
	b := &redistest.Backend{Client: redistest.Start(t).Client(t)}
	q := New(b.Client, func(s, _ string) bool { return s == "weather" }, nil)
	flows := flow.NewStore(b.Client, flow.StoreOptions{Logger: quiet, Outboxes: []flow.Outbox{q}})
	e := endFlow(t, flows, "weather")
	now := time.Now()
	if _, _, ok, err := q.Claim(t.Context(), e.ID, now, time.Minute); !ok || err != nil {
		t.Fatalf("first claim: %v, %v", ok, err)
	}
	if _, _, ok, _ := q.Claim(t.Context(), e.ID, now, time.Minute); ok {
		t.Error("a claimed delivery was claimed again")
	}
	// The replica that claimed it died: after the lease, another takes it.
	if _, body, ok, _ := q.Claim(t.Context(), e.ID, now.Add(2*time.Minute), time.Minute); !ok || !json.Valid(body) {
		t.Error("a delivery whose lease ran out was not taken again")
	}
	// A flow of a service without a webhook queues nothing.
	other, err := flows.Create(t.Context(), flow.NewElicitation{User: alice, Kind: state.KindSecret, Target: "k", Service: "calendar", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	flows.Apply(t.Context(), other.ID, flow.CancelRequested, state.ActorService, "test")
	if _, err := q.Delivery(t.Context(), other.ID); err != state.ErrNotFound {
		t.Errorf("calendar's flow: %v, want no webhook", err)
	}
}
