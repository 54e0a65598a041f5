package flow

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/internal/redistest"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/credentials"
	"github.com/urlflow/urlflow/state/vault"
)

func TestCreateStoresAPendingElicitationWithItsFirstHistoryEntry(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		clk := newClock()
		s := newStore(b, clk)
		n := newElicitation(alice)
		n.Replace = true
		e := mustCreate(t, s, n)

		if !ValidID(e.ID) {
			t.Errorf("ID %q is not a valid elicitation ID", e.ID)
		}
		now := clk.Now()
		want := &Elicitation{
			ID: e.ID, User: alice, Kind: state.KindSecret, Target: "demo_api_key", State: Pending,
			Purpose: n.Purpose, Replace: true, Client: n.Client, SessionID: "session-1",
			Replica: "replica-a", CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(testTTL), Revision: 1,
		}
		if !reflect.DeepEqual(e, want) {
			t.Errorf("Create returned\n%+v\nwant\n%+v", e, want)
		}
		if got := mustGet(t, s, e.ID); !reflect.DeepEqual(got, want) {
			t.Errorf("Get returned\n%+v\nwant\n%+v", got, want)
		}
		wantHistory := []Entry{{At: now, Event: Created, Actor: state.ActorClient, To: Pending, Reason: n.Purpose}}
		if got := mustHistory(t, s, e.ID); !reflect.DeepEqual(got, wantHistory) {
			t.Errorf("History = %+v, want %+v", got, wantHistory)
		}
		if other := mustCreate(t, s, n); other.ID == e.ID {
			t.Errorf("two elicitations share the ID %s", e.ID)
		}
	})
}

func TestCreateRefusesAnElicitationWithoutUserOrDeadline(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		s := newStore(b, nil)
		for name, n := range map[string]NewElicitation{
			"no user":     {Kind: state.KindSecret, Target: "demo_api_key", TTL: testTTL},
			"no deadline": {User: alice, Kind: state.KindSecret, Target: "demo_api_key"},
			"past":        {User: alice, Kind: state.KindSecret, Target: "demo_api_key", TTL: -time.Minute},
		} {
			if e, err := s.Create(t.Context(), n); err == nil {
				t.Errorf("%s: Create returned %s, want an error", name, e.ID)
			}
		}
	})
}

func TestApplyFollowsTheStateTable(t *testing.T) {
	cells := tableCells(t)
	forEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		for _, c := range cells {
			t.Run(c.String(), func(t *testing.T) {
				t.Parallel()
				checkApply(t, b, c)
			})
		}
	})
}

func TestApplyRecordsHistoryOnlyEventsWithoutChange(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		for _, from := range States {
			for _, ev := range historyOnlyEvents {
				c := cell{from: from, event: ev, to: from}
				t.Run(c.String(), func(t *testing.T) {
					t.Parallel()
					checkApply(t, b, c)
				})
			}
		}
	})
}

// checkApply applies cell c through Store.Apply to a record brought to c.from by a valid
// path, and checks the outcome, the record and the history.
func checkApply(t *testing.T, b *redistest.Backend, c cell) {
	t.Helper()
	clk := newClock()
	s := newStore(b, clk)
	e := reach(t, s, clk, newElicitation(alice), c.from)
	before := mustGet(t, s, e.ID)
	history := mustHistory(t, s, e.ID)
	wantEntries := 1
	if c.event == DeadlinePassed {
		clk.Advance(testTTL)
		if c.from.Terminal() {
			// The deadline of a flow that has ended is no event: two readers racing to
			// expire one flow leave a single deadline entry.
			wantEntries = 0
		}
	}
	clk.Advance(time.Second)
	actor := eventActor[c.event]
	reason := "cell " + c.String()

	got, err := s.Apply(t.Context(), e.ID, c.event, actor, reason)
	switch {
	case c.impossible && !errors.Is(err, ErrImpossible):
		t.Fatalf("Apply error = %v, want ErrImpossible", err)
	case !c.impossible && err != nil:
		t.Fatalf("Apply error = %v", err)
	}
	if got.From != c.from || got.To != c.to || got.Changed() != (c.from != c.to) {
		t.Errorf("Apply = %s -> %s (changed %v), want %s -> %s", got.From, got.To, got.Changed(), c.from, c.to)
	}
	if got.Elicitation == nil || got.Elicitation.State != c.to {
		t.Errorf("Apply returned record %+v, want state %s", got.Elicitation, c.to)
	}

	after := mustGet(t, s, e.ID)
	if c.from == c.to {
		if !reflect.DeepEqual(after, before) {
			t.Errorf("record changed by an event that changes nothing:\nbefore %+v\nafter  %+v", before, after)
		}
	} else {
		if after.State != c.to {
			t.Errorf("stored state = %s, want %s", after.State, c.to)
		}
		if !after.UpdatedAt.Equal(clk.Now()) {
			t.Errorf("UpdatedAt = %v, want %v", after.UpdatedAt, clk.Now())
		}
		if queued := after.Delivery.QueuedAt; c.to.Terminal() != (queued != nil) {
			t.Errorf("Delivery.QueuedAt = %v after moving to %s", queued, c.to)
		}
	}

	entries := mustHistory(t, s, e.ID)
	if len(entries) != len(history)+wantEntries {
		t.Fatalf("history grew from %d to %d entries, want %d more: %+v", len(history), len(entries), wantEntries, entries)
	}
	if wantEntries == 0 {
		return
	}
	want := Entry{At: clk.Now(), Event: c.event, Actor: actor, From: c.from, To: c.to, Reason: reason}
	if last := entries[len(entries)-1]; !reflect.DeepEqual(last, want) {
		t.Errorf("last history entry = %+v, want %+v", last, want)
	}
}

