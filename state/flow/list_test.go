package flow

import (
	"errors"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/urlflow/urlflow/internal/redistest"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/audit"
)

// listAll pages through q with limit, and returns the IDs in the order listed.
func listAll(t *testing.T, s *Store, q ListQuery, between func()) []string {
	t.Helper()
	var ids []string
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatal("the listing does not end")
		}
		page, err := s.Index().List(t.Context(), q)
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		for _, e := range page.Elicitations {
			ids = append(ids, e.ID)
		}
		if page.Next == "" {
			return ids
		}
		q.Cursor = page.Next
		if between != nil {
			between()
		}
	}
}

func TestListPagesThroughEveryFlowOnceWhileFlowsChange(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		clk := newClock()
		s := newStore(b, clk)
		var existing []*Elicitation
		for i := range 45 {
			if i%3 == 0 {
				clk.Advance(time.Millisecond) // three flows share each millisecond: the ID orders them
			}
			user := alice
			if i%2 == 1 {
				user = bob
			}
			existing = append(existing, mustCreate(t, s, newElicitation(user)))
		}
		// Between pages, flows move on, end, and new ones start.
		step := 0
		changeSome := func() {
			for range 3 {
				e := existing[(step*7)%len(existing)]
				ev := []Event{ClientAccept, BrowserOpen, CancelRequested}[step%3]
				if _, err := s.Apply(t.Context(), e.ID, ev, state.ActorUser, "test"); err != nil {
					t.Errorf("Apply: %v", err)
				}
				clk.Advance(time.Millisecond)
				mustCreate(t, s, newElicitation(alice))
				step++
			}
		}
		ids := listAll(t, s, ListQuery{Limit: 4}, changeSome)

		seen := map[string]int{}
		for _, id := range ids {
			seen[id]++
		}
		for id, n := range seen {
			if n > 1 {
				t.Errorf("%s listed %d times", id, n)
			}
		}
		for _, e := range existing {
			if seen[e.ID] != 1 {
				t.Errorf("%s, which existed throughout, listed %d times", e.ID, seen[e.ID])
			}
		}
		var want []string
		for _, e := range existing {
			want = append(want, indexEntry(e))
		}
		var got []string
		for _, id := range ids {
			if e, ok := findIn(existing, id); ok {
				got = append(got, indexEntry(e))
			}
		}
		if !slices.IsSorted(got) || !slices.Equal(got, slices.Sorted(slices.Values(want))) {
			t.Errorf("listed out of (createdAt, ID) order:\n%v", got)
		}
	})
}

// byEntry orders elicitations as listings do: by (createdAt, ID).
func byEntry(a, b *Elicitation) int { return strings.Compare(indexEntry(a), indexEntry(b)) }

// ids returns the IDs of es in the order of listings.
func ids(es ...*Elicitation) []string {
	var out []string
	for _, e := range slices.SortedFunc(slices.Values(es), byEntry) {
		out = append(out, e.ID)
	}
	return out
}

func findIn(es []*Elicitation, id string) (*Elicitation, bool) {
	for _, e := range es {
		if e.ID == id {
			return e, true
		}
	}
	return nil, false
}

