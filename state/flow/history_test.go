package flow

import (
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/urlflow/urlflow/internal/redistest"
	"github.com/urlflow/urlflow/state"
)

// refused is the reason of a page view by another user, as web records it.
func refused(who string) string { return "refused: opened by " + who }

// longElicitation is an elicitation whose deadline outlasts a flood of events a second apart.
func longElicitation(user state.User) NewElicitation {
	n := newElicitation(user)
	n.TTL = 24 * time.Hour
	return n
}

func TestRepeatedEventsCollapseIntoOneEntryWithACount(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		clk := newClock()
		s := newStore(b, clk)
		e := mustCreate(t, s, longElicitation(alice))
		created := clk.Now()
		first := created.Add(time.Second)
		const views = 300
		for range views {
			clk.Advance(time.Second)
			applyWith(t, s, e.ID, OtherUserOpened, state.ActorOther, refused("bob"))
		}
		last := clk.Now()

		want := []Entry{
			{At: created, Event: Created, Actor: state.ActorClient, To: Pending, Reason: e.Purpose},
			{At: first, Event: OtherUserOpened, Actor: state.ActorOther, From: Pending, To: Pending, Reason: refused("bob"),
				Count: views, LastAt: last},
		}
		if got := mustHistory(t, s, e.ID); !reflect.DeepEqual(got, want) {
			t.Fatalf("History has %d entries, starting\n%+v\nwant\n%+v", len(got), got[:min(len(got), 3)], want)
		}

		// Only an event identical to the newest entry but for its time counts on it: another
		// reason, actor, event or state is an entry of its own, and so is the next repetition
		// of an older entry.
		clk.Advance(time.Second)
		applyWith(t, s, e.ID, OtherUserOpened, state.ActorOther, refused("carol"))
		applyWith(t, s, e.ID, OtherUserOpened, state.ActorOther, refused("bob"))
		applyWith(t, s, e.ID, OtherUserOpened, state.ActorUser, refused("bob"))
		applyWith(t, s, e.ID, LatePost, state.ActorUser, refused("bob"))
		applyWith(t, s, e.ID, BrowserOpen, state.ActorUser, "opened")
		applyWith(t, s, e.ID, BrowserOpen, state.ActorUser, "opened") // in_progress to in_progress, unlike the first
		applyWith(t, s, e.ID, BrowserOpen, state.ActorUser, "opened")
		h := mustHistory(t, s, e.ID)
		var got []string
		for _, en := range h[2:] {
			got = append(got, fmt.Sprintf("%s by %s %s->%s %q x%d", en.Event, en.Actor, en.From, en.To, en.Reason, max(en.Count, 1)))
		}
		wantTail := []string{
			`other_user_opened by other_user pending->pending "refused: opened by carol" x1`,
			`other_user_opened by other_user pending->pending "refused: opened by bob" x1`,
			`other_user_opened by user pending->pending "refused: opened by bob" x1`,
			`late_post by user pending->pending "refused: opened by bob" x1`,
			`browser_open by user pending->in_progress "opened" x1`,
			`browser_open by user in_progress->in_progress "opened" x2`,
		}
		if !reflect.DeepEqual(got, wantTail) {
			t.Errorf("history after the collapsed entry:\n%q\nwant\n%q", got, wantTail)
		}
	})
}

func TestRacingIdenticalEventsAreAllCounted(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		s := newStore(b, nil)
		e := mustCreate(t, s, newElicitation(alice))
		const racers = 40
		var wg sync.WaitGroup
		for range racers {
			wg.Go(func() {
				if _, err := s.Apply(t.Context(), e.ID, OtherUserOpened, state.ActorOther, refused("bob")); err != nil {
					t.Errorf("Apply: %v", err)
				}
			})
		}
		wg.Wait()
		h := mustHistory(t, s, e.ID)
		if len(h) != 2 || h[1].Event != OtherUserOpened || h[1].Count != racers {
			t.Errorf("history has %d entries, the second %+v; want created and one other_user_opened counted %d times",
				len(h), h[min(1, len(h)-1)], racers)
		}
	})
}