func TestDeadlineEventBeforeTheDeadlineChangesNothing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		clk := newClock()
		s := newStore(b, clk)
		e := reach(t, s, clk, newElicitation(alice), InProgress)
		history := mustHistory(t, s, e.ID)
		clk.Advance(testTTL - time.Millisecond)

		c := mustApply(t, s, e.ID, DeadlinePassed, state.ActorSystem)
		if c.Changed() || c.To != InProgress {
			t.Errorf("Apply(deadline) before the deadline = %s -> %s, want no change", c.From, c.To)
		}
		if got := mustGet(t, s, e.ID); got.State != InProgress {
			t.Errorf("state = %s, want in_progress", got.State)
		}
		if got := mustHistory(t, s, e.ID); len(got) != len(history) {
			t.Errorf("history = %+v, want it unchanged", got)
		}
	})
}

// vaultCredential seals secret as user's demo_api_key for elicitation id.
func vaultCredential(t testing.TB, v *vault.Vault, user state.User, id, secret string, at time.Time) *credentials.Credential {
	t.Helper()
	sealed, err := v.Seal(user, "demo_api_key", state.NewSecret(secret))
	if err != nil {
		t.Fatal(err)
	}
	return &credentials.Credential{Name: "demo_api_key", Kind: state.KindSecret, ElicitationID: id, StoredAt: at, Sealed: sealed}
}

func TestRacingEventsExactlyOneWins(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		clk := newClock()
		s := newStore(b, clk)
		v := testVault(t)
		e := reach(t, s, clk, newElicitation(alice), InProgress)
		before := len(mustHistory(t, s, e.ID))

		const racers = 16
		type result struct {
			event  Event
			change Change
			err    error
		}
		results := make(chan result, racers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range racers {
			ev, opts := CancelRequested, []ApplyOption(nil)
			if i%2 == 0 {
				ev = Verified
				opts = append(opts, WithCredential(vaultCredential(t, v, alice, e.ID, fmt.Sprintf("secret-%d", i), clk.Now())))
			}
			wg.Go(func() {
				<-start
				c, err := s.Apply(t.Context(), e.ID, ev, eventActor[ev], fmt.Sprintf("racer %d", i), opts...)
				results <- result{ev, c, err}
			})
		}
		close(start)
		wg.Wait()
		close(results)

		var winners []result
		var final State
		for r := range results {
			if r.err != nil {
				t.Fatalf("Apply(%s): %v", r.event, r.err)
			}
			if r.change.Changed() {
				winners = append(winners, r)
			}
		}
		if len(winners) != 1 {
			t.Fatalf("%d Apply calls changed the state, want exactly 1: %+v", len(winners), winners)
		}
		w := winners[0]
		switch {
		case w.change.From != InProgress:
			t.Errorf("winner moved from %s, want in_progress", w.change.From)
		case w.event == Verified && w.change.To == Complete, w.event == CancelRequested && w.change.To == Cancelled:
			final = w.change.To
		default:
			t.Fatalf("winner %s moved to %s", w.event, w.change.To)
		}
		if got := mustGet(t, s, e.ID); got.State != final {
			t.Errorf("final state = %s, want the winner's %s", got.State, final)
		}

		entries := mustHistory(t, s, e.ID)[before:]
		if len(entries) != racers {
			t.Errorf("history has %d entries of the race, want one per event (%d)", len(entries), racers)
		}
		changing := 0
		for _, en := range entries {
			switch {
			case en.From != en.To:
				changing++
				if en.From != InProgress || en.To != final || en.Event != w.event {
					t.Errorf("state-changing entry %+v, want %s from in_progress to %s", en, w.event, final)
				}
			case en.From != final:
				t.Errorf("losing event %+v did not see the new state %s", en, final)
			}
		}
		if changing != 1 {
			t.Errorf("history has %d state-changing entries, want 1: %+v", changing, entries)
		}

		cred, err := credentialsOn(b).Get(t.Context(), alice, "demo_api_key")
		switch {
		case final == Cancelled && !errors.Is(err, state.ErrNotFound):
			t.Errorf("cancelled flow stored a credential: %+v, %v", cred, err)
		case final == Complete && err != nil:
			t.Errorf("completed flow stored no credential: %v", err)
		}
	})
}

func TestDeadlineExpiresAFlowNobodyReads(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		s := newStore(b, nil)
		var notices <-chan Notice
		startHub(t, b, func(h *Hub) { notices = noticeListener(h) })
		runSweeper(t, s, 20*time.Millisecond)

		n := newElicitation(alice)
		n.TTL = 300 * time.Millisecond
		e := mustCreate(t, s, n)

		notice := receiveNotice(t, notices, e.ID, NoticeState, Expired)
		if notice.UserKey != alice.Key() || notice.SessionID != "session-1" {
			t.Errorf("notice = %+v, want alice's key and session-1", notice)
		}
		// The stored record, not Get: Get would expire the flow itself.
		stored, err := s.load(t.Context(), alice.Key(), e.ID)
		if err != nil {
			t.Fatal(err)
		}
		if stored.State != Expired {
			t.Errorf("stored state = %s, want expired", stored.State)
		}
		entries := mustHistory(t, s, e.ID)
		last := entries[len(entries)-1]
		if last.Event != DeadlinePassed || last.Actor != state.ActorSystem || last.From != Pending || last.To != Expired {
			t.Errorf("last history entry = %+v, want deadline by system from pending to expired", last)
		}
		if last.At.Before(e.ExpiresAt) {
			t.Errorf("expired at %v, before the deadline %v", last.At, e.ExpiresAt)
		}
		// On a Cluster the index lives in a slot of its own: the replica's index queue sends
		// the step's tidy-up within a second of its script, which published the notice.
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			err := b.Client.ZScore(t.Context(), deadlinesKey, e.ID).Err()
			if errors.Is(err, redis.Nil) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("expired flow still in the deadline index (err %v)", err)
			}
		}
	})
}

