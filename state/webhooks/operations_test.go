package webhooks

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/internal/redistest"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/flow"
)

var errDown = errors.New("the receiver answered 503 Service Unavailable")

// giveUp ends a flow of service and records its one attempt as the last, failed, at.
func giveUp(t *testing.T, flows *flow.Store, q *Queue, service string, at time.Time) *flow.Elicitation {
	t.Helper()
	e := endFlow(t, flows, service)
	d, body, ok, err := q.Claim(t.Context(), e.ID, time.Now().Add(time.Minute), time.Minute)
	if err != nil || !ok {
		t.Fatalf("claim %s: %v, %v", e.ID, ok, err)
	}
	if err := q.Record(t.Context(), d, body, at, 503, errDown, time.Time{}); err != nil {
		t.Fatal(err)
	}
	return e
}

func queueOn(b *redistest.Backend) (*flow.Store, *Queue) {
	q := New(b.Client, func(s, _ string) bool { return s == "weather" || s == "calendar" }, nil)
	return flow.NewStore(b.Client, flow.StoreOptions{Logger: quiet, Outboxes: []flow.Outbox{q}}), q
}

func TestGivenUpDeliveriesAreListedByServiceNewestFirstInPages(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		flows, q := queueOn(b)
		ctx := t.Context()
		now := time.Now()
		var ids []string // oldest first
		for i := range 5 {
			// Two at the same millisecond: the cursor tells them apart.
			ids = append(ids, giveUp(t, flows, q, "weather", now.Add(time.Duration(min(i, 3))*time.Second)).ID)
		}
		giveUp(t, flows, q, "calendar", now)
		var listed []string
		cursor := ""
		for pages := 0; ; pages++ {
			page, err := q.GivenUp(ctx, "weather", cursor, 2)
			if err != nil || pages > 3 {
				t.Fatalf("page %d: %+v, %v", pages, page, err)
			}
			for _, d := range page.Deliveries {
				if d.GivenUpAt == nil || d.Service != "weather" || d.ID != ID(d.ElicitationID) || d.Attempts != 1 {
					t.Errorf("listed %+v", d)
				}
				listed = append(listed, d.ElicitationID)
			}
			if cursor = page.Next; cursor == "" {
				break
			}
		}
		if len(listed) != 5 || listed[0] != ids[4] && listed[0] != ids[3] || listed[2] != ids[2] || listed[4] != ids[0] {
			t.Errorf("listed %v, want the newest first of %v", listed, ids)
		}
		if _, err := q.GivenUp(ctx, "weather", "not-a-cursor", 2); !errors.Is(err, ErrBadCursor) {
			t.Errorf("a cursor not handed out: %v", err)
		}
		// A record that expired is skipped, and leaves the index.
		b.Client.Del(ctx, deliveryKey(ids[4]))
		page, err := q.GivenUp(ctx, "weather", "", 10)
		if err != nil || len(page.Deliveries) != 4 || page.Next != "" {
			t.Errorf("after an expiry: %+v, %v", page, err)
		}
		if err := b.Client.ZScore(ctx, givenUpKey("weather"), ids[4]).Err(); !errors.Is(err, redis.Nil) {
			t.Errorf("the expired entry is still indexed: %v", err)
		}
	})
}

func TestTheGivenUpIndexIsTrimmedOfWhatIsOlderThanTheRetention(t *testing.T) {
	t.Parallel()
	flows, q := queueOn(&redistest.Backend{Client: redistest.Start(t).Client(t)})
	old := giveUp(t, flows, q, "weather", time.Now().Add(-Keep-time.Hour))
	giveUp(t, flows, q, "weather", time.Now())
	if err := q.rdb.ZScore(t.Context(), givenUpKey("weather"), old.ID).Err(); !errors.Is(err, redis.Nil) {
		t.Errorf("an entry older than Keep is still indexed: %v", err)
	}
}

func TestARedeliveryQueuesTheSameMessageOnAFreshScheduleOnce(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		flows, q := queueOn(b)
		ctx := t.Context()
		e := giveUp(t, flows, q, "weather", time.Now())
		_, firstBody, _ := q.read(ctx, e.ID)
		at := time.Now().Add(time.Second)
		d, err := q.Redeliver(ctx, e.ID, at)
		if err != nil || d.Redeliveries != 1 || d.RedeliveredAt == nil || d.GivenUpAt != nil || d.Attempts != 1 ||
			d.NextAttemptAt == nil || !d.NextAttemptAt.Equal(at) {
			t.Fatalf("redelivered: %+v, %v", d, err)
		}
		if _, err := q.Redeliver(ctx, e.ID, at); !errors.Is(err, ErrPending) {
			t.Errorf("redelivered while pending: %v", err)
		}
		if page, _ := q.GivenUp(ctx, "weather", "", 10); len(page.Deliveries) != 0 {
			t.Errorf("still listed as given up: %+v", page)
		}
		claimed, body, ok, err := q.Claim(ctx, e.ID, at, time.Minute)
		if err != nil || !ok || claimed.Round() != 0 || claimed.Attempts != 1 || claimed.ID != ID(e.ID) {
			t.Fatalf("claimed after the redelivery: %+v, %v, %v", claimed, ok, err)
		}
		var first record
		if decode(firstBody, &first) != nil || string(body) != first.Body {
			t.Errorf("the body changed: %s, want %s", body, first.Body)
		}
		if err := q.Record(ctx, claimed, body, at, 200, nil, time.Time{}); err != nil {
			t.Fatal(err)
		}
		got, err := q.Delivery(ctx, e.ID)
		if err != nil || got.Attempts != 2 || got.DeliveredAt == nil || got.Redeliveries != 1 || got.GivenUpAt != nil {
			t.Errorf("delivered after the redelivery: %+v, %v", got, err)
		}
		// A delivered message may be asked for again; a flow without a delivery may not.
		if _, err := q.Redeliver(ctx, e.ID, at); err != nil {
			t.Errorf("a delivered message: %v", err)
		}
		if _, err := q.Redeliver(ctx, "e_unknown", at); !errors.Is(err, state.ErrNotFound) {
			t.Errorf("no delivery: %v", err)
		}
	})
}

func TestAStrayDueEntryNeverResendsAFinishedDelivery(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		flows, q := queueOn(b)
		ctx := t.Context()
		e := giveUp(t, flows, q, "weather", time.Now())
		// A redelivery that queued it and died before it set the record.
		b.Client.ZAdd(ctx, dueKey, redis.Z{Score: float64(time.Now().UnixMilli()), Member: e.ID})
		if _, _, ok, err := q.Claim(ctx, e.ID, time.Now().Add(time.Second), time.Minute); ok || err != nil {
			t.Errorf("a given-up delivery was claimed: %v, %v", ok, err)
		}
		if due, _ := q.Due(ctx, time.Now().Add(time.Hour), 10); len(due) != 0 {
			t.Errorf("the stray entry stays due: %v", due)
		}
		// Unless a redelivery queued it again since the claim read it.
		b.Client.ZAdd(ctx, dueKey, redis.Z{Score: 1000, Member: e.ID})
		if err := q.unclaim(ctx, e.ID, 2000); err != nil {
			t.Fatal(err)
		}
		if due, _ := q.Due(ctx, time.Now(), 10); len(due) != 1 {
			t.Errorf("a due entry queued after the claim was dropped: %v", due)
		}
	})
}