// A flood of events that differ (each a page view by someone else) keeps the history's first
// entries and its newest, and one entry between them counts what was dropped: the status
// answer stays small however long the flood.
func TestHistoryKeepsItsFirstAndNewestEntriesAndCountsTheDropped(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		clk := newClock()
		s := newStore(b, clk)
		e := mustCreate(t, s, longElicitation(alice))
		const flood = 1500
		at := make([]time.Time, flood)
		for i := range flood {
			clk.Advance(time.Second)
			at[i] = clk.Now()
			applyWith(t, s, e.ID, OtherUserOpened, state.ActorOther, refused(fmt.Sprintf("user-%d", i)))
		}
		// The newest entry counts on itself (so it is not dropped) and then the flow moves.
		applyWith(t, s, e.ID, OtherUserOpened, state.ActorOther, refused(fmt.Sprintf("user-%d", flood-1)))
		clk.Advance(time.Second)
		mustApply(t, s, e.ID, CancelRequested, state.ActorUser)

		h := mustHistory(t, s, e.ID)
		if len(h) != HistoryFirst+1+HistoryNewest {
			t.Fatalf("history has %d entries, want %d first, one for the dropped, %d newest", len(h), HistoryFirst, HistoryNewest)
		}
		if h[0].Event != Created {
			t.Errorf("first entry %+v, want created", h[0])
		}
		for i := 1; i < HistoryFirst; i++ {
			if want := refused(fmt.Sprintf("user-%d", i-1)); h[i].Reason != want || !h[i].At.Equal(at[i-1]) {
				t.Errorf("entry %d: %+v, want %q at %v", i, h[i], want, at[i-1])
			}
		}
		// Kept: created and the first HistoryFirst-1 page views, the newest HistoryNewest-1
		// page views and the cancel. Dropped: every page view between them.
		dropped := flood - (HistoryFirst - 1) - (HistoryNewest - 1)
		firstDropped, lastDropped := at[HistoryFirst-1], at[HistoryFirst-1+dropped-1]
		want := Entry{At: firstDropped, LastAt: lastDropped, Event: HistoryDropped, Actor: state.ActorSystem,
			From: Pending, To: Pending, Reason: droppedReason, Count: dropped}
		if got := h[HistoryFirst]; !reflect.DeepEqual(got, want) {
			t.Errorf("entry %d =\n%+v\nwant\n%+v", HistoryFirst, got, want)
		}
		newest := h[HistoryFirst+1:]
		for i, en := range newest[:len(newest)-1] {
			n := flood - (HistoryNewest - 1) + i
			if want := refused(fmt.Sprintf("user-%d", n)); en.Reason != want || !en.At.Equal(at[n]) {
				t.Errorf("newest entry %d: %+v, want %q at %v", i, en, want, at[n])
			}
		}
		if c := newest[len(newest)-2]; c.Count != 2 {
			t.Errorf("the last page view is counted %d times, want 2", c.Count)
		}
		if last := newest[len(newest)-1]; last.Event != CancelRequested || last.To != Cancelled {
			t.Errorf("newest entry %+v, want the cancel", last)
		}

		view, err := json.Marshal(mustGet(t, s, e.ID).View(ElicitationURL(&url.URL{Scheme: "https", Host: "urlflow.example"}, e.ID), h))
		if err != nil {
			t.Fatal(err)
		}
		if len(view) > 32<<10 {
			t.Errorf("the status answer is %d bytes, want at most 32 KiB", len(view))
		}
		t.Logf("status answer after %d page views: %d bytes", flood, len(view))
	})
}

// applyWith applies ev with reason and wants it to succeed.
func applyWith(t testing.TB, s *Store, id string, ev Event, actor state.Actor, reason string) Change {
	t.Helper()
	c, err := s.Apply(t.Context(), id, ev, actor, reason)
	if err != nil {
		t.Fatalf("Apply(%s): %v", ev, err)
	}
	return c
}

// A history written before it had a cap, longer than the cap, is capped by its next event.
func TestALongerHistoryFromBeforeTheCapIsCappedByItsNextEvent(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		clk := newClock()
		s := newStore(b, clk)
		e := mustCreate(t, s, longElicitation(alice))
		const old = 300
		var lines []any
		for i := range old {
			// Written as the entries were before they had a count: at first.
			line := fmt.Sprintf(`{"at":%q,"event":"other_user_opened","actor":"other_user","from":"pending","to":"pending","reason":%q}`,
				clk.Now().Add(time.Duration(i+1)*time.Second).Format(time.RFC3339Nano), refused(fmt.Sprint("user-", i)))
			lines = append(lines, line)
		}
		if err := b.Client.RPush(t.Context(), historyKey(alice.Key(), e.ID), lines...).Err(); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Hour)
		mustApply(t, s, e.ID, CancelRequested, state.ActorUser)

		h := mustHistory(t, s, e.ID)
		if len(h) != HistoryFirst+1+HistoryNewest {
			t.Fatalf("history has %d entries, want %d", len(h), HistoryFirst+1+HistoryNewest)
		}
		// Kept: created, the first HistoryFirst-1 old entries, the newest HistoryNewest-1 and
		// the cancel.
		dropped := old - (HistoryFirst - 1) - (HistoryNewest - 1)
		mark := h[HistoryFirst]
		if mark.Event != HistoryDropped || mark.Count != dropped || mark.From != Pending || mark.To != Pending ||
			!mark.At.Equal(newClock().Now().Add(HistoryFirst*time.Second)) ||
			!mark.LastAt.Equal(newClock().Now().Add(time.Duration(HistoryFirst-1+dropped)*time.Second)) {
			t.Errorf("entry %d = %+v, want the %d dropped entries", HistoryFirst, mark, dropped)
		}
		if h[HistoryFirst-1].Reason != refused("user-8") || h[HistoryFirst+1].Reason != refused(fmt.Sprint("user-", old-HistoryNewest+1)) ||
			h[len(h)-1].Event != CancelRequested {
			t.Errorf("history around the dropped entry: %+v, %+v; newest %+v", h[HistoryFirst-1], h[HistoryFirst+1], h[len(h)-1])
		}
	})
}