func TestGetExpiresAnOverdueFlowWithoutTheSweeper(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		for _, from := range []State{Pending, Consented, InProgress, Failed, Unknown} {
			t.Run(string(from), func(t *testing.T) {
				t.Parallel()
				clk := newClock()
				s := newStore(b, clk)
				e := reach(t, s, clk, newElicitation(alice), from)
				clk.Advance(testTTL)

				got := mustGet(t, s, e.ID)
				if got.State != Expired {
					t.Fatalf("Get after the deadline = %s, want expired", got.State)
				}
				entries := mustHistory(t, s, e.ID)
				want := Entry{At: clk.Now(), Event: DeadlinePassed, Actor: state.ActorSystem, From: from, To: Expired, Reason: "deadline passed"}
				if last := entries[len(entries)-1]; !reflect.DeepEqual(last, want) {
					t.Errorf("last history entry = %+v, want %+v", last, want)
				}
				mustGet(t, s, e.ID)
				if again := mustHistory(t, s, e.ID); len(again) != len(entries) {
					t.Errorf("a second Get added history: %+v", again[len(entries):])
				}
			})
		}
	})
}

func TestEventOnOverdueFlowRecordsTheDeadlineFirst(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		for _, ev := range []Event{Verified, VerifyFailed, PageDecline, CancelRequested, BrowserOpen, OtherUserOpened} {
			t.Run(string(ev), func(t *testing.T) {
				t.Parallel()
				clk := newClock()
				s := newStore(b, clk)
				v := testVault(t)
				user := userFor(t)
				e := reach(t, s, clk, newElicitation(user), InProgress)
				clk.Advance(testTTL + time.Second)

				c, err := s.Apply(t.Context(), e.ID, ev, eventActor[ev], "late", WithCredential(vaultCredential(t, v, user, e.ID, "s3cret", clk.Now())))
				if err != nil {
					t.Fatalf("Apply: %v", err)
				}
				if c.From != InProgress || c.To != Expired {
					t.Errorf("Apply = %s -> %s, want in_progress -> expired", c.From, c.To)
				}
				entries := mustHistory(t, s, e.ID)
				want := []Entry{
					{At: clk.Now(), Event: DeadlinePassed, Actor: state.ActorSystem, From: InProgress, To: Expired, Reason: "deadline passed"},
					{At: clk.Now(), Event: ev, Actor: eventActor[ev], From: Expired, To: Expired, Reason: "late"},
				}
				if got := entries[len(entries)-2:]; !reflect.DeepEqual(got, want) {
					t.Errorf("last history entries =\n%+v\nwant\n%+v", got, want)
				}
				if got := mustGet(t, s, e.ID); got.State != Expired {
					t.Errorf("state = %s, want expired", got.State)
				}
				if _, err := credentialsOn(b).Get(t.Context(), user, "demo_api_key"); !errors.Is(err, state.ErrNotFound) {
					t.Errorf("credential of an expired flow was stored (err %v)", err)
				}
			})
		}
	})
}

func TestCredentialIsStoredOnlyWhenTheEventCompletesTheFlow(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		for _, tt := range []struct {
			from      State
			wantState State
			wantErr   error
			stored    bool
		}{
			{from: InProgress, wantState: Complete, stored: true},
			{from: Complete, wantState: Complete},   // a replayed callback
			{from: Cancelled, wantState: Cancelled}, // ended meanwhile
			{from: Declined, wantState: Declined},
			{from: Expired, wantState: Expired},
			{from: Pending, wantState: Pending, wantErr: ErrImpossible},
			{from: Failed, wantState: Failed, wantErr: ErrImpossible},
		} {
			t.Run(string(tt.from), func(t *testing.T) {
				t.Parallel()
				clk := newClock()
				s := newStore(b, clk)
				v := testVault(t)
				user := userFor(t)
				e := reach(t, s, clk, newElicitation(user), tt.from)
				cred := vaultCredential(t, v, user, e.ID, "s3cret-value", clk.Now())

				c, err := s.Apply(t.Context(), e.ID, Verified, state.ActorSystem, "verified", WithCredential(cred))
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Apply error = %v, want %v", err, tt.wantErr)
				}
				if c.To != tt.wantState {
					t.Errorf("Apply moved to %s, want %s", c.To, tt.wantState)
				}

				got, err := credentialsOn(b).Get(t.Context(), user, "demo_api_key")
				names, lerr := credentialsOn(b).Names(t.Context(), user)
				if lerr != nil {
					t.Fatal(lerr)
				}
				if !tt.stored {
					if !errors.Is(err, state.ErrNotFound) || len(names) != 0 {
						t.Errorf("credential stored although the event did not complete the flow: %+v, %v, names %v", got, err, names)
					}
					return
				}
				if err != nil {
					t.Fatalf("Credential: %v", err)
				}
				if !reflect.DeepEqual(got, cred) {
					t.Errorf("Credential = %+v, want %+v", got, cred)
				}
				secret, err := v.Open(user, got.Name, got.Sealed)
				if err != nil || secret.Reveal() != "s3cret-value" {
					t.Errorf("stored credential opens to %q, %v", secret.Reveal(), err)
				}
				if !slices.Equal(names, []string{"demo_api_key"}) {
					t.Errorf("Credentials = %v, want [demo_api_key]", names)
				}
				if _, err := credentialsOn(b).Get(t.Context(), bob, "demo_api_key"); !errors.Is(err, state.ErrNotFound) {
					t.Errorf("bob can read another user's credential (err %v)", err)
				}
			})
		}
	})
}

