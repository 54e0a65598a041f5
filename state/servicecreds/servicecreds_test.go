package servicecreds

import (
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/internal/redistest"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/credentials"
)

func TestMain(m *testing.M) {
	redistest.SetParallel(4)
	os.Exit(m.Run())
}

// store stores target for user at service at storedAt, and indexes it as the step that
// completes its flow does.
func store(t *testing.T, b *redistest.Backend, x *Index, user state.User, service, target string, storedAt time.Time) {
	t.Helper()
	c := &credentials.Credential{Name: credentials.Name(service, target), Kind: state.KindSecret, ElicitationID: "E", StoredAt: storedAt}
	if _, err := b.Client.Pipelined(t.Context(), func(p redis.Pipeliner) error { return credentials.Queue(t.Context(), p, user, c) }); err != nil {
		t.Fatal(err)
	}
	doc := fmt.Appendf(nil, `{"iss":%q,"sub":%q}`, user.Issuer, user.Subject)
	if _, err := b.Client.Pipelined(t.Context(), func(p redis.Pipeliner) error {
		x.add(t.Context(), p, credentials.Change{Type: credentials.ChangeStored, User: user, Credential: c}, doc)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func user(name string) state.User { return state.User{Issuer: "https://id.example", Subject: name} }

func everything(Entry) bool { return true }

// listAll pages through service's credentials that keep passes, limit at a time.
func listAll(t *testing.T, x *Index, service string, limit int, keep func(Entry) bool) []string {
	t.Helper()
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		page, err := x.List(t.Context(), service, cursor, limit, keep)
		if err != nil || pages > 1000 {
			t.Fatalf("list: %v (page %d)", err, pages)
		}
		for _, e := range page.Entries {
			got = append(got, e.User.Subject+"/"+e.Target)
		}
		if page.Next == "" {
			return got
		}
		cursor = page.Next
	}
}

func TestAServiceListsWhatItHoldsOldestFirstAndDeletedCredentialsLeave(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		x := New(b.Client, nil)
		creds := credentials.NewStore(b.Client, credentials.Options{Logger: slog.New(slog.DiscardHandler), Lifecycles: []credentials.Lifecycle{x}})
		t0 := time.Now().UTC()
		store(t, b, x, user("bob"), "weather", "key", t0.Add(2*time.Second))
		store(t, b, x, user("alice"), "weather", "key", t0)
		store(t, b, x, user("alice"), "weather", "github", t0.Add(time.Second))
		store(t, b, x, user("alice"), "calendar", "key", t0)
		store(t, b, x, user("carol"), "weather", "key", t0.Add(3*time.Second))

		want := []string{"alice/key", "alice/github", "bob/key", "carol/key"}
		for _, limit := range []int{1, 2, 3, 10} {
			if got := listAll(t, x, "weather", limit, everything); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("pages of %d: %v, want %v", limit, got, want)
			}
		}
		keys := func(e Entry) bool { return e.Target == "key" }
		if got := listAll(t, x, "weather", 1, keys); fmt.Sprint(got) != "[alice/key bob/key carol/key]" {
			t.Errorf("only key: %v", got)
		}
		if _, err := x.List(t.Context(), "weather", "nope", 1, everything); err != ErrBadCursor {
			t.Errorf("a bad cursor: %v", err)
		}

		// Deleted through the store: it leaves. Gone behind the index's back: dropped when read.
		if _, err := creds.Delete(t.Context(), user("bob"), credentials.Name("weather", "key"), state.ActorService, "gone"); err != nil {
			t.Fatal(err)
		}
		b.Client.Del(t.Context(), credentials.Key(user("carol").Key(), credentials.Name("weather", "key")))
		if got := listAll(t, x, "weather", 10, everything); fmt.Sprint(got) != "[alice/key alice/github]" {
			t.Errorf("after the deletions: %v", got)
		}
		if n := b.Client.ZCard(t.Context(), orderKey("weather")).Val(); n != 2 {
			t.Errorf("the index keeps %d entries, want 2", n)
		}
	})
}

func TestManyCredentialsStoredInOneMillisecondArePagedThroughOnce(t *testing.T) {
	t.Parallel()
	b := redistest.StartEmbedded(t)
	x := New(b.Client, nil)
	at := time.Now().UTC()
	for i := range 2*batch + 50 {
		store(t, b, x, user(fmt.Sprintf("u%03d", i)), "weather", "key", at)
	}
	got := listAll(t, x, "weather", 30, everything)
	seen := map[string]bool{}
	for _, g := range got {
		seen[g] = true
	}
	if len(got) != 2*batch+50 || len(seen) != len(got) {
		t.Errorf("listed %d (%d distinct), want %d once each", len(got), len(seen), 2*batch+50)
	}
}
