package ratelimit

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/urlflow/urlflow/internal/redistest"
	"github.com/urlflow/urlflow/state"
)

func TestParseLimit(t *testing.T) {
	for in, want := range map[string]Limit{
		"600/1m": {600, time.Minute}, "5/30s": {5, 30 * time.Second}, "1/24h": {1, 24 * time.Hour}, "off": {},
	} {
		if got, err := ParseLimit(in); err != nil || got != want {
			t.Errorf("ParseLimit(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "600", "0/1m", "-1/1m", "x/1m", "5/0s", "5/500ms", "5/1.5s", "5/48h", "5/minute"} {
		if l, err := ParseLimit(in); err == nil {
			t.Errorf("ParseLimit(%q) = %v, want an error", in, l)
		}
	}
}

var (
	alice = state.User{Issuer: "https://id.example", Subject: "alice"}
	bob   = state.User{Issuer: "https://id.example", Subject: "bob"}
)

func TestAllowCountsPerUserKindAndWindow(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		now := time.Date(2026, 3, 1, 12, 0, 10, 0, time.UTC) // the window ends in 50s
		var mu sync.Mutex
		clk := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
		s := NewLimiter(b.Client, clk)
		limit := Limit{Events: 3, Window: time.Minute}
		allow := func(u state.User, what string) Decision {
			t.Helper()
			d, err := s.Allow(t.Context(), u, what, limit)
			if err != nil {
				t.Fatal(err)
			}
			return d
		}
		for i := range 3 {
			if d := allow(alice, "mcp"); !d.Allowed {
				t.Fatalf("event %d of 3 refused", i+1)
			}
		}
		if d := allow(alice, "mcp"); d != (Decision{RetryAfter: 50 * time.Second, FirstRefusal: true}) {
			t.Fatalf("the fourth event: %+v; want the first refusal, for 50s", d)
		}
		advance(20 * time.Second)
		if d := allow(alice, "mcp"); d != (Decision{RetryAfter: 30 * time.Second}) {
			t.Fatalf("the fifth event: %+v; want a refusal for 30s, not the first", d)
		}
		if d := allow(bob, "mcp"); !d.Allowed {
			t.Error("another user's event was refused")
		}
		if d := allow(alice, "page"); !d.Allowed {
			t.Error("another kind of event was refused")
		}
		advance(30 * time.Second)
		if d := allow(alice, "mcp"); !d.Allowed {
			t.Error("the first event of the next window was refused")
		}
		for _, off := range []Limit{{}, {Events: 5}, {Window: time.Minute}} {
			if d, err := s.Allow(t.Context(), alice, "mcp", off); !d.Allowed || err != nil {
				t.Errorf("limit %+v refused: %v", off, err)
			}
		}
	})
}

func FuzzParseLimit(f *testing.F) {
	for _, seed := range []string{"600/1m", "off", "5/30s", "0/1m", "1/24h", "9999999999999999999/1s", "5/1.5s", "/", ""} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseLimit(s)
		if err != nil || l.Off() {
			return
		}
		if l.Events < 1 || l.Window < time.Second || l.Window > 24*time.Hour || l.Window%time.Second != 0 {
			t.Fatalf("ParseLimit(%q) accepted %+v", s, l)
		}
		again, err := ParseLimit(fmt.Sprintf("%d/%s", l.Events, l.Window))
		if err != nil || again != l {
			t.Fatalf("ParseLimit(%q) = %+v does not read back: %+v, %v", s, l, again, err)
		}
	})
}