func TestRetryStartsANewAttemptOnlyAfterAnEndWithoutSuccess(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		for _, from := range States {
			retriable := from == Declined || from == Cancelled || from == Expired
			t.Run(string(from), func(t *testing.T) {
				t.Parallel()
				clk := newClock()
				s := newStore(b, clk)
				old := reach(t, s, clk, newElicitation(userFor(t)), from)
				clk.Advance(time.Second)

				next, err := s.Retry(t.Context(), old.ID, Act{Actor: state.ActorUser}, time.Hour)
				if !retriable {
					if !errors.Is(err, ErrConflict) {
						t.Fatalf("Retry from %s error = %v, want ErrConflict", from, err)
					}
					if got := mustGet(t, s, old.ID); !reflect.DeepEqual(got, old) {
						t.Errorf("refused retry changed the record: %+v", got)
					}
					return
				}
				if err != nil {
					t.Fatalf("Retry from %s: %v", from, err)
				}
				checkRetry(t, s, clk, old, next)

				if again, err := s.Retry(t.Context(), old.ID, Act{Actor: state.ActorUser}, time.Hour); !errors.Is(err, ErrConflict) {
					t.Errorf("second Retry = %+v, %v; want ErrConflict", again, err)
				}
			})
		}
	})
}

// checkRetry checks that next is a fresh attempt of old, linked both ways.
func checkRetry(t *testing.T, s *Store, clk *clock, old, next *Elicitation) {
	t.Helper()
	now := clk.Now()
	want := &Elicitation{
		ID: next.ID, User: old.User, Kind: old.Kind, Target: old.Target, State: Pending,
		Purpose: old.Purpose, Client: old.Client, SessionID: old.SessionID, Replica: old.Replica,
		CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(time.Hour), RetryOf: old.ID, Revision: 1,
	}
	if got := mustGet(t, s, next.ID); !reflect.DeepEqual(got, want) {
		t.Errorf("new attempt =\n%+v\nwant\n%+v", got, want)
	}
	if next.ID == old.ID {
		t.Fatalf("new attempt reuses the ID %s", old.ID)
	}
	ended := mustGet(t, s, old.ID)
	if ended.RetriedBy != next.ID || ended.State != old.State {
		t.Errorf("old attempt: state %s, retriedBy %q; want %s, %q", ended.State, ended.RetriedBy, old.State, next.ID)
	}
	oldHistory := mustHistory(t, s, old.ID)
	if last := oldHistory[len(oldHistory)-1]; last.Event != RetriedAs || last.Actor != state.ActorUser ||
		last.From != old.State || last.To != old.State || !strings.Contains(last.Reason, next.ID) {
		t.Errorf("old attempt's last history entry = %+v, want retried by user naming %s", last, next.ID)
	}
	newHistory := mustHistory(t, s, next.ID)
	if len(newHistory) != 1 || newHistory[0].Event != Created || newHistory[0].Actor != state.ActorUser ||
		newHistory[0].To != Pending || !strings.Contains(newHistory[0].Reason, old.ID) {
		t.Errorf("new attempt's history = %+v, want one created entry naming %s", newHistory, old.ID)
	}
	open, err := s.OpenFor(t.Context(), old.User, old.Kind, old.Target, old.SessionID)
	if err != nil || open.ID != next.ID {
		t.Errorf("OpenFor the session = %v, %v; want the new attempt %s", open, err, next.ID)
	}
}

func TestRetryOfAnOverdueFlowExpiresItFirst(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		clk := newClock()
		s := newStore(b, clk)
		e := reach(t, s, clk, newElicitation(alice), Consented)
		clk.Advance(testTTL)

		next, err := s.Retry(t.Context(), e.ID, Act{Actor: state.ActorUser}, time.Hour)
		if err != nil {
			t.Fatalf("Retry: %v", err)
		}
		e.State = Expired
		checkRetry(t, s, clk, e, next)
	})
}

func TestConcurrentRetriesStartOneNewAttempt(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		clk := newClock()
		s := newStore(b, clk)
		e := reach(t, s, clk, newElicitation(alice), Cancelled)

		const retriers = 8
		ids := make(chan string, retriers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for range retriers {
			wg.Go(func() {
				<-start
				next, err := s.Retry(t.Context(), e.ID, Act{Actor: state.ActorUser}, time.Hour)
				switch {
				case err == nil:
					ids <- next.ID
				case !errors.Is(err, ErrConflict):
					t.Errorf("Retry: %v", err)
				}
			})
		}
		close(start)
		wg.Wait()
		close(ids)
		var got []string
		for id := range ids {
			got = append(got, id)
		}
		if len(got) != 1 {
			t.Fatalf("%d retries succeeded, want 1: %v", len(got), got)
		}
		if ended := mustGet(t, s, e.ID); ended.RetriedBy != got[0] {
			t.Errorf("retriedBy = %q, want the one new attempt %q", ended.RetriedBy, got[0])
		}
	})
}

func TestEndedFlowAwaitsDeliveryToItsSession(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		for _, tt := range []struct {
			state       State
			session     bool
			undelivered bool
		}{
			{Complete, true, true},
			{Declined, true, true},
			{Cancelled, true, true},
			{Expired, true, true},
			{Failed, true, false},
			{InProgress, true, false},
			{Cancelled, false, false},
		} {
			t.Run(fmt.Sprintf("%s/session_%v", tt.state, tt.session), func(t *testing.T) {
				t.Parallel()
				clk := newClock()
				s := newStore(b, clk)
				n := newElicitation(alice)
				n.SessionID = ""
				if tt.session {
					n.SessionID = "session-" + string(tt.state) // the cases share one Redis
				}
				e := reach(t, s, clk, n, tt.state)

				ids, err := s.Deliveries().Undelivered(t.Context(), alice, n.SessionID)
				if err != nil {
					t.Fatal(err)
				}
				if got := slices.Contains(ids, e.ID); got != tt.undelivered {
					t.Errorf("Undelivered = %v; contains %s: %v, want %v", ids, e.ID, got, tt.undelivered)
				}
				if queued := e.Delivery.QueuedAt; (queued != nil) != tt.undelivered {
					t.Errorf("Delivery.QueuedAt = %v, want set: %v", queued, tt.undelivered)
				}
				if others, _ := s.Deliveries().Undelivered(t.Context(), bob, n.SessionID); len(others) != 0 {
					t.Errorf("bob's undelivered for the same session ID = %v, want none", others)
				}
			})
		}
	})
}

