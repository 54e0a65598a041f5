package webhook

import (
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/urlflow/urlflow/internal/redistest"
	"github.com/urlflow/urlflow/state/counters"
	"github.com/urlflow/urlflow/state/webhooks"
)

// A receiver that was down when its message was given up asks for it again: it gets the
// same message, signed anew, on a schedule of its own.
func TestAGivenUpWebhookRedeliveredReachesTheReceiverThatWasDown(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		flows, queue := storeOn(b)
		count := counters.New(b.Client, slog.New(slog.DiscardHandler))
		r := newReceiver(t)
		r.failing.Store(true)
		s := NewSender(Options{Queue: queue, Counters: count, Logger: slog.New(slog.DiscardHandler),
			Schedule: []time.Duration{0, 10 * time.Millisecond},
			Targets:  func(string) (Target, bool) { return Target{URL: r.srv.URL, Keys: [][]byte{key(t)}}, true }})
		e := endFlow(t, flows)
		sendUntil(t, s, func() bool {
			d, err := queue.Delivery(ctx, e.ID)
			return err == nil && d.GivenUpAt != nil
		})
		if n := givenUpCount(t, count); n != 1 {
			t.Errorf("urlflow_webhook_given_up_total{service=weather} = %d, want 1", n)
		}

		r.failing.Store(false)
		asked := time.Now().Truncate(time.Second)
		if _, err := queue.Redeliver(ctx, e.ID, time.Now()); err != nil {
			t.Fatal(err)
		}
		sendUntil(t, s, func() bool { return len(r.received()) == 1 })
		got := r.received()[0]
		if got.ID != webhooks.ID(e.ID) || got.Elicitation.ID != e.ID || got.Type != "elicitation.cancelled" {
			t.Errorf("received %+v", got)
		}
		r.mu.Lock()
		stamp, _ := strconv.ParseInt(r.stamps[len(r.stamps)-1], 10, 64)
		r.mu.Unlock()
		if stamp < asked.Unix() {
			t.Errorf("signed at %d, before the redelivery at %d", stamp, asked.Unix())
		}
		d, _ := queue.Delivery(ctx, e.ID)
		if d.Attempts != 3 || d.Redeliveries != 1 || d.DeliveredAt == nil || d.GivenUpAt != nil {
			t.Errorf("the record: %+v", d)
		}
		if n := givenUpCount(t, count); n != 1 {
			t.Errorf("given up counted %d times, want 1", n)
		}
	})
}

// A redelivered message that fails again gets the whole schedule, not what was left of
// the first.
func TestARedeliveryGetsAFreshSchedule(t *testing.T) {
	t.Parallel()
	b := &redistest.Backend{Client: redistest.Start(t).Client(t)}
	flows, queue := storeOn(b)
	r := newReceiver(t)
	r.failing.Store(true)
	s := NewSender(Options{Queue: queue, Logger: slog.New(slog.DiscardHandler),
		Schedule: []time.Duration{0, 10 * time.Millisecond, 10 * time.Millisecond},
		Targets:  func(string) (Target, bool) { return Target{URL: r.srv.URL, Keys: [][]byte{key(t)}}, true }})
	e := endFlow(t, flows)
	givenUp := func() bool {
		d, err := queue.Delivery(t.Context(), e.ID)
		return err == nil && d.GivenUpAt != nil
	}
	sendUntil(t, s, givenUp)
	if _, err := queue.Redeliver(t.Context(), e.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	sendUntil(t, s, givenUp)
	if d, _ := queue.Delivery(t.Context(), e.ID); d.Attempts != 6 || d.Round() != 3 {
		t.Errorf("attempts %d (round %d), want 3 in each schedule", d.Attempts, d.Round())
	}
}

func givenUpCount(t *testing.T, c *counters.Counters) int64 {
	t.Helper()
	all, err := c.All(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range all {
		if s.Name == "urlflow_webhook_given_up_total" && len(s.Labels) == 1 && s.Labels[0].Value == "weather" {
			return s.Value
		}
	}
	return 0
}
