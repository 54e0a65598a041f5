package state

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/internal/redistest"
)

// backend is the Redis one test runs on: the embedded miniredis or a real redis-server.
type backend struct {
	rdb redis.UniversalClient
	// server is the real redis-server, nil for the embedded one.
	server *redistest.Server
}

// forEachBackend runs test against each kind of Redis urlflow runs on, each fresh: the
// embedded miniredis, a real redis-server, a real Redis Cluster of three nodes, and a
// primary found through a real Sentinel, as the subtests "embedded", "redis-server",
// "redis-cluster" and "redis-sentinel". The state layer must behave the same on all.
//
// Tests that call it run in parallel with each other: each has its own Redis.
func forEachBackend(t *testing.T, test func(t *testing.T, b *backend)) {
	t.Helper()
	t.Parallel()
	t.Run("embedded", func(t *testing.T) {
		t.Parallel()
		e, err := StartEmbedded()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(e.Close)
		test(t, connect(t, e.URL(), nil))
	})
	t.Run("redis-server", func(t *testing.T) {
		t.Parallel()
		srv := redistest.Start(t)
		test(t, connect(t, srv.URL(), srv))
	})
	t.Run("redis-cluster", func(t *testing.T) {
		t.Parallel()
		test(t, connectTo(t, redistest.StartCluster(t, 3).URL(), Cluster, nil))
	})
	t.Run("redis-sentinel", func(t *testing.T) {
		t.Parallel()
		test(t, connectTo(t, redistest.StartSentinel(t).URL(), Sentinel, nil))
	})
}

func connect(t testing.TB, url string, srv *redistest.Server) *backend {
	t.Helper()
	return connectTo(t, url, Standalone, srv)
}

func connectTo(t testing.TB, url string, topology Topology, srv *redistest.Server) *backend {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	rdb, err := Connect(ctx, url, topology)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	return &backend{rdb: rdb, server: srv}
}

var quiet = slog.New(slog.DiscardHandler)

// newStore returns a Store on b. A nil clk means the real clock.
func newStore(b *backend, clk *clock) *Store {
	opts := StoreOptions{Logger: quiet}
	if clk != nil {
		opts.Now = clk.Now
	}
	return NewStore(b.rdb, opts)
}

// clock is a settable clock for stores whose deadlines a test moves past on purpose.
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

// startHub runs a Hub on b until the test ends and returns it once it has subscribed and
// woken the waiters of that subscription, so that a waiter registered afterwards wakes
// only for a notice or a later subscription. Register listeners in setup, which runs
// before the hub starts.
func startHub(t *testing.T, b *backend, setup func(h *Hub)) *Hub {
	t.Helper()
	h := NewHub(b.rdb, quiet)
	if setup != nil {
		setup(h)
	}
	// OnConnect functions run after the waiters are woken.
	subscribed := make(chan struct{}, 1)
	h.OnConnect(func(context.Context) {
		select {
		case subscribed <- struct{}{}:
		default:
		}
	})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	receive(t, subscribed, "first subscription of the hub")
	receive(t, h.Connected(), "Connected after the first subscription")
	return h
}

// noticeListener registers an OnNotice listener on h that forwards every notice to the
// returned channel, for hubs that must not miss a notice published before a Wait.
func noticeListener(h *Hub) <-chan Notice {
	ch := make(chan Notice, 64)
	h.OnNotice(func(ctx context.Context, n Notice) {
		select {
		case ch <- n:
		case <-ctx.Done():
		}
	})
	return ch
}

// runSweeper runs s's sweeper every interval until the test ends.
func runSweeper(t *testing.T, s *Store, interval time.Duration) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.RunSweeper(ctx, interval)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// waitTimeout bounds every wait for an event; events in these tests take milliseconds.
const waitTimeout = 10 * time.Second

// receive returns the next value from ch, failing the test if none arrives in time.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("waited %v for %s", waitTimeout, what)
		panic("unreachable")
	}
}