func TestListFiltersOnWhatTheRecordsSay(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		clk := newClock()
		s := newStore(b, clk)
		ctx := t.Context()
		old := mustCreate(t, s, newElicitation(alice)) // pending, 2025-11-25, inspector, replica-a
		clk.Advance(time.Hour)
		n := newElicitation(bob)
		n.Kind, n.Target, n.Client, n.Replica, n.SessionID = state.KindOAuth, "acme", state.ClientInfo{Name: "claude-code"}, "replica-b", ""
		oauth := mustCreate(t, s, n)
		n = newElicitation(alice)
		n.Service, n.SessionID = "weather", ""
		svc := mustCreate(t, s, n)
		done := mustCreate(t, s, newElicitation(bob))
		mustApply(t, s, done.ID, CancelRequested, state.ActorUser)

		for _, tt := range []struct {
			name   string
			filter Filter
			want   []*Elicitation
		}{
			{"everything", Filter{}, []*Elicitation{old, oauth, svc, done}},
			{"state", Filter{States: []State{Cancelled}}, []*Elicitation{done}},
			{"two states", Filter{States: []State{Pending, Cancelled}}, []*Elicitation{old, oauth, svc, done}},
			{"older than", Filter{OlderThan: 30 * time.Minute}, []*Elicitation{old}},
			{"subject", Filter{Subject: "bob"}, []*Elicitation{oauth, done}},
			{"user key", Filter{UserKey: alice.Key()}, []*Elicitation{old, svc}},
			{"user key and state", Filter{UserKey: alice.Key(), States: []State{Pending}}, []*Elicitation{old, svc}},
			{"kind", Filter{Kind: state.KindOAuth}, []*Elicitation{oauth}},
			{"target", Filter{Target: "demo_api_key"}, []*Elicitation{old, svc, done}},
			{"service", Filter{Service: "weather"}, []*Elicitation{svc}},
			{"client", Filter{Client: "claude-code"}, []*Elicitation{oauth}},
			{"era 2025", Filter{Era: "2025-11-25"}, []*Elicitation{old, done}},
			{"era 2026", Filter{Era: "2026-07-28"}, []*Elicitation{oauth}},
			{"era api", Filter{Era: "api"}, []*Elicitation{svc}},
			{"replica", Filter{Replica: "replica-b"}, []*Elicitation{oauth}},
			{"nothing", Filter{Subject: "carol"}, nil},
		} {
			var want []string
			for _, e := range slices.SortedFunc(slices.Values(tt.want), byEntry) {
				want = append(want, e.ID)
			}
			if got := listAll(t, s, ListQuery{Filter: tt.filter, Limit: 2}, nil); !slices.Equal(got, want) {
				t.Errorf("%s: listed %v, want %v", tt.name, got, want)
			}
		}
		if _, err := s.Index().List(ctx, ListQuery{Cursor: "bm90IGEgY3Vyc29y"}); !errors.Is(err, ErrBadCursor) {
			t.Errorf("List with a made-up cursor: %v, want ErrBadCursor", err)
		}
	})
}

