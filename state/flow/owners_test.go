package flow

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/internal/redistest"
	"github.com/urlflow/urlflow/state"
)

// reads is a go-redis hook that counts the reading commands (GET, MGET) whose first key
// matches.
type reads struct {
	matches func(key string) bool
	n       atomic.Int64
}

// indexReads counts the reads of the eid:ID index.
func indexReads() *reads {
	return &reads{matches: func(k string) bool { return strings.HasPrefix(k, state.KeyPrefix+"eid:") }}
}

// recordReads counts the reads of elicitation records.
func recordReads() *reads {
	return &reads{matches: func(k string) bool { return strings.Contains(k, "}:e:") }}
}

func (h *reads) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *reads) count(cmds ...redis.Cmder) {
	for _, c := range cmds {
		if args := c.Args(); len(args) > 1 && (c.Name() == "get" || c.Name() == "mget") {
			if k, ok := args[1].(string); ok && h.matches(k) {
				h.n.Add(1)
			}
		}
	}
}

func (h *reads) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.count(cmd); return next(ctx, cmd) }
}

func (h *reads) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.count(cmds...); return next(ctx, cmds) }
}

func TestNoReplicaReadsAnIndexForAnIDThatCarriesItsUser(t *testing.T) {
	rs := redistest.Start(t)
	ctx := t.Context()
	creator, creatorReads := hookedStore(t, rs.Addr)
	e, err := creator.Create(ctx, NewElicitation{User: alice, Kind: state.KindSecret, Target: "demo", Purpose: "a test", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	other, otherReads := hookedStore(t, rs.Addr)
	useElicitation(t, creator, e.ID)
	useElicitation(t, other, e.ID)
	if n := creatorReads.n.Load() + otherReads.n.Load(); n != 0 {
		t.Errorf("the replicas read the index %d times, want never", n)
	}
	if n := rs.Client(t).Exists(ctx, indexKey(e.ID)).Val(); n != 0 {
		t.Error("an index entry was written for an ID that carries its user")
	}
	// An ID of the right shape that no key of the store opens is not looked up.
	forged := []byte(e.ID)
	if forged[30] = 'A'; e.ID[30] == 'A' {
		forged[30] = 'B'
	}
	if _, err := other.Read(ctx, string(forged)); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("a forged ID: %v, want not found", err)
	}
	// Another deployment's store (other keys) cannot open it either.
	foreign := NewStore(rs.Client(t), StoreOptions{Logger: quiet, IDKeys: [][]byte{make([]byte, 32)}})
	if _, err := foreign.Read(ctx, e.ID); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("another key ring's store read the elicitation: %v", err)
	}
	// After a rotation, the old key (second in the ring) still opens the IDs made with it.
	rotated := NewStore(rs.Client(t), StoreOptions{Logger: quiet, IDKeys: [][]byte{make([]byte, 32), processIDKey()}})
	if got, err := rotated.Read(ctx, e.ID); err != nil || got.ID != e.ID {
		t.Errorf("after a rotation: %v, %v; want the elicitation", got, err)
	}
}

func TestTwoIDsOfOneUserShareNothing(t *testing.T) {
	s := NewStore(redistest.StartEmbedded(t).Client, StoreOptions{Logger: quiet})
	a, err := s.ids.newID(alice.Key())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := s.ids.newID(alice.Key())
	if !ValidID(a) || len(a) != 64 {
		t.Fatalf("new ID %q: want 64 characters of base32", a)
	}
	same := 0
	for i := range a {
		if a[i] == b[i] {
			same++
		}
	}
	if same > 16 { // 64 characters of 32 each: about 2 agree by chance
		t.Errorf("two IDs of one user agree in %d of 64 places:\n%s\n%s", same, a, b)
	}
	for _, id := range []string{a, b} {
		if uk, ok := s.ids.userKey(id); !ok || uk != alice.Key() {
			t.Errorf("ID %s opens to %q, %v; want alice's key", id, uk, ok)
		}
	}
}