func TestRecordDeliveryCountsAttemptsUntilWritten(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		clk := newClock()
		s := newStore(b, clk)
		var notices <-chan Notice
		startHub(t, b, func(h *Hub) { notices = noticeListener(h) })
		e := reach(t, s, clk, newElicitation(alice), Complete)
		history := len(mustHistory(t, s, e.ID))
		undelivered := func() bool {
			t.Helper()
			ids, err := s.Deliveries().Undelivered(t.Context(), alice, "session-1")
			if err != nil {
				t.Fatal(err)
			}
			is, err := s.Deliveries().IsUndelivered(t.Context(), alice, "session-1", e.ID)
			if err != nil {
				t.Fatal(err)
			}
			if is != slices.Contains(ids, e.ID) {
				t.Errorf("IsUndelivered = %v, but Undelivered = %v", is, ids)
			}
			if owed := mustGet(t, s, e.ID).NotificationOwed(); owed != is {
				t.Errorf("the record says owed %v, but IsUndelivered = %v", owed, is)
			}
			return is
		}

		clk.Advance(time.Second)
		failed, err := s.Deliveries().Record(t.Context(), e.ID, SessionStream, errors.New("stream not connected"))
		if err != nil {
			t.Fatal(err)
		}
		receiveNotice(t, notices, e.ID, NoticeDelivery, Complete)
		if d := failed.Delivery; d.Attempts != 1 || d.LastError != "stream not connected" || d.WrittenAt != nil {
			t.Errorf("after a failed attempt Delivery = %+v", d)
		}
		if !undelivered() {
			t.Errorf("a failed attempt took %s out of the undelivered set", e.ID)
		}
		if got := mustHistory(t, s, e.ID); len(got) != history {
			t.Errorf("a failed attempt added history: %+v", got[history:])
		}

		clk.Advance(time.Second)
		written, err := s.Deliveries().Record(t.Context(), e.ID, SessionStream, nil)
		if err != nil {
			t.Fatal(err)
		}
		receiveNotice(t, notices, e.ID, NoticeDelivery, Complete)
		d := written.Delivery
		if d.Attempts != 2 || d.LastError != "" || d.WrittenAt == nil || !d.WrittenAt.Equal(clk.Now()) || d.QueuedAt == nil {
			t.Errorf("after a written attempt Delivery = %+v", d)
		}
		if stored := mustGet(t, s, e.ID); !reflect.DeepEqual(stored.Delivery, d) {
			t.Errorf("stored Delivery = %+v, want %+v", stored.Delivery, d)
		}
		if undelivered() {
			t.Errorf("written notification still undelivered")
		}
		entries := mustHistory(t, s, e.ID)
		if last := entries[len(entries)-1]; last.Event != Notified || last.Actor != state.ActorSystem || last.From != Complete || last.To != Complete {
			t.Errorf("last history entry = %+v, want notified by system, complete to complete", last)
		}
	})
}

func TestRequeueAsksForTheNotificationAgain(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		clk := newClock()
		s := newStore(b, clk)
		var notices <-chan Notice
		startHub(t, b, func(h *Hub) { notices = noticeListener(h) })
		e := reach(t, s, clk, newElicitation(alice), Complete)
		if _, err := s.Deliveries().Record(t.Context(), e.ID, SessionStream, nil); err != nil {
			t.Fatal(err)
		}

		if _, err := s.Deliveries().Requeue(t.Context(), e.ID, Act{Actor: state.ActorOperator}); err != nil {
			t.Fatalf("Requeue: %v", err)
		}
		receiveNotice(t, notices, e.ID, NoticeRequeue, Complete)
		if ids, _ := s.Deliveries().Undelivered(t.Context(), alice, "session-1"); !slices.Contains(ids, e.ID) {
			t.Errorf("requeued notification not undelivered: %v", ids)
		}
		entries := mustHistory(t, s, e.ID)
		if last := entries[len(entries)-1]; last.Event != NotifyRequeued || last.Actor != state.ActorOperator || last.From != Complete || last.To != Complete {
			t.Errorf("last history entry = %+v, want notify_requeued by operator", last)
		}

		running := reach(t, s, clk, newElicitation(alice), InProgress)
		noSession := newElicitation(alice)
		noSession.SessionID = ""
		sessionless := reach(t, s, clk, noSession, Cancelled)
		for _, e := range []*Elicitation{running, sessionless} {
			history := len(mustHistory(t, s, e.ID))
			if _, err := s.Deliveries().Requeue(t.Context(), e.ID, Act{Actor: state.ActorOperator}); !errors.Is(err, ErrConflict) {
				t.Errorf("Requeue of %s flow in session %q error = %v, want ErrConflict", e.State, e.SessionID, err)
			}
			if got := mustHistory(t, s, e.ID); len(got) != history {
				t.Errorf("refused Requeue added history: %+v", got[history:])
			}
		}
	})
}

