package authorizations

import (
	"errors"
	"testing"
	"time"

	"github.com/urlflow/urlflow/internal/redistest"
	"github.com/urlflow/urlflow/state"
)

func TestAnAttemptIsTakenOnce(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		s, ctx := New(b.Client), t.Context()
		a := Attempt{ElicitationID: "E1", BrowserSession: "bs", Provider: "acme", Verifier: "v", Scopes: []string{"read"},
			StartedAt: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
		if err := s.Save(ctx, "state-1", a, time.Minute); err != nil {
			t.Fatal(err)
		}
		got, err := s.Take(ctx, "state-1")
		if err != nil || got.ElicitationID != "E1" || got.Verifier != "v" || !got.StartedAt.Equal(a.StartedAt) || len(got.Scopes) != 1 {
			t.Fatalf("Take = %+v, %v", got, err)
		}
		if _, err := s.Take(ctx, "state-1"); !errors.Is(err, state.ErrNotFound) {
			t.Fatalf("a second Take = %v, want ErrNotFound: a state is spent once", err)
		}
		if ttl := b.Client.TTL(ctx, key("state-2")).Val(); ttl > 0 {
			t.Fatalf("a key for nothing saved: %v", ttl)
		}
		if err := s.Save(ctx, "state-2", a, time.Minute); err != nil {
			t.Fatal(err)
		}
		if ttl := b.Client.TTL(ctx, key("state-2")).Val(); ttl <= 0 || ttl > time.Minute {
			t.Errorf("an attempt lives %v, want at most a minute", ttl)
		}
	})
}