func TestStuckFlowsFollowTheirThresholdsAndOwedNotifications(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		clk := newClock()
		s := newStore(b, clk)
		ctx := t.Context()
		pending := mustCreate(t, s, newElicitation(alice))
		consented := mustCreate(t, s, newElicitation(bob))
		mustApply(t, s, consented.ID, ClientAccept, state.ActorClient)
		ended := mustCreate(t, s, newElicitation(alice))
		mustApply(t, s, ended.ID, CancelRequested, state.ActorUser) // owes its notification to session-1
		quiet := newElicitation(bob)
		quiet.SessionID = ""
		endedQuietly := mustCreate(t, s, quiet)
		mustApply(t, s, endedQuietly.ID, CancelRequested, state.ActorUser) // owes nothing

		// Overview, read once, agrees with the stuck listing and Summarize.
		overview := func() (Summary, []string) {
			t.Helper()
			sum, stuck, err := s.Index().Overview(ctx, MaxListLimit)
			if err != nil {
				t.Fatalf("Overview: %v", err)
			}
			return sum, ids(stuck...)
		}
		stuck := func() []string {
			t.Helper()
			got := listAll(t, s, ListQuery{Filter: Filter{Stuck: true}}, nil)
			if _, over := overview(); !slices.Equal(over, got) {
				t.Errorf("Overview's stuck flows %v, the listing's %v", over, got)
			}
			return got
		}
		summary := func() Summary {
			t.Helper()
			sum, err := s.Index().Summarize(ctx, Filter{})
			if err != nil {
				t.Fatalf("Summarize: %v", err)
			}
			if over, _ := overview(); !reflect.DeepEqual(over, sum) {
				t.Errorf("Overview's summary %+v, Summarize's %+v", over, sum)
			}
			return sum
		}
		if got := stuck(); len(got) != 0 {
			t.Errorf("stuck at once: %v", got)
		}
		sum := summary()
		wantRunning := map[State]int{Pending: 1, Consented: 1, InProgress: 0, Failed: 0, Unknown: 0}
		if !maps.Equal(sum.Running, wantRunning) || sum.OwedNotifications != 1 {
			t.Errorf("summary = %+v, want running %v and 1 owed notification", sum, wantRunning)
		}

		clk.Advance(DefaultStuckAfter.Notification)
		if got, want := stuck(), []string{ended.ID}; !slices.Equal(got, want) {
			t.Errorf("after the notification threshold, stuck = %v, want %v", got, want)
		}
		clk.Advance(DefaultStuckAfter.Pending - DefaultStuckAfter.Notification)
		if got, want := stuck(), ids(pending, ended); !slices.Equal(got, want) {
			t.Errorf("after the pending threshold, stuck = %v, want %v", got, want)
		}
		clk.Advance(DefaultStuckAfter.Consented - DefaultStuckAfter.Pending)
		if got, want := stuck(), ids(pending, consented, ended); !slices.Equal(got, want) {
			t.Errorf("after the consented threshold, stuck = %v, want %v", got, want)
		}
		if sum := summary(); sum.Stuck[Stuck(Pending)] != 1 || sum.Stuck[Stuck(Consented)] != 1 || sum.Stuck[StuckNotification] != 1 {
			t.Errorf("summary stuck = %v, want one pending, one consented, one notification", sum.Stuck)
		}
		if got := listAll(t, s, ListQuery{Filter: Filter{Stuck: true, Subject: "bob"}}, nil); !slices.Equal(got, []string{consented.ID}) {
			t.Errorf("bob's stuck flows = %v, want %v", got, []string{consented.ID})
		}
		// A user's own listing and summary read the user's index, with the same answers.
		if got := listAll(t, s, ListQuery{Filter: Filter{Stuck: true, UserKey: bob.Key()}}, nil); !slices.Equal(got, []string{consented.ID}) {
			t.Errorf("bob's own stuck flows = %v, want %v", got, []string{consented.ID})
		}
		if sum, err := s.Index().Summarize(ctx, Filter{UserKey: alice.Key()}); err != nil || sum.Running[Pending] != 1 ||
			sum.OwedNotifications != 1 || sum.Stuck[StuckNotification] != 1 || sum.Running[Consented] != 0 {
			t.Errorf("alice's summary = %+v, %v; want her pending flow and her owed notification", sum, err)
		}

		// A flow that moves on is no longer stuck; a written notification is owed no more.
		mustApply(t, s, pending.ID, ClientAccept, state.ActorClient)
		if _, err := s.Deliveries().Record(ctx, ended.ID, SessionStream, nil); err != nil {
			t.Fatal(err)
		}
		if got, want := stuck(), []string{consented.ID}; !slices.Equal(got, want) {
			t.Errorf("after changes, stuck = %v, want %v", got, want)
		}
		if sum := summary(); sum.OwedNotifications != 0 {
			t.Errorf("summary after delivery = %+v, want no owed notification", sum)
		}
		// Asked for again, the notification is owed again.
		if _, err := s.Deliveries().Requeue(ctx, ended.ID, Act{Actor: state.ActorOperator}); err != nil {
			t.Fatal(err)
		}
		if sum := summary(); sum.OwedNotifications != 1 {
			t.Errorf("summary after requeue = %+v, want one owed notification", sum)
		}
	})
}

func TestUnknownIsStuckAtOnceAndThresholdsCanBeSet(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		clk := newClock()
		s := NewStore(b.Client, StoreOptions{Logger: quiet, Now: clk.Now, StuckAfter: StuckAfter{Pending: time.Second, Consented: time.Hour,
			InProgress: time.Hour, Failed: time.Hour, Notification: time.Hour}})
		e := mustCreate(t, s, newElicitation(alice))
		unknown := mustCreate(t, s, newElicitation(bob))
		mustApply(t, s, unknown.ID, NoAnswer, state.ActorSystem)
		if got, want := listAll(t, s, ListQuery{Filter: Filter{Stuck: true}}, nil), []string{unknown.ID}; !slices.Equal(got, want) {
			t.Errorf("stuck at once = %v, want %v", got, want)
		}
		clk.Advance(time.Second)
		if got, want := listAll(t, s, ListQuery{Filter: Filter{Stuck: true}}, nil), ids(e, unknown); !slices.Equal(got, want) {
			t.Errorf("stuck after a second = %v, want %v", got, want)
		}
	})
}