func TestOpenForReusesOnlyTheSameUsersRunningFlowInTheSameSession(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		clk := newClock()
		s := newStore(b, clk)
		e := mustCreate(t, s, newElicitation(alice))

		open, err := s.OpenFor(t.Context(), alice, state.KindSecret, "demo_api_key", "session-1")
		if err != nil || open.ID != e.ID {
			t.Fatalf("OpenFor = %v, %v; want %s", open, err, e.ID)
		}
		for _, tt := range []struct {
			name    string
			user    state.User
			kind    state.Kind
			target  string
			session string
		}{
			{"another user", bob, state.KindSecret, "demo_api_key", "session-1"},
			{"another issuer", state.User{Issuer: "https://evil.example", Subject: "alice"}, state.KindSecret, "demo_api_key", "session-1"},
			{"another kind", alice, state.KindOAuth, "demo_api_key", "session-1"},
			{"another target", alice, state.KindSecret, "other_key", "session-1"},
			{"another session", alice, state.KindSecret, "demo_api_key", "session-2"},
			{"no session", alice, state.KindSecret, "demo_api_key", ""},
		} {
			if got, err := s.OpenFor(t.Context(), tt.user, tt.kind, tt.target, tt.session); !errors.Is(err, state.ErrNotFound) {
				t.Errorf("%s: OpenFor = %v, %v; want state.ErrNotFound", tt.name, got, err)
			}
		}

		mustApply(t, s, e.ID, BrowserOpen, state.ActorUser)
		if open, err := s.OpenFor(t.Context(), alice, state.KindSecret, "demo_api_key", "session-1"); err != nil || open.State != InProgress {
			t.Errorf("OpenFor a flow in progress = %v, %v; want it", open, err)
		}
		mustApply(t, s, e.ID, CancelRequested, state.ActorUser)
		if got, err := s.OpenFor(t.Context(), alice, state.KindSecret, "demo_api_key", "session-1"); !errors.Is(err, state.ErrNotFound) {
			t.Errorf("OpenFor an ended flow = %v, %v; want state.ErrNotFound", got, err)
		}

		overdue := mustCreate(t, s, newElicitation(alice))
		clk.Advance(testTTL)
		if got, err := s.OpenFor(t.Context(), alice, state.KindSecret, "demo_api_key", "session-1"); !errors.Is(err, state.ErrNotFound) {
			t.Errorf("OpenFor an overdue flow = %v, %v; want state.ErrNotFound", got, err)
		}
		if got := mustGet(t, s, overdue.ID); got.State != Expired {
			t.Errorf("overdue flow is %s, want expired", got.State)
		}
	})
}

func TestMalformedAndUnknownIDsAreNotFound(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		s := newStore(b, nil)
		e := mustCreate(t, s, newElicitation(alice))
		ids := []string{
			"", "x", "*", "urlflow:eid:*", e.ID + "\n", " " + e.ID, strings.ToLower(e.ID),
			e.ID[:25], e.ID + "A", "ABCDEFGHIJKLMNOPQRSTUVWXY1", // 1 is not base32
			rand.Text(), // well formed, never created
		}
		ctx := t.Context()
		ops := map[string]func(id string) error{
			"Read":    func(id string) error { _, err := s.Read(ctx, id); return err },
			"History": func(id string) error { _, err := s.History(ctx, id); return err },
			"Apply": func(id string) error {
				_, err := s.Apply(ctx, id, CancelRequested, state.ActorUser, "test")
				return err
			},
			"Retry": func(id string) error { _, err := s.Retry(ctx, id, Act{Actor: state.ActorUser}, time.Hour); return err },
			"Requeue": func(id string) error {
				_, err := s.Deliveries().Requeue(ctx, id, Act{Actor: state.ActorOperator})
				return err
			},
			"RecordDelivery": func(id string) error { _, err := s.Deliveries().Record(ctx, id, SessionStream, nil); return err },
		}
		for name, op := range ops {
			for _, id := range ids {
				if err := op(id); !errors.Is(err, state.ErrNotFound) {
					t.Errorf("%s(%q) error = %v, want state.ErrNotFound", name, id, err)
				}
			}
		}
		if got := mustGet(t, s, e.ID); got.State != Pending {
			t.Errorf("the real elicitation is %s after the lookups, want pending", got.State)
		}
	})
}

// TestAWaiterThatHasNotLookedYetKeepsTheNoticeThatTheFlowEnded: a waiter holds one
// notice. When a step that ends the flow follows one that does not before the waiter took
// the first, the waiter finds the ending: waiters read the record only on such a notice
// (Notice.MayHaveEnded), and one that kept the first would wait out its whole budget.
func TestAWaiterThatHasNotLookedYetKeepsTheNoticeThatTheFlowEnded(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		s := newStore(b, nil)
		var heard <-chan Notice
		h := startHub(t, b, func(h *Hub) { heard = noticeListener(h) })
		e := mustCreate(t, s, newElicitation(alice))
		woken, stop := h.Wait(e.ID)
		defer stop()

		mustApply(t, s, e.ID, ClientAccept, state.ActorClient)
		mustApply(t, s, e.ID, CancelRequested, state.ActorUser)
		receive(t, heard, "the accept's notice")
		receive(t, heard, "the cancel's notice") // waiters are woken before listeners hear
		if got := receive(t, woken, "the waiter's notice"); got.State != Cancelled || !got.MayHaveEnded() {
			t.Errorf("the waiter holds %+v, want the cancel's notice", got)
		}
	})
}

func TestHubWakesWaitersAndListeners(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		s := newStore(b, nil)
		var heard <-chan Notice
		h := startHub(t, b, func(h *Hub) { heard = noticeListener(h) })
		e := mustCreate(t, s, newElicitation(alice))
		other := mustCreate(t, s, newElicitation(bob))

		woken, stop := h.Wait(e.ID)
		defer stop()
		second, stopSecond := h.Wait(e.ID)
		defer stopSecond()
		otherWoken, stopOther := h.Wait(other.ID)
		defer stopOther()
		stopped, stopStopped := h.Wait(e.ID)
		stopStopped()

		mustApply(t, s, e.ID, ClientAccept, state.ActorClient)
		want := Notice{ID: e.ID, What: NoticeState, State: Consented, UserKey: alice.Key(), SessionID: "session-1"}
		if got := receive(t, woken, "a waiter's notice"); got != want {
			t.Errorf("waiter got %+v, want %+v", got, want)
		}
		if got := receive(t, second, "a second waiter's notice"); got != want {
			t.Errorf("second waiter got %+v, want %+v", got, want)
		}
		if got := receive(t, heard, "a listener's notice"); got != want {
			t.Errorf("listener got %+v, want %+v", got, want)
		}
		// The hub wakes waiters before it calls listeners: anything due is there by now.
		select {
		case n := <-otherWoken:
			t.Errorf("waiter of another elicitation woken by %+v", n)
		case n := <-stopped:
			t.Errorf("waiter that stopped waiting woken by %+v", n)
		default:
		}

		// An event that changes nothing publishes nothing; the next change wakes again.
		mustApply(t, s, e.ID, ClientAccept, state.ActorClient)
		mustApply(t, s, e.ID, CancelRequested, state.ActorUser)
		if got := receive(t, heard, "the listener's next notice"); got.State != Cancelled {
			t.Errorf("listener's next notice = %+v, want the cancel (nothing for the late accept)", got)
		}
		if got := receive(t, woken, "the waiter's next notice"); got.State != Cancelled {
			t.Errorf("waiter's next notice = %+v, want the cancel", got)
		}
	})
}

