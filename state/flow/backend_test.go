package flow

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/urlflow/urlflow/internal/redistest"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/credentials"
	"github.com/urlflow/urlflow/state/vault"
)

// forEachBackend runs test on every kind of Redis (redistest.ForEachBackend).
func forEachBackend(t *testing.T, test func(t *testing.T, b *redistest.Backend)) {
	t.Helper()
	redistest.ForEachBackend(t, test)
}

var quiet = slog.New(slog.DiscardHandler)

// credentialsOn returns the credential store on b, where a completing flow stores its
// credential.
func credentialsOn(b *redistest.Backend) *credentials.Store {
	return credentials.NewStore(b.Client, credentials.Options{Logger: quiet})
}

// testVault returns a vault with a fresh key ring.
func testVault(t testing.TB) *vault.Vault {
	t.Helper()
	ring, err := vault.ParseKeyRing(vault.GenerateKeyRing("test"))
	if err != nil {
		t.Fatal(err)
	}
	return vault.NewVault(ring)
}

// newStore returns a Store on b. A nil clk means the real clock.
func newStore(b *redistest.Backend, clk *clock) *Store {
	opts := StoreOptions{Logger: quiet}
	if clk != nil {
		opts.Now = clk.Now
	}
	return NewStore(b.Client, opts)
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

// runHub runs h until the returned stop is called, which returns once Run has returned;
// runHub returns once h has subscribed and woken the waiters of that subscription.
func runHub(t *testing.T, h *Hub) (stop func()) {
	t.Helper()
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
	receive(t, subscribed, "first subscription of the hub")
	return func() {
		cancel()
		<-done
	}
}

// startHub runs a Hub on b until the test ends and returns it once it has subscribed and
// woken the waiters of that subscription, so that a waiter registered afterwards wakes
// only for a notice or a later subscription. Register listeners in setup, which runs
// before the hub starts.
func startHub(t *testing.T, b *redistest.Backend, setup func(h *Hub)) *Hub {
	t.Helper()
	h := NewHub(b.Client, quiet)
	if setup != nil {
		setup(h)
	}
	t.Cleanup(runHub(t, h))
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
func userFor(t *testing.T) state.User {
	return state.User{Issuer: "https://id.example", Subject: t.Name()}
}

// Fixtures shared by the store tests.
var (
	alice = state.User{Issuer: "https://id.example", Subject: "alice"}
	bob   = state.User{Issuer: "https://id.example", Subject: "bob"}
)

const testTTL = 10 * time.Minute

func newElicitation(user state.User) NewElicitation {
	return NewElicitation{
		User: user, Kind: state.KindSecret, Target: "demo_api_key", Purpose: "Enter your demo API key",
		Client: state.ClientInfo{Name: "inspector", Version: "1.0"}, SessionID: "session-1",
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
	e, err := s.Read(t.Context(), id)
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

func mustApply(t testing.TB, s *Store, id string, ev Event, actor state.Actor, opts ...ApplyOption) Change {
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
var eventActor = map[Event]state.Actor{
	ClientAccept: state.ActorClient, ClientDecline: state.ActorClient, ClientCancel: state.ActorClient,
	NoAnswer: state.ActorSystem, BrowserOpen: state.ActorUser, Verified: state.ActorSystem, VerifyFailed: state.ActorSystem,
	PageDecline: state.ActorUser, CancelRequested: state.ActorOperator, DeadlinePassed: state.ActorSystem,
	Created: state.ActorClient, OtherUserOpened: state.ActorOther, PageContinue: state.ActorUser,
	InputRejected: state.ActorUser, LatePost: state.ActorUser, Notified: state.ActorSystem,
	NotifyRequeued: state.ActorOperator, RetriedAs: state.ActorUser,
}
