package expiring

import (
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestAValueIsKeptUntilItsExpiry(t *testing.T) {
	m := New[string, int](10)
	m.Set("a", 1, t0.Add(time.Minute), t0)
	if v, ok := m.Get("a", t0.Add(time.Minute-time.Nanosecond)); !ok || v != 1 {
		t.Fatalf("before the expiry: %v %v", v, ok)
	}
	if _, ok := m.Get("a", t0.Add(time.Minute)); ok {
		t.Fatal("a value was returned at its expiry")
	}
	if m.Len() != 0 {
		t.Fatalf("an expired value that was looked up is still held: %d", m.Len())
	}
}

func TestAFullMapDropsTheExpiredThenTheOldest(t *testing.T) {
	m := New[int, int](3)
	m.Set(1, 1, t0.Add(time.Second), t0)
	m.Set(2, 2, t0.Add(time.Hour), t0)
	m.Set(3, 3, t0.Add(time.Hour), t0)
	// 1 expired: it makes room, and nothing else goes.
	m.Set(4, 4, t0.Add(time.Hour), t0.Add(2*time.Second))
	for k, want := range map[int]bool{1: false, 2: true, 3: true, 4: true} {
		if _, ok := m.Get(k, t0.Add(2*time.Second)); ok != want {
			t.Errorf("key %d held: %v, want %v", k, ok, want)
		}
	}
	// Full of live values: the one set longest ago goes.
	m.Set(5, 5, t0.Add(time.Hour), t0.Add(2*time.Second))
	if _, ok := m.Get(2, t0.Add(2*time.Second)); ok {
		t.Error("the oldest value was kept in a full map")
	}
	if m.Len() != 3 {
		t.Errorf("the map holds %d values, want at most 3", m.Len())
	}
}

func TestSettingAKeyAgainReplacesItsValueAndAge(t *testing.T) {
	m := New[string, int](2)
	m.Set("a", 1, t0.Add(time.Hour), t0)
	m.Set("b", 2, t0.Add(time.Hour), t0)
	m.Set("a", 3, t0.Add(time.Hour), t0)
	m.Set("c", 4, t0.Add(time.Hour), t0) // b is now the oldest
	if v, ok := m.Get("a", t0); !ok || v != 3 {
		t.Errorf("a = %v %v, want 3", v, ok)
	}
	if _, ok := m.Get("b", t0); ok {
		t.Error("b was kept; the key set again was dropped instead")
	}
	m.Delete("a")
	if _, ok := m.Get("a", t0); ok || m.Len() != 1 {
		t.Errorf("after Delete: held %v, %d values", ok, m.Len())
	}
}

func TestPruneDropsTheExpiredWithoutASet(t *testing.T) {
	now := time.Unix(1000, 0)
	m := New[string, int](10)
	m.Set("a", 1, now.Add(time.Second), now)
	m.Set("b", 2, now.Add(time.Minute), now)
	if n := m.Prune(now.Add(2 * time.Second)); n != 1 || m.Len() != 1 {
		t.Fatalf("pruned %d, %d left; want 1 and 1", n, m.Len())
	}
	if _, ok := m.Get("b", now.Add(2*time.Second)); !ok {
		t.Fatal("b, not expired, was dropped")
	}
}