func TestHubSubscribesAgainAfterLosingItsConnection(t *testing.T) {
	// Only a real redis-server can drop a client or stop and come back.
	for _, tt := range []struct {
		name string
		drop func(t *testing.T, b *redistest.Backend)
	}{
		{"client kill", func(t *testing.T, b *redistest.Backend) {
			n, err := b.Client.ClientKillByFilter(t.Context(), "TYPE", "pubsub").Result()
			if err != nil || n < 1 {
				t.Fatalf("CLIENT KILL TYPE pubsub = %d, %v; want the hub's connection killed", n, err)
			}
		}},
		{"server restart", func(t *testing.T, b *redistest.Backend) { b.Server.Restart(t) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t)
			b := &redistest.Backend{Client: srv.Client(t), Server: srv}
			s := newStore(b, nil)
			connects := make(chan struct{}, 8)
			h := startHub(t, b, func(h *Hub) {
				h.OnConnect(func(context.Context) { connects <- struct{}{} })
			})
			receive(t, connects, "OnConnect at the first subscription")
			e := mustCreate(t, s, newElicitation(alice))
			woken, stop := h.Wait(e.ID)
			defer stop()

			tt.drop(t, b)

			receive(t, connects, "OnConnect after subscribing again")
			if n := receive(t, woken, "the wake-up of a waiter after subscribing again"); n.ID != e.ID {
				t.Errorf("waiter woken with %+v, want its own ID %s", n, e.ID)
			}
			// Notices flow on the new subscription.
			mustApply(t, s, e.ID, BrowserOpen, state.ActorUser)
			receiveNotice(t, woken, e.ID, NoticeState, InProgress)
		})
	}
}

func TestOpenCreatesOnlyWhenNoneRunsAndAnEndedFlowLeavesNoOpenKey(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		clk := newClock()
		s := newStore(b, clk)
		n := newElicitation(alice)
		first, created, err := s.Open(ctx, n)
		if err != nil || !created {
			t.Fatalf("Open with none running = %v, created %v, %v; want a new one", first, created, err)
		}
		again, created, err := s.Open(ctx, n)
		if err != nil || created || again.ID != first.ID {
			t.Fatalf("Open with one running = %v, created %v, %v; want %s again", again, created, err, first.ID)
		}
		if got, err := s.OpenFor(ctx, alice, state.KindSecret, n.Target, n.SessionID); err != nil || got.ID != first.ID {
			t.Fatalf("OpenFor = %v, %v; want %s", got, err, first.ID)
		}

		mustApply(t, s, first.ID, CancelRequested, state.ActorUser)
		key := openKey(alice.Key(), state.KindSecret, n.Target, n.SessionID)
		if n := b.Client.Exists(ctx, key).Val(); n != 0 {
			t.Error("the open key of an ended flow is still there")
		}
		second, created, err := s.Open(ctx, n)
		if err != nil || !created || second.ID == first.ID {
			t.Fatalf("Open after the flow ended = %v, created %v, %v; want a new one", second, created, err)
		}

		// An earlier version left the open key of an ended flow in place: Open still
		// creates a new one, and the old flow's end does not delete the new flow's key.
		mustApply(t, s, second.ID, CancelRequested, state.ActorUser)
		if err := b.Client.Set(ctx, key, second.ID, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		third, created, err := s.Open(ctx, n)
		if err != nil || !created || third.ID == second.ID || third.State != Pending {
			t.Fatalf("Open over a stale open key = %v, created %v, %v; want a new pending one", third, created, err)
		}
		mustApply(t, s, second.ID, LatePost, state.ActorUser)
		if got, err := s.OpenFor(ctx, alice, state.KindSecret, n.Target, n.SessionID); err != nil || got.ID != third.ID {
			t.Fatalf("OpenFor after an old flow's late event = %v, %v; want %s", got, err, third.ID)
		}
	})
}

func TestForDeliveryNeverMissesANotificationRequeuedElsewhere(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		clk := newClock()
		here, there := newStore(b, clk), newStore(b, clk) // two replicas
		e := reach(t, here, clk, newElicitation(alice), Complete)
		if got, err := here.Read(ctx, e.ID, IfCopy((*Elicitation).NotificationOwed)); err != nil || !got.NotificationOwed() {
			t.Fatalf("ForDelivery of a flow that just completed = %+v, %v; want it owed", got, err)
		}
		if _, err := here.Deliveries().Record(ctx, e.ID, SessionStream, nil); err != nil {
			t.Fatal(err)
		}
		if got, err := here.Read(ctx, e.ID, IfCopy((*Elicitation).NotificationOwed)); err != nil || got.NotificationOwed() {
			t.Fatalf("ForDelivery after the delivery = %+v, %v; want it not owed", got, err)
		}
		// Another replica asks for it again: here's copy says written, so it reads the record.
		if _, err := there.Deliveries().Requeue(ctx, e.ID, Act{Actor: state.ActorOperator}); err != nil {
			t.Fatal(err)
		}
		if got, err := here.Read(ctx, e.ID, IfCopy((*Elicitation).NotificationOwed)); err != nil || !got.NotificationOwed() {
			t.Fatalf("ForDelivery after a requeue on another replica = %+v, %v; want it owed again", got, err)
		}
	})
}

