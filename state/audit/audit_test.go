package audit

import (
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/urlflow/urlflow/internal/redistest"
	"github.com/urlflow/urlflow/state"
)

var quiet = slog.New(slog.DiscardHandler)

func events(t *testing.T, tr *Trail) []Event {
	t.Helper()
	all, err := tr.Read(t.Context(), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	return all
}

func TestEventsOfEveryBucketAreExportedInTimeOrder(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		tr := New(b.Client, Options{Logger: quiet, Replica: "replica-a"})
		for i := range 40 {
			tr.Record(t.Context(), Event{Event: Transition, Elicitation: fmt.Sprintf("E%02d", i), To: "pending"})
		}
		all := events(t, tr)
		if len(all) != 40 {
			t.Fatalf("exported %d events, want 40", len(all))
		}
		var ids []string
		buckets := map[string]bool{}
		for _, e := range all {
			ids = append(ids, e.Elicitation)
			buckets[e.ID[:len("{audit:0}")]] = true
			if e.Replica != "replica-a" || e.At.IsZero() {
				t.Errorf("event not stamped: %+v", e)
			}
		}
		if !slices.IsSorted(ids) || len(buckets) < 4 {
			t.Errorf("exported %v from %d buckets, want the order they were written in, from several buckets", ids, len(buckets))
		}

		// since and until select by when the trail received them, by Redis's clock: the
		// embedded Redis moves its clock once a second.
		time.Sleep(1100 * time.Millisecond)
		mid := time.Now()
		time.Sleep(1100 * time.Millisecond)
		tr.Record(t.Context(), Event{Event: SignedIn, Actor: state.ActorUser}.About(state.User{Issuer: "https://id.example", Subject: "alice"}))
		later, err := tr.Read(t.Context(), mid)
		if err != nil || len(later) != 1 || later[0].Event != SignedIn || later[0].User.Subject != "alice" || later[0].UserKey == "" {
			t.Errorf("since the middle: %+v, %v; want only the sign-in", later, err)
		}
		var before []Event
		tr.Export(t.Context(), time.Time{}, mid, func(e Event) error { before = append(before, e); return nil })
		if len(before) != 40 {
			t.Errorf("until the middle: %d events, want 40", len(before))
		}
	})
}

func TestRepeatedEventsAreWrittenOnceAndThenCounted(t *testing.T) {
	b := redistest.StartEmbedded(t)
	tr := New(b.Client, Options{Logger: quiet})
	refused := Event{Event: IdentityRefused, Address: "192.0.2.1", Reason: "bearer token not valid: expired"}
	for range 100 {
		tr.Repeated(t.Context(), refused)
	}
	tr.Repeated(t.Context(), Event{Event: RateLimited, Reason: "over the mcp rate limit"})
	if got := events(t, tr); len(got) != 0 {
		t.Fatalf("%d events written before the next write, want them waiting", len(got))
	}
	tr.writeLater(t.Context())
	if got := events(t, tr); len(got) != 2 {
		t.Fatalf("before the window ends: %d events, want the first of each", len(got))
	}
	tr.Flush(t.Context())
	got := events(t, tr)
	if len(got) != 3 || got[2].Event != IdentityRefused || got[2].Count != 99 || got[2].LastAt.Before(got[2].At) {
		t.Fatalf("after the window: %+v, want a third event counting the 99 repeats", got)
	}
	tr.Flush(t.Context()) // nothing more was repeated
	tr.Repeated(t.Context(), refused)
	tr.writeLater(t.Context())
	if n := len(events(t, tr)); n != 4 {
		t.Errorf("in the next window: %d events, want the first repeat written again (4)", n)
	}
}

func TestAFloodOfDistinctEventsIsCountedByEvent(t *testing.T) {
	b := redistest.StartEmbedded(t)
	tr := New(b.Client, Options{Logger: quiet})
	for i := range repeatKinds + 500 {
		tr.Repeated(t.Context(), Event{Event: IdentityRefused, Address: fmt.Sprintf("10.0.%d.%d", i/256, i%256)})
	}
	tr.Flush(t.Context())
	got := events(t, tr)
	if len(got) > repeatKinds+2 {
		t.Fatalf("%d events for %d distinct refusals, want at most %d", len(got), repeatKinds+500, repeatKinds+2)
	}
	last := got[len(got)-1]
	if last.Count != 499 || last.Address != "" {
		t.Errorf("the flood past the bound is counted as %+v, want one event counting 499 more", last)
	}
}

func TestTheTrailIsTrimmedToItsLength(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		tr := New(b.Client, Options{Logger: quiet, MaxEntries: Buckets * 10})
		for i := range 2000 {
			tr.Later(t.Context(), Event{Event: SignedIn, UserKey: fmt.Sprint(i)})
		}
		tr.writeLater(t.Context())
		tr.trimLength(t.Context())
		// Trimming is approximate: whole nodes of the stream (100 entries) go at once.
		if n := len(events(t, tr)); n >= 2000 || n > Buckets*(10+100) {
			t.Errorf("%d events left of 2000, want about %d", n, Buckets*10)
		}
	})
}
