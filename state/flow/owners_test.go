package flow

import (
	"context"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/internal/redistest"
	"github.com/urlflow/urlflow/state"
)

// indexReads is a go-redis hook that counts the commands that read the eid:ID index.
type indexReads struct{ n atomic.Int64 }

func (h *indexReads) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (h *indexReads) count(cmds ...redis.Cmder) {
	for _, c := range cmds {
		if args := c.Args(); len(args) > 1 && c.Name() == "get" {
			if k, ok := args[1].(string); ok && strings.HasPrefix(k, state.KeyPrefix+"eid:") {
				h.n.Add(1)
			}
		}
	}
}

func (h *indexReads) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.count(cmd); return next(ctx, cmd) }
}

func (h *indexReads) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.count(cmds...); return next(ctx, cmds) }
}

func TestAReplicaReadsTheIndexOncePerElicitation(t *testing.T) {
	rs := redistest.Start(t)
	hooked := func() (*Store, *indexReads) {
		rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
		t.Cleanup(func() { rdb.Close() })
		h := &indexReads{}
		rdb.AddHook(h)
		return NewStore(rdb, StoreOptions{Logger: quiet}), h
	}
	ctx := t.Context()
	creator, creatorReads := hooked()
	alice := state.User{Issuer: "https://idp.test", Subject: "alice"}
	e, err := creator.Create(ctx, NewElicitation{User: alice, Kind: state.KindSecret, Target: "demo", Purpose: "a test", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	use := func(s *Store) {
		t.Helper()
		for range 3 {
			if _, err := s.Get(ctx, e.ID); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Apply(ctx, e.ID, BrowserOpen, state.ActorUser, "a test"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.History(ctx, e.ID); err != nil {
			t.Fatal(err)
		}
	}
	use(creator)
	if n := creatorReads.n.Load(); n != 0 {
		t.Errorf("the replica that created the elicitation read its index %d times, want 0", n)
	}
	other, otherReads := hooked()
	use(other)
	use(other)
	if n := otherReads.n.Load(); n != 1 {
		t.Errorf("another replica read the index %d times, want once", n)
	}
	// An ID that does not exist is looked up every time: nothing is remembered for it.
	for range 2 {
		if _, err := other.Get(ctx, "AAAAAAAAAAAAAAAAAAAAAAAAAA"); err == nil {
			t.Fatal("an unknown ID was found")
		}
	}
	if n := otherReads.n.Load(); n != 3 {
		t.Errorf("after two reads of an unknown ID the index was read %d times, want 3", n)
	}
}

func TestAStepStartedFromARecordThatChangedSinceIsAppliedToTheNewOne(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		here, there := newStore(b, nil), newStore(b, nil) // two replicas
		alice := state.User{Issuer: "https://idp.test", Subject: "alice"}
		e, err := here.Create(ctx, NewElicitation{User: alice, Kind: state.KindSecret, Target: "demo", Purpose: "a test", TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := here.Get(ctx, e.ID); err != nil { // here has seen it pending
			t.Fatal(err)
		}
		if _, err := there.Apply(ctx, e.ID, BrowserOpen, state.ActorUser, "opened elsewhere"); err != nil {
			t.Fatal(err)
		}
		// here starts from what it saw; the step finds the record changed and starts over.
		c, err := here.Apply(ctx, e.ID, PageDecline, state.ActorUser, "declined")
		if err != nil || c.From != InProgress || c.To != Declined {
			t.Fatalf("Apply = %+v, %v; want in_progress → declined", c, err)
		}
		h, err := here.History(ctx, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		var events []Event
		for _, en := range h {
			events = append(events, en.Event)
		}
		if want := []Event{Created, BrowserOpen, PageDecline}; !slices.Equal(events, want) {
			t.Fatalf("history %v, want %v", events, want)
		}
	})
}