func TestIndexExistingAddsFlowsWrittenBeforeTheIndexesOnce(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		clk := newClock()
		s := newStore(b, clk)
		ctx := t.Context()
		var want []*Elicitation
		for i := range 12 {
			clk.Advance(time.Second)
			e := mustCreate(t, s, newElicitation([]state.User{alice, bob}[i%2]))
			if i == 3 {
				mustApply(t, s, e.ID, CancelRequested, state.ActorUser)
			}
			want = append(want, e)
		}
		// The layout before the indexes: none of their keys (nor any write of them still
		// queued on a Cluster).
		s.flushIndexes(ctx)
		forget := []string{userIndexKey(alice.Key()), userIndexKey(bob.Key())}
		for bucket := range IndexBuckets {
			forget = append(forget, flowsKey(bucket), owedKey(bucket))
		}
		for _, key := range forget {
			if err := b.Client.Del(ctx, key).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if got := listAll(t, s, ListQuery{}, nil); len(got) != 0 {
			t.Fatalf("listed %v without indexes", got)
		}

		did, err := s.Index().AddExisting(ctx)
		if err != nil || !did {
			t.Fatalf("IndexExisting = %v, %v; want true, nil", did, err)
		}
		if got := listAll(t, s, ListQuery{Limit: 5}, nil); !slices.Equal(got, ids(want...)) {
			t.Errorf("after indexing, listed %v, want %v", got, want)
		}
		if got := listAll(t, s, ListQuery{Filter: Filter{UserKey: bob.Key()}}, nil); len(got) != 6 {
			t.Errorf("bob's listing holds %d flows, want 6", len(got))
		}
		if sum, err := s.Index().Summarize(ctx, Filter{}); err != nil || sum.OwedNotifications != 1 {
			t.Errorf("summary = %+v, %v; want the cancelled flow's notification owed", sum, err)
		}
		if did, err := s.Index().AddExisting(ctx); did || err != nil {
			t.Errorf("IndexExisting a second time = %v, %v; want false, nil", did, err)
		}
	})
}

func TestEntriesWhoseRecordIsGoneAreSkippedAndTrimmed(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		clk := newClock()
		s := newStore(b, clk)
		ctx := t.Context()
		gone := mustCreate(t, s, newElicitation(alice))
		kept := mustCreate(t, s, newElicitation(alice))
		if err := b.Client.Del(ctx, elicitationKey(alice.Key(), gone.ID)).Err(); err != nil {
			t.Fatal(err)
		}
		if got := listAll(t, s, ListQuery{}, nil); !slices.Equal(got, []string{kept.ID}) {
			t.Errorf("listed %v, want only %s", got, kept.ID)
		}
		if n, err := b.Client.ZCard(ctx, flowsKey(bucketOf(gone.ID))).Result(); err != nil || n != boolInt(bucketOf(gone.ID) == bucketOf(kept.ID)) {
			t.Errorf("the listing left the entry of the record that is gone: %d entries in its bucket, %v", n, err)
		}

		// Past the retention, the trim takes out entries nobody listed.
		lost := mustCreate(t, s, newElicitation(bob))
		if err := b.Client.Del(ctx, elicitationKey(bob.Key(), lost.ID)).Err(); err != nil {
			t.Fatal(err)
		}
		clk.Advance(DefaultRetention + time.Hour)
		n, err := s.Index().Trim(ctx)
		if err != nil || n != 1 {
			t.Errorf("TrimIndexes = %d, %v; want 1, nil", n, err)
		}
		if got := listAll(t, s, ListQuery{}, nil); !slices.Equal(got, []string{kept.ID}) {
			t.Errorf("after the trim, listed %v, want only %s", got, kept.ID)
		}
	})
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func TestListingWhileFlowsAreCreatedConcurrentlyNeverRepeats(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		s := newStore(b, nil) // the real clock: flows of one millisecond are ordered by ID
		var before []*Elicitation
		for range 20 {
			before = append(before, mustCreate(t, s, newElicitation(alice)))
		}
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range 15 {
					if _, err := s.Create(t.Context(), newElicitation(alice)); err != nil {
						t.Errorf("Create: %v", err)
						return
					}
				}
			})
		}
		listed := listAll(t, s, ListQuery{Limit: 3}, func() { time.Sleep(time.Millisecond) })
		wg.Wait()
		seen := map[string]bool{}
		for _, id := range listed {
			if seen[id] {
				t.Fatalf("%s listed twice", id)
			}
			seen[id] = true
		}
		for _, e := range before {
			if !seen[e.ID] {
				t.Errorf("%s, created before the listing, was not listed", e.ID)
			}
		}
	})
}

