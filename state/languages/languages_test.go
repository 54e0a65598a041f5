package languages

import (
	"testing"
	"time"

	"github.com/urlflow/urlflow/internal/redistest"
	"github.com/urlflow/urlflow/state"
)

func TestALanguageIsReadWhereItWasRememberedAndChangesReachOtherReplicasWithinAMinute(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		ada := state.User{Issuer: "https://id.example", Subject: "ada"}
		pages, mcp := New(b.Client), New(b.Client) // two replicas
		now := time.Now()
		pages.now = func() time.Time { return now }
		mcp.now = func() time.Time { return now }

		if lang, err := mcp.Of(ctx, ada); err != nil || lang != "" {
			t.Fatalf("a user who never read the pages: %q, %v; want none", lang, err)
		}
		if err := pages.Remember(ctx, ada, "de"); err != nil {
			t.Fatal(err)
		}
		if lang, _ := mcp.Of(ctx, ada); lang != "" {
			t.Errorf("within the minute, the other replica read %q; want its cached none", lang)
		}
		now = now.Add(Cached + time.Second)
		if lang, err := mcp.Of(ctx, ada); err != nil || lang != "de" {
			t.Errorf("after the minute: %q, %v; want de", lang, err)
		}
		if ttl := b.Client.TTL(ctx, key(ada)).Val(); ttl < Kept-time.Minute {
			t.Errorf("kept for %v, want %v", ttl, Kept)
		}
		if lang, _ := New(b.Client).Of(ctx, state.User{Issuer: "https://id.example", Subject: "bob"}); lang != "" {
			t.Errorf("another user read %q", lang)
		}
	})
}

func TestTheSameLanguageIsWrittenOnceAMinute(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		ada := state.User{Issuer: "https://id.example", Subject: "ada"}
		s := New(b.Client)
		if err := s.Remember(ctx, ada, "fr"); err != nil {
			t.Fatal(err)
		}
		b.Client.Del(ctx, key(ada)) // a write now would bring it back
		if err := s.Remember(ctx, ada, "fr"); err != nil {
			t.Fatal(err)
		}
		if n := b.Client.Exists(ctx, key(ada)).Val(); n != 0 {
			t.Errorf("the same language was written again within the minute")
		}
		if err := s.Remember(ctx, ada, "ja"); err != nil {
			t.Fatal(err)
		}
		if got := b.Client.Get(ctx, key(ada)).Val(); got != "ja" {
			t.Errorf("a change of language was not written: %q", got)
		}
	})
}