// A record written before IDs carried their user (a 26-character ID and the eid:ID index)
// is still found, changed and read, by any replica, which reads the index once per ID.
func TestALegacyIDIsFoundThroughItsIndexOncePerReplica(t *testing.T) {
	rs := redistest.Start(t)
	ctx := t.Context()
	creator, _ := hookedStore(t, rs.Addr)
	e, err := creator.Create(ctx, NewElicitation{User: alice, Kind: state.KindSecret, Target: "demo", Purpose: "a test", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	legacy := writeLegacyCopy(t, rs.Client(t), e)

	other, otherReads := hookedStore(t, rs.Addr)
	useElicitation(t, other, legacy)
	useElicitation(t, other, legacy)
	if n := otherReads.n.Load(); n != 1 {
		t.Errorf("a replica read the index %d times for one legacy ID, want once", n)
	}
	got, err := other.Read(ctx, legacy)
	if err != nil || got.ID != legacy || got.State != InProgress || got.User != alice {
		t.Fatalf("the legacy elicitation reads %+v, %v; want alice's, in progress", got, err)
	}
	// A legacy ID that does not exist is looked up every time: nothing is remembered for it.
	for range 2 {
		if _, err := other.Read(ctx, "AAAAAAAAAAAAAAAAAAAAAAAAAA"); !errors.Is(err, state.ErrNotFound) {
			t.Fatalf("an unknown legacy ID: %v, want not found", err)
		}
	}
	if n := otherReads.n.Load(); n != 3 {
		t.Errorf("after two reads of an unknown legacy ID the index was read %d times, want 3", n)
	}
}

// hookedStore returns a store on the redis-server at addr that counts its index reads.
func hookedStore(t *testing.T, addr string) (*Store, *reads) {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { rdb.Close() })
	h := indexReads()
	rdb.AddHook(h)
	return NewStore(rdb, StoreOptions{Logger: quiet}), h
}

// useElicitation reads elicitation id three times, opens it in a browser and reads its history.
func useElicitation(t *testing.T, s *Store, id string) {
	t.Helper()
	ctx := t.Context()
	for range 3 {
		if _, err := s.Read(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Apply(ctx, id, BrowserOpen, state.ActorUser, "a test"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.History(ctx, id); err != nil {
		t.Fatal(err)
	}
}

// writeLegacyCopy writes e again as the layout before this one did, under a 26-character
// ID with its eid:ID index, and returns that ID.
func writeLegacyCopy(t *testing.T, rdb redis.UniversalClient, e *Elicitation) string {
	t.Helper()
	ctx := t.Context()
	legacy := "LEGACYLEGACYLEGACYLEGACY22"
	old := *e
	old.ID = legacy
	doc, err := json.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	uk := e.User.Key()
	history, err := rdb.LRange(ctx, historyKey(uk, e.ID), 0, -1).Result()
	if err != nil || len(history) == 0 {
		t.Fatalf("history of %s: %v, %v", e.ID, history, err)
	}
	if err := rdb.Set(ctx, elicitationKey(uk, legacy), doc, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.RPush(ctx, historyKey(uk, legacy), history).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, indexKey(legacy), uk, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	return legacy
}

func TestAStepStartedFromARecordThatChangedSinceIsAppliedToTheNewOne(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		here, there := newStore(b, nil), newStore(b, nil) // two replicas
		e, err := here.Create(ctx, NewElicitation{User: alice, Kind: state.KindSecret, Target: "demo", Purpose: "a test", TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := here.Read(ctx, e.ID); err != nil { // here has seen it pending
			t.Fatal(err)
		}
		if _, err := there.Apply(ctx, e.ID, BrowserOpen, state.ActorUser, "opened elsewhere"); err != nil {
			t.Fatal(err)
		}
		// here starts from what it saw; its script finds the record changed and answers it
		// as it reads now, and the step starts over from that, without reading it.
		recordsRead := recordReads()
		b.Client.AddHook(recordsRead)
		c, err := here.Apply(ctx, e.ID, PageDecline, state.ActorUser, "declined")
		if err != nil || c.From != InProgress || c.To != Declined {
			t.Fatalf("Apply = %+v, %v; want in_progress → declined", c, err)
		}
		if n := recordsRead.n.Load(); n != 0 {
			t.Errorf("the step read the record %d times; the script's answer has it", n)
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

func TestReadAlongReadsTheRecordAndAnotherKeyTogether(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		s := newStore(b, nil)
		e := mustCreate(t, s, newElicitation(alice))
		same := state.UserTag(alice.Key()) + "bs:test" // in alice's slot: one MGET
		other := state.KeyPrefix + "bs:test"           // elsewhere: two GETs in one round trip
		for _, k := range []string{same, other} {
			val := []byte("left over")
			if _, err := s.Read(ctx, e.ID, Along(k, &val)); err != nil || val != nil {
				t.Fatalf("Read along %s, missing = %q, %v; want nil", k, val, err)
			}
			if err := b.Client.Set(ctx, k, "value of "+k, time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
			got, err := s.Read(ctx, e.ID, Along(k, &val))
			if err != nil || got.ID != e.ID || string(val) != "value of "+k {
				t.Fatalf("Read along %s = %v, %q, %v", k, got, val, err)
			}
			// A copy that would do for the record does not keep the other key from being read.
			val = nil
			if got, err := s.Read(ctx, e.ID, IfCopy(func(*Elicitation) bool { return true }), Along(k, &val)); err != nil || got.ID != e.ID || string(val) != "value of "+k {
				t.Fatalf("Read with a copy along %s = %v, %q, %v; want the record and the value", k, got, val, err)
			}
			// An ID that does not exist still gives the other value.
			missing := NewStore(b.Client, StoreOptions{Logger: quiet})
			id, _ := missing.ids.newID(alice.Key())
			val = nil
			if got, err := s.Read(ctx, id, Along(k, &val)); !errors.Is(err, state.ErrNotFound) || got != nil || string(val) != "value of "+k {
				t.Fatalf("Read of an unknown ID along %s = %v, %q, %v; want not found and the value", k, got, val, err)
			}
		}
	})
}

func TestIfStillWritesOnlyWhileTheKeyHoldsWhatTheCallerRead(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		s := newStore(b, nil)
		e := mustCreate(t, s, newElicitation(alice))
		session := state.UserTag(alice.Key()) + "bs:test"
		if err := b.Client.Set(ctx, session, "signed in", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		c, err := s.Apply(ctx, e.ID, BrowserOpen, state.ActorUser, "a test", IfStill(session, []byte("signed in")))
		if err != nil || c.To != InProgress {
			t.Fatalf("Apply while the session holds what was read = %+v, %v; want in_progress", c, err)
		}
		b.Client.Del(ctx, session) // signed out meanwhile
		before := mustHistory(t, s, e.ID)
		if _, err := s.Apply(ctx, e.ID, PageDecline, state.ActorUser, "a test", IfStill(session, []byte("signed in"))); !errors.Is(err, ErrStale) {
			t.Fatalf("Apply after the session went = %v, want ErrStale", err)
		}
		if got := mustGet(t, s, e.ID); got.State != InProgress {
			t.Errorf("a stale step changed the state to %s", got.State)
		}
		if after := mustHistory(t, s, e.ID); len(after) != len(before) {
			t.Errorf("a stale step wrote history: %+v", after[len(before):])
		}
	})
}