// On one server the step's script appends its audit event; on a Cluster the step hands it
// to the replica's next batch once it has written.
func TestEveryChangeOfStateIsAuditedByItsStep(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		trail := audit.New(b.Client, audit.Options{Logger: quiet})
		s := NewStore(b.Client, StoreOptions{Logger: quiet, Audit: trail})
		e := mustCreate(t, s, newElicitation(alice))
		mustApply(t, s, e.ID, ClientAccept, state.ActorClient)
		mustApply(t, s, e.ID, ClientAccept, state.ActorClient) // changes nothing: not audited
		if _, err := s.Apply(t.Context(), e.ID, CancelRequested, state.ActorOperator, "ticket 42", By("token 0123abcd")); err != nil {
			t.Fatal(err)
		}
		trail.Flush(t.Context()) // on a Cluster the events wait for the replica's next batch
		events, err := trail.Read(t.Context(), time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, ev := range events {
			got = append(got, ev.From+"→"+ev.To+" "+ev.Cause+" "+string(ev.Actor)+" "+ev.By)
			if ev.Event != audit.Transition || ev.Elicitation != e.ID || ev.UserKey != alice.Key() || ev.Client != "inspector" {
				t.Errorf("event %+v", ev)
			}
		}
		want := []string{"→pending created client ", "pending→consented client_accept client ", "consented→cancelled cancel operator token 0123abcd"}
		if !slices.Equal(got, want) {
			t.Errorf("audited %q, want %q", got, want)
		}
	})
}

// pagesOf lists q page after page and returns each page's IDs, and the last page.
func pagesOf(t *testing.T, s *Store, q ListQuery) ([][]string, Page) {
	t.Helper()
	var pages [][]string
	for {
		page, err := s.Index().List(t.Context(), q)
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		pages = append(pages, ids(page.Elicitations...))
		if page.Next == "" || len(pages) > 100 {
			return pages, page
		}
		q.Cursor = page.Next
	}
}

func TestListPagesBackAsItPagedForwardAndCountsWhatNeedsAttention(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		clk := newClock()
		s := newStore(b, clk)
		var pending, all []*Elicitation
		for i := range 23 {
			clk.Advance(time.Millisecond)
			e := mustCreate(t, s, newElicitation(alice))
			all = append(all, e)
			if i%4 == 3 {
				if _, err := s.Apply(t.Context(), e.ID, CancelRequested, state.ActorUser, "test"); err != nil {
					t.Fatal(err)
				}
				continue
			}
			pending = append(pending, e)
		}
		for _, tt := range []struct {
			name    string
			filter  Filter
			want    []*Elicitation
			counted bool
		}{
			{"every flow (the listing indexes)", Filter{}, all, false},
			{"a user's (the user's index)", Filter{UserKey: alice.Key()}, all, false},
			{"pending (the flows that need attention)", Filter{States: []State{Pending}}, pending, true},
		} {
			q := ListQuery{Filter: tt.filter, Limit: 4}
			forward, last := pagesOf(t, s, q)
			var listed []string
			for _, p := range forward {
				listed = append(listed, p...)
			}
			if want := ids(tt.want...); !slices.Equal(listed, want) {
				t.Fatalf("%s: listed %v, want %v", tt.name, listed, want)
			}
			if last.Counted != tt.counted || tt.counted && last.Total != len(tt.want) {
				t.Errorf("%s: total %d (counted %v), want %d (counted %v)", tt.name, last.Total, last.Counted, len(tt.want), tt.counted)
			}
			// Back from the last page, page by page: the same pages, in reverse.
			page := last
			for i := len(forward) - 2; i >= 0; i-- {
				if page.Prev == "" {
					t.Fatalf("%s: page %d has no Prev", tt.name, i+2)
				}
				var err error
				if page, err = s.Index().List(t.Context(), ListQuery{Filter: tt.filter, Limit: 4, Cursor: page.Prev}); err != nil {
					t.Fatal(err)
				}
				if got := ids(page.Elicitations...); !slices.Equal(got, forward[i]) {
					t.Errorf("%s: page %d listed back is %v, forward it was %v", tt.name, i+1, got, forward[i])
				}
				if page.Next == "" {
					t.Errorf("%s: page %d listed back has no Next", tt.name, i+1)
				}
			}
			if page.Prev != "" {
				t.Errorf("%s: the first page listed back has a Prev", tt.name)
			}
		}
		for _, cursor := range []string{"PG5vdA", encodeCursor("<=1"), encodeCursor("<<" + indexEntry(all[0]))} {
			if _, err := s.Index().List(t.Context(), ListQuery{Cursor: cursor}); !errors.Is(err, ErrBadCursor) {
				t.Errorf("List with cursor %q: %v, want ErrBadCursor", cursor, err)
			}
		}
	})
}