// receiveNotice returns the first notice from ch of kind what about elicitation id in
// state want, skipping other wake-ups.
func receiveNotice(t *testing.T, ch <-chan Notice, id string, what NoticeKind, want State) Notice {
	t.Helper()
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	for {
		select {
		case n := <-ch:
			if n.ID == id && n.What == what && n.State == want {
				return n
			}
		case <-timer.C:
			t.Fatalf("waited %v for a %s notice that %s is %s", waitTimeout, what, id, want)
		}
	}
}

// userFor returns a user of test t's own, for parallel subtests that share one Redis.
func userFor(t *testing.T) User { return User{Issuer: "https://id.example", Subject: t.Name()} }

// Fixtures shared by the store tests.
var (
	alice = User{Issuer: "https://id.example", Subject: "alice"}
	bob   = User{Issuer: "https://id.example", Subject: "bob"}
)

const testTTL = 10 * time.Minute

func newElicitation(user User) NewElicitation {
	return NewElicitation{
		User: user, Kind: KindSecret, Target: "demo_api_key", Purpose: "Enter your demo API key",
		Client: ClientInfo{Name: "inspector", Version: "1.0"}, SessionID: "session-1",
		Replica: "replica-a", TTL: testTTL,
	}
}

func mustCreate(t testing.TB, s *Store, n NewElicitation) *Elicitation {
	t.Helper()
	e, err := s.Create(t.Context(), n)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	return e
}

func mustGet(t testing.TB, s *Store, id string) *Elicitation {
	t.Helper()
	e, err := s.Get(t.Context(), id)
	if err != nil {
		t.Fatalf("Get(%s): %v", id, err)
	}
	return e
}

func mustHistory(t *testing.T, s *Store, id string) []Entry {
	t.Helper()
	h, err := s.History(t.Context(), id)
	if err != nil {
		t.Fatalf("History(%s): %v", id, err)
	}
	return h
}

func mustApply(t testing.TB, s *Store, id string, ev Event, actor Actor, opts ...ApplyOption) Change {
	t.Helper()
	c, err := s.Apply(t.Context(), id, ev, actor, "test", opts...)
	if err != nil {
		t.Fatalf("Apply(%s): %v", ev, err)
	}
	return c
}

// pathTo is a valid sequence of events from pending to each state. DeadlinePassed in a
// path means: move the clock past the deadline, then apply it.
var pathTo = map[State][]Event{
	Pending:    nil,
	Consented:  {ClientAccept},
	InProgress: {BrowserOpen},
	Failed:     {BrowserOpen, VerifyFailed},
	Unknown:    {NoAnswer},
	Complete:   {BrowserOpen, Verified},
	Declined:   {ClientDecline},
	Cancelled:  {CancelRequested},
	Expired:    {DeadlinePassed},
}

// reach creates an elicitation from n and brings it to state want by a valid path. The
// store must run on clk.
func reach(t *testing.T, s *Store, clk *clock, n NewElicitation, want State) *Elicitation {
	t.Helper()
	e := mustCreate(t, s, n)
	for _, ev := range pathTo[want] {
		if ev == DeadlinePassed {
			clk.Advance(n.TTL)
		}
		mustApply(t, s, e.ID, ev, eventActor[ev])
	}
	e = mustGet(t, s, e.ID)
	if e.State != want {
		t.Fatalf("path %v reached %s, want %s", pathTo[want], e.State, want)
	}
	return e
}

// eventActor is who causes each event in these tests.
var eventActor = map[Event]Actor{
	ClientAccept: ActorClient, ClientDecline: ActorClient, ClientCancel: ActorClient,
	NoAnswer: ActorSystem, BrowserOpen: ActorUser, Verified: ActorSystem, VerifyFailed: ActorSystem,
	PageDecline: ActorUser, CancelRequested: ActorOperator, DeadlinePassed: ActorSystem,
	Created: ActorClient, OtherUserOpened: ActorOther, PageContinue: ActorUser,
	InputRejected: ActorUser, LatePost: ActorUser, Notified: ActorSystem,
	NotifyRequeued: ActorOperator, RetriedAs: ActorUser,
}
