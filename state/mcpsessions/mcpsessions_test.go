package mcpsessions

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/urlflow/urlflow/internal/redistest"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/flow"
)

var quiet = slog.New(slog.DiscardHandler)

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// runHub runs h until the test ends, once it has subscribed.
func runHub(t *testing.T, h *flow.Hub) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); h.Run(ctx) }()
	t.Cleanup(func() { stop(); <-done })
	select {
	case <-h.Connected():
	case <-time.After(10 * time.Second):
		t.Fatal("the hub did not subscribe")
	}
}

func TestAUsersSessionsAreCountedUntilTheyEndOrExpire(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		clk := newClock()
		s := New(b.Client, clk.Now)
		alice, bob := state.User{Issuer: "https://idp.test", Subject: "alice"}, state.User{Issuer: "https://idp.test", Subject: "bob"}
		start := func(user state.User, id string) {
			t.Helper()
			a, live, err := s.Admit(ctx, user, 2, 30*time.Second)
			if err != nil || a == nil {
				t.Fatalf("admit %s: %v, %v (live %q)", id, a, err, live)
			}
			if err := s.Register(ctx, Session{ID: id, User: user, Replica: "r1", LastUsedAt: clk.Now()}, 90*time.Second); err != nil {
				t.Fatal(err)
			}
			if err := s.Release(ctx, a); err != nil {
				t.Fatal(err)
			}
		}
		start(alice, "s1")
		start(alice, "s2")
		start(bob, "s3") // another user's sessions count apart

		a, live, err := s.Admit(ctx, alice, 2, 30*time.Second)
		slices.Sort(live)
		if err != nil || a != nil || !slices.Equal(live, []string{"s1", "s2"}) {
			t.Fatalf("a third session of alice: %v, %q, %v; want refused with s1 and s2 live", a, live, err)
		}

		// An admission in progress counts, so that two concurrent starts cannot both pass.
		if err := s.Forget(ctx, alice, "s2"); err != nil {
			t.Fatal(err)
		}
		held, _, err := s.Admit(ctx, alice, 2, 30*time.Second)
		if err != nil || held == nil {
			t.Fatalf("admit after s2 ended: %v, %v", held, err)
		}
		if a, live, _ := s.Admit(ctx, alice, 2, 30*time.Second); a != nil || !slices.Equal(live, []string{"s1"}) {
			t.Fatalf("a concurrent admission: %v, live %q; want refused, listing only the session", a, live)
		}
		// An admission that is never released stops counting after its hold.
		clk.Advance(31 * time.Second)
		if a, _, _ := s.Admit(ctx, alice, 2, 30*time.Second); a == nil {
			t.Fatal("a lapsed admission still counts")
		}
		// A registration that its replica stopped refreshing stops counting after its TTL.
		clk.Advance(90 * time.Second)
		if err := s.Register(ctx, Session{ID: "s4", User: alice, Replica: "r2"}, 90*time.Second); err != nil {
			t.Fatal(err)
		}
		if a, live, _ := s.Admit(ctx, alice, 2, 30*time.Second); a == nil {
			t.Fatalf("refused with %q live; s1 expired and only s4 lives", live)
		}
	})
}

func TestEvictingASessionMakesRoomOnceAndAsksItsReplicaToCloseIt(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		s := New(b.Client, nil)
		flows := flow.NewStore(b.Client, flow.StoreOptions{Logger: quiet})
		alice := state.User{Issuer: "https://idp.test", Subject: "alice"}
		notices := make(chan flow.Notice, 4)
		hub := flow.NewHub(b.Client, quiet)
		hub.OnNotice(func(_ context.Context, n flow.Notice) { notices <- n })
		runHub(t, hub)
		used := time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC)
		for _, id := range []string{"s1", "s2"} {
			if err := s.Register(ctx, Session{ID: id, User: alice, Replica: "r1", LastUsedAt: used, Busy: id == "s2"}, time.Minute); err != nil {
				t.Fatal(err)
			}
		}
		e, err := flows.Create(ctx, flow.NewElicitation{User: alice, Kind: state.KindSecret, Target: "demo", Purpose: "a test", TTL: time.Minute, SessionID: "s1"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := flows.Apply(ctx, e.ID, flow.ClientDecline, state.ActorClient, "a test"); err != nil {
			t.Fatal(err)
		}

		standings, err := s.Standings(ctx, alice, []string{"s1", "s2", "gone"})
		if err != nil {
			t.Fatal(err)
		}
		got, _ := json.Marshal(standings)
		if len(standings) != 2 || standings[0].ID != "s1" || standings[0].Undelivered != 1 || !standings[0].LastUsedAt.Equal(used) ||
			standings[1].ID != "s2" || !standings[1].Busy || standings[1].Undelivered != 0 {
			t.Fatalf("standings = %s; want s1 owed one notification and s2 busy, and nothing for a session that ended", got)
		}

		if ok, err := s.Evict(ctx, alice, "s2"); !ok || err != nil {
			t.Fatalf("evict s2 = %v, %v", ok, err)
		}
		if ok, err := s.Evict(ctx, alice, "s2"); ok || err != nil {
			t.Fatalf("evict s2 again = %v, %v; want false: it no longer counts", ok, err)
		}
		if a, live, _ := s.Admit(ctx, alice, 2, time.Minute); a == nil {
			t.Fatalf("no room after the eviction: %q live", live)
		}
		deadline := time.After(5 * time.Second)
		for {
			select {
			case n := <-notices:
				if n.What != flow.NoticeCloseSession {
					continue
				}
				if n.SessionID != "s2" || n.UserKey != alice.Key() {
					t.Fatalf("close notice = %+v", n)
				}
				return
			case <-deadline:
				t.Fatal("no notice asked the holding replica to close s2")
			}
		}
	})
}

// TestASessionEndsWithItsRegistrationOrItsReplicasHeartbeat: Ended counts a session as
// ended when its registration is gone, or when the replica that holds it stopped beating,
// which happens long before the registration lapses.
func TestASessionEndsWithItsRegistrationOrItsReplicasHeartbeat(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		s := New(b.Client, nil)
		alice := state.User{Issuer: "https://idp.test", Subject: "alice"}
		for id, replica := range map[string]string{"on-a": "a", "on-b": "b"} {
			if err := s.Register(ctx, Session{ID: id, User: alice, Replica: replica}, time.Minute); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Beat(ctx, "a", time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := s.Beat(ctx, "b", 100*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		ended, err := s.Ended(ctx, "on-a", "on-b", "never")
		if err != nil {
			t.Fatal(err)
		}
		if len(ended) != 1 || ended["never"] != EndedUnregistered {
			t.Fatalf("with both replicas beating: %v", ended)
		}
		// b's heartbeat lapses in Redis (the embedded one's clock ticks every 250 ms).
		for deadline := time.Now().Add(5 * time.Second); len(ended) < 1 || ended["on-b"] == ""; {
			if time.Now().After(deadline) {
				t.Fatalf("b's sessions still live 5 s after its heartbeat's 100 ms: %v", ended)
			}
			time.Sleep(50 * time.Millisecond) // polling: Redis tells no one of an expiry
			if ended, err = s.Ended(ctx, "on-a", "on-b"); err != nil {
				t.Fatal(err)
			}
		}
		if len(ended) != 1 || ended["on-b"] != endedReplicaSilent+"b" {
			t.Fatalf("after b stopped beating: %v", ended)
		}
	})
}
