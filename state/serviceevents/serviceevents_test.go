package serviceevents

import (
	"errors"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/internal/redistest"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/flow"
)

var (
	quiet = slog.New(slog.DiscardHandler)
	alice = state.User{Issuer: "https://id.example", Subject: "alice"}
)

func TestAServiceStreamHoldsItsFlowsCreationsAndChangesInOrder(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		st := New(b.Client, nil, nil, quiet)
		s := flow.NewStore(b.Client, flow.StoreOptions{Logger: quiet, Outboxes: []flow.Outbox{st}})
		ctx := t.Context()
		start, err := st.Last(ctx, "weather")
		if err != nil || start != "0-0" {
			t.Fatalf("an empty stream ends at %q, %v", start, err)
		}
		n := flow.NewElicitation{User: alice, Kind: state.KindSecret, Target: "demo", Purpose: "a test", TTL: time.Hour}
		own := n
		n.Service = "weather"
		e, err := s.Create(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Create(ctx, own); err != nil { // urlflow's own: on no service's stream
			t.Fatal(err)
		}
		if _, err := s.Apply(ctx, e.ID, flow.ClientAccept, state.ActorClient, "test"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Apply(ctx, e.ID, flow.ClientAccept, state.ActorClient, "again: no change"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Apply(ctx, e.ID, flow.CancelRequested, state.ActorService, "test"); err != nil {
			t.Fatal(err)
		}

		events, err := st.Read(ctx, "weather", start, 10, 0)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, ev := range events {
			el := ev.Elicitation
			if el == nil || el.Elicitation.ID != e.ID || ev.ID == "" {
				t.Fatalf("event %+v is not of %s", ev, e.ID)
			}
			got = append(got, string(el.Event)+":"+string(el.From)+">"+string(el.To))
		}
		want := []string{"created:>pending", "client_accept:pending>consented", "cancel:consented>cancelled"}
		if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
			t.Fatalf("events %v, want %v", got, want)
		}
		after, err := st.Read(ctx, "weather", events[0].ID, 10, 0)
		if err != nil || len(after) != 2 || after[0].ID != events[1].ID {
			t.Errorf("after the first: %+v, %v; want the other two", after, err)
		}
		if none, err := st.Read(ctx, "weather", events[2].ID, 10, 50*time.Millisecond); err != nil || len(none) != 0 {
			t.Errorf("after the last, waiting: %+v, %v; want none", none, err)
		}
		if last, _ := st.Last(ctx, "weather"); last != events[2].ID {
			t.Errorf("the stream ends at %s, want %s", last, events[2].ID)
		}

		// Positions: a kept one is fine; one older than the retention, or before the first
		// kept event, may have lost events; one that is not an ID is refused.
		firstMs, _, _ := parsePosition(events[0].ID)
		for _, tc := range []struct {
			pos  string
			want error
		}{
			{events[0].ID, nil},
			{events[2].ID, nil},
			{strconv.FormatUint(firstMs-1, 10) + "-0", ErrEventsGone},
			{strconv.FormatInt(time.Now().Add(-Keep-time.Minute).UnixMilli(), 10) + "-0", ErrEventsGone},
			{"x-1", ErrBadPosition},
			{"17", ErrBadPosition},
			{strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10) + "-0", ErrBadPosition},
		} {
			if err := st.CheckPosition(ctx, "weather", tc.pos); !errors.Is(err, tc.want) {
				t.Errorf("CheckPosition(%s) = %v, want %v", tc.pos, err, tc.want)
			}
		}
		if err := st.CheckPosition(ctx, "calendar", events[0].ID); err != nil {
			t.Errorf("a recent position of an empty stream: %v", err)
		}
		// What a reset hands out is not reset again: the newest event's position, however
		// old, and "0-0" on a stream without events; an old position of an empty stream is.
		if err := st.CheckPosition(ctx, "calendar", "0-0"); err != nil {
			t.Errorf("0-0 of an empty stream: %v", err)
		}
		if err := st.CheckPosition(ctx, "calendar", "1000-0"); !errors.Is(err, ErrEventsGone) {
			t.Errorf("an old position of an empty stream: %v", err)
		}
		if err := b.Client.XAdd(ctx, &redis.XAddArgs{Stream: streamKey("mail"), ID: "1000-1", Values: []string{"d", "{}"}}).Err(); err != nil {
			t.Fatal(err)
		}
		if err := st.CheckPosition(ctx, "mail", "1000-1"); err != nil {
			t.Errorf("the newest event's position, however old: %v", err)
		}
		if err := st.CheckPosition(ctx, "mail", "1000-0"); !errors.Is(err, ErrEventsGone) {
			t.Errorf("an old position before the newest event: %v", err)
		}
	})
}