// TestListPagesAnyWayAroundAsAWindowOfTheMatches walks listings at random, next and back
// with random limits, and checks each page against a model: the matches in order, of
// which every page is the window that its move asks for.
func TestListPagesAnyWayAroundAsAWindowOfTheMatches(t *testing.T) {
	b := redistest.StartEmbedded(t)
	clk := newClock()
	s := newStore(b, clk)
	rng := rand.New(rand.NewPCG(1, 2))
	var all []*Elicitation
	for range 60 {
		clk.Advance(time.Duration(rng.IntN(3)) * time.Millisecond) // some share a millisecond
		user := alice
		if rng.IntN(3) == 0 {
			user = bob
		}
		e := mustCreate(t, s, newElicitation(user))
		if rng.IntN(3) == 0 {
			if _, err := s.Apply(t.Context(), e.ID, CancelRequested, state.ActorUser, "test"); err != nil {
				t.Fatal(err)
			}
			e = mustGet(t, s, e.ID)
		}
		all = append(all, e)
	}
	for _, f := range []Filter{{}, {UserKey: alice.Key()}, {States: []State{Pending}}, {States: []State{Cancelled}}, {Subject: "bob"}} {
		var model []string // the IDs f selects, in listing order
		for _, e := range slices.SortedFunc(slices.Values(all), byEntry) {
			if f.match(e, clk.Now(), s.stuckAfter) {
				model = append(model, e.ID)
			}
		}
		exact := f.needsAttention() && f.UserKey == "" // counted, and ends known exactly
		limit := 1 + rng.IntN(7)
		page, err := s.Index().List(t.Context(), ListQuery{Filter: f, Limit: limit})
		if err != nil {
			t.Fatal(err)
		}
		start, end := 0, min(limit, len(model))
		for move := range 40 {
			if got := ids(page.Elicitations...); !slices.Equal(got, model[start:end]) {
				t.Fatalf("%+v, move %d: page %v, want %v (window %d:%d of %d)", f, move, got, model[start:end], start, end, len(model))
			}
			if end < len(model) && page.Next == "" || start > 0 && page.Prev == "" {
				t.Fatalf("%+v, move %d: window %d:%d of %d without a way on (next %q, prev %q)", f, move, start, end, len(model), page.Next, page.Prev)
			}
			if exact && (page.Next != "" && end == len(model) || page.Prev != "" && start == 0 || page.Total != len(model)) {
				t.Fatalf("%+v, move %d: window %d:%d of %d, next %q, prev %q, total %d", f, move, start, end, len(model), page.Next, page.Prev, page.Total)
			}
			limit = 1 + rng.IntN(7)
			q := ListQuery{Filter: f, Limit: limit}
			switch back := rng.IntN(2) == 0; {
			case back && page.Prev != "":
				q.Cursor, end = page.Prev, start
				start = max(0, end-limit)
			case !back && page.Next != "":
				q.Cursor, start = page.Next, end
				end = min(len(model), start+limit)
			default:
				continue // the page it would move to does not exist; try another move
			}
			if page, err = s.Index().List(t.Context(), q); err != nil {
				t.Fatal(err)
			}
		}
	}
}
