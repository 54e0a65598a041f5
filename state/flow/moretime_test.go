package flow

import (
	"errors"
	"testing"
	"time"

	"github.com/urlflow/urlflow/internal/redistest"
	"github.com/urlflow/urlflow/state"
)

func TestAUserGetsMoreTimeOnlyWhereTheDeadlineCanMove(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		clk := newClock()
		s, ctx := newStore(b, clk), t.Context()
		user := state.User{Issuer: "https://id.example", Subject: "slow-reader"}
		e := mustCreate(t, s, newElicitation(user)) // a 2025-11-25 session's
		deadline := e.ExpiresAt

		longer, err := s.MoreTime(ctx, e.ID, testTTL, state.ActorUser)
		if err != nil || !longer.ExpiresAt.Equal(deadline.Add(testTTL)) || longer.Extensions != 1 || longer.State != Pending {
			t.Fatalf("MoreTime = %+v, %v; want the deadline %v later, once, still pending", longer, err, testTTL)
		}
		if h := mustHistory(t, s, e.ID); h[len(h)-1].Event != TimeExtended || h[len(h)-1].Actor != state.ActorUser {
			t.Errorf("history ends with %+v, want the extension by the user", h[len(h)-1])
		}
		s.flushIndexes(ctx)
		if score := b.Client.ZScore(ctx, deadlinesKey, e.ID).Val(); int64(score) != longer.ExpiresAt.UnixMilli() {
			t.Errorf("the deadline index holds %v, want %v", score, longer.ExpiresAt.UnixMilli())
		}
		clk.Advance(testTTL + time.Second) // past the first deadline, before the new one
		if _, err := s.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		if got := mustGet(t, s, e.ID); got.State != Pending {
			t.Fatalf("after the first deadline the flow is %s, want it running", got.State)
		}
		for range MaxExtensions - 1 {
			if _, err := s.MoreTime(ctx, e.ID, time.Minute, state.ActorUser); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.MoreTime(ctx, e.ID, time.Minute, state.ActorUser); !errors.Is(err, ErrConflict) {
			t.Errorf("more time past %d extensions: %v, want ErrConflict", MaxExtensions, err)
		}

		modern := newElicitation(user)
		modern.SessionID, modern.Target = "", "other_slot" // 2026-07-28: the client's request state binds the deadline
		m := mustCreate(t, s, modern)
		if _, err := s.MoreTime(ctx, m.ID, time.Minute, state.ActorUser); !errors.Is(err, ErrConflict) {
			t.Errorf("more time for a 2026-07-28 flow: %v, want ErrConflict", err)
		}
		if got := mustGet(t, s, m.ID); !got.ExpiresAt.Equal(m.ExpiresAt) || len(mustHistory(t, s, m.ID)) != 1 {
			t.Errorf("a refused extension changed the flow: %+v", got)
		}
		ended := mustCreate(t, s, newElicitation(state.User{Issuer: "https://id.example", Subject: "other"}))
		mustApply(t, s, ended.ID, ClientDecline, state.ActorClient)
		if _, err := s.MoreTime(ctx, ended.ID, time.Minute, state.ActorUser); !errors.Is(err, ErrConflict) {
			t.Errorf("more time for an ended flow: %v, want ErrConflict", err)
		}
	})
}
