package state

import (
	"fmt"
	"testing"
	"time"
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

func TestAllowCountsPerUserKindAndWindow(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *backend) {
		clk := newClock()
		clk.Advance(10 * time.Second) // 12:00:10, so that the window ends in 50s
		s := newStore(b, clk)
		limit := Limit{Events: 3, Window: time.Minute}
		allow := func(u User, what string) (bool, time.Duration) {
			t.Helper()
			ok, retry, err := s.Allow(t.Context(), u, what, limit)
			if err != nil {
				t.Fatal(err)
			}
			return ok, retry
		}
		for i := range 3 {
			if ok, _ := allow(alice, "mcp"); !ok {
				t.Fatalf("event %d of 3 refused", i+1)
			}
		}
		if ok, retry := allow(alice, "mcp"); ok || retry != 50*time.Second {
			t.Fatalf("the fourth event: allowed %v, retry after %s; want refused for 50s", ok, retry)
		}
		if ok, _ := allow(bob, "mcp"); !ok {
			t.Error("another user's event was refused")
		}
		if ok, _ := allow(alice, "page"); !ok {
			t.Error("another kind of event was refused")
		}
		clk.Advance(50 * time.Second)
		if ok, _ := allow(alice, "mcp"); !ok {
			t.Error("the first event of the next window was refused")
		}
		if ok, _, err := s.Allow(t.Context(), alice, "mcp", Limit{}); !ok || err != nil {
			t.Errorf("the zero limit refused: %v", err)
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