// slowReply holds the reply of the first command named command (a GET if empty) after
// armed is set until release is closed, and says so on held: an answer still on its way.
type slowReply struct {
	command       string
	armed         *atomic.Bool
	held, release chan struct{}
}

func (h slowReply) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h slowReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h slowReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if cmd.Name() == cmp.Or(h.command, "get") && h.armed.CompareAndSwap(true, false) {
			h.held <- struct{}{}
			<-h.release
		}
		return err
	}
}

func TestASlowReadDoesNotPutBackAnOlderCopyThanThisReplicaWrote(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	hook := slowReply{armed: &atomic.Bool{}, held: make(chan struct{}), release: make(chan struct{})}
	rdb.AddHook(hook)
	s := NewStore(rdb, StoreOptions{Logger: quiet})
	e := mustCreate(t, s, newElicitation(alice))

	hook.armed.Store(true)
	read := make(chan error, 1)
	go func() { _, err := s.Read(context.Background(), e.ID); read <- err }()
	<-hook.held // the read has its answer (pending) but has not handed it over yet
	if _, err := s.Apply(t.Context(), e.ID, BrowserOpen, state.ActorUser, "opened"); err != nil {
		t.Fatal(err)
	}
	close(hook.release)
	if err := <-read; err != nil {
		t.Fatal(err)
	}
	if seen, ok := s.Seen(e.ID); !ok || seen.State != InProgress {
		t.Errorf("this replica's copy says %s, want in_progress as it wrote", seen.State)
	}
}

func TestALateAnswerOfAnEarlierStepDoesNotPutBackAnOlderCopy(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	hook := slowReply{command: "evalsha", armed: &atomic.Bool{}, held: make(chan struct{}), release: make(chan struct{})}
	rdb.AddHook(hook)
	s := NewStore(rdb, StoreOptions{Logger: quiet})
	e := mustCreate(t, s, newElicitation(alice))

	hook.armed.Store(true)
	accepted := make(chan error, 1)
	go func() {
		_, err := s.Apply(context.Background(), e.ID, ClientAccept, state.ActorClient, "accept")
		accepted <- err
	}()
	<-hook.held // the accept has written consented, and its answer is on its way
	if c := mustApply(t, s, e.ID, BrowserOpen, state.ActorUser); c.To != InProgress {
		t.Fatalf("the browser's step moved the flow to %s, want in_progress", c.To)
	}
	close(hook.release)
	if err := <-accepted; err != nil {
		t.Fatal(err)
	}
	if seen, ok := s.Seen(e.ID); !ok || seen.State != InProgress {
		t.Errorf("this replica's copy says %s after the accept's late answer, want in_progress as its last step wrote", seen.State)
	}
}

// TestRacingStepsNeverLeaveAnOlderCopy races a client's accept, a browser's open and a
// page's continue on one flow, on one replica, many times: whatever order they land in,
// the replica's copy is the record as Redis holds it once all have answered.
func TestRacingStepsNeverLeaveAnOlderCopy(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	s := NewStore(srv.Client(t), StoreOptions{Logger: quiet})
	ctx := t.Context()
	iterations := 2000
	if testing.Short() {
		iterations = 200
	}
	for i := range iterations {
		e := mustCreate(t, s, newElicitation(alice))
		var wg sync.WaitGroup
		for _, ev := range []Event{ClientAccept, BrowserOpen, PageContinue} {
			wg.Go(func() {
				if _, err := s.Apply(ctx, e.ID, ev, state.ActorUser, "race"); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		seen, ok := s.Seen(e.ID)
		stored, err := s.load(ctx, e.User.Key(), e.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !ok || seen.State != stored.State || seen.Revision != stored.Revision {
			t.Fatalf("iteration %d: this replica's copy is %s (revision %d), Redis holds %s (revision %d)",
				i, seen.State, seen.Revision, stored.State, stored.Revision)
		}
	}
}

// The sweep drops the copies of records past their time: after a busy minute the memory
// they took goes back, where it stayed until the next write (BenchmarkSoak).
func TestTheSweepDropsCopiesPastTheirTime(t *testing.T) {
	be := redistest.StartEmbedded(t)
	clk := newClock()
	s := newStore(be, clk)
	for range 3 {
		mustCreate(t, s, newElicitation(alice))
	}
	s.mu.Lock()
	held := s.seen.Len()
	s.mu.Unlock()
	if held == 0 {
		t.Fatal("no copies kept of the records written")
	}
	clk.Advance(seenTTL + time.Second)
	if _, err := s.Sweep(t.Context()); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := s.seen.Len(); n != 0 {
		t.Fatalf("%d copies left past their time, want 0", n)
	}
}

// TestWhatAReplicaRemembersOfAWrittenRecordIsWhatRedisHolds: a step keeps the bytes it
// wrote as the replica's copy of the record (seeWritten), without encoding them again; the
// copy must be byte for byte what Redis holds, or the next step's check would fail.
func TestWhatAReplicaRemembersOfAWrittenRecordIsWhatRedisHolds(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		s := newStore(b, newClock())
		e := mustCreate(t, s, newElicitation(alice))
		steps := []Event{ClientAccept, BrowserOpen, Verified}
		for i := 0; ; i++ {
			_, kept, ok := s.seenRecord(e.ID)
			stored, err := b.Client.Get(t.Context(), elicitationKey(alice.Key(), e.ID)).Bytes()
			if err != nil || !ok || !bytes.Equal(kept, stored) {
				t.Fatalf("after %d steps the replica keeps\n%s\nRedis holds\n%s (%v)", i, kept, stored, err)
			}
			if i == len(steps) {
				break
			}
			if _, err := s.Apply(t.Context(), e.ID, steps[i], state.ActorUser, "test"); err != nil {
				t.Fatal(err)
			}
		}
	})
}
