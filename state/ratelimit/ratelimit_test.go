package ratelimit

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
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
			return s.Allow(u, what, limit)
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
			if d := s.Allow(alice, "mcp", off); !d.Allowed {
				t.Errorf("limit %+v refused", off)
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

func TestReplicasShareTheirCountsAtEachSync(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		now := time.Date(2026, 3, 1, 12, 0, 10, 0, time.UTC)
		clk := func() time.Time { return now }
		one, two := NewLimiter(b.Client, clk), NewLimiter(b.Client, clk)
		limit := Limit{Events: 4, Window: time.Minute}
		allowed := func(r *Limiter) bool {
			t.Helper()
			return r.Allow(alice, "mcp", limit).Allowed
		}
		sync := func(r *Limiter) {
			t.Helper()
			if err := r.Sync(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		for range 3 {
			if !allowed(one) {
				t.Fatal("an event within the limit was refused")
			}
		}
		sync(one)
		if !allowed(two) {
			t.Fatal("the fourth event, on the second replica, was refused")
		}
		sync(two) // adds its event and reads the total: four
		if allowed(two) {
			t.Error("the fifth event was allowed after the second replica read the total of both")
		}
		sync(two)
		sync(one) // nothing new from the first replica: it reads nothing either
		if !allowed(one) {
			t.Error("the first replica refused before it learnt the others' counts: it should allow until its next sync")
		}
		sync(one)
		if allowed(one) {
			t.Error("the first replica allowed an event after its sync read a total over the limit")
		}
		sync(one)
		if n, err := b.Client.Get(t.Context(), key(alice.Key(), "mcp", now.UnixMilli()/limit.Window.Milliseconds())).Int(); err != nil || n != 7 {
			t.Errorf("the shared count is %d, %v; want every event of both replicas, 7", n, err)
		}
	})
}

func TestACountThatCannotBeSharedIsKeptForTheNextSync(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		r := NewLimiter(b.Client, nil)
		limit := Limit{Events: 100, Window: time.Hour}
		for range 2 {
			r.Allow(alice, "form", limit)
		}
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := r.Sync(ctx); err == nil {
			t.Fatal("a sync that could not reach Redis reported no error")
		}
		if err := r.Sync(t.Context()); err != nil {
			t.Fatal(err)
		}
		k := key(alice.Key(), "form", time.Now().UnixMilli()/limit.Window.Milliseconds())
		if n, err := b.Client.Get(t.Context(), k).Int(); err != nil || n != 2 {
			t.Errorf("the shared count is %d, %v; want both events, added at the sync that worked", n, err)
		}
		if ttl := b.Client.PTTL(t.Context(), k).Val(); ttl <= 0 || ttl > limit.Window+time.Minute {
			t.Errorf("the count lives %v, want at most the window and a minute", ttl)
		}
	})
}

// duringPipeline is a go-redis hook that runs fn while a pipeline is on its way.
type duringPipeline struct{ fn func() }

func (h duringPipeline) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h duringPipeline) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h duringPipeline) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.fn()
		return next(ctx, cmds)
	}
}

func TestEventsCountedDuringASyncStillCount(t *testing.T) {
	rdb := redistest.StartEmbedded(t).Client
	r := NewLimiter(rdb, nil)
	limit := Limit{Events: 3, Window: time.Hour}
	for range 2 {
		r.Allow(alice, "mcp", limit)
	}
	during := 0
	rdb.AddHook(duringPipeline{fn: func() {
		if during == 0 && !r.Allow(alice, "mcp", limit).Allowed { // the third event, while the first two are sent
			t.Error("the third event was refused")
		}
		during++
	}})
	if err := r.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if r.Allow(alice, "mcp", limit).Allowed {
		t.Error("the fourth event was allowed: the one counted during the sync was lost")
	}
}

// pipelineGate holds the first pipeline until release is closed, and says so on held.
type pipelineGate struct {
	held, release chan struct{}
	once          *sync.Once
}

func (g pipelineGate) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (g pipelineGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (g pipelineGate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		g.once.Do(func() {
			g.held <- struct{}{}
			<-g.release
		})
		return next(ctx, cmds)
	}
}

// On one replica a limit is exact, also while a sync is on its way: the events it carries
// to Redis are counted until Redis has them. (A sync in flight once let a third form post
// through a limit of two.)
func TestEventsOnTheirWayToRedisStillCount(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	gate := pipelineGate{held: make(chan struct{}), release: make(chan struct{}), once: &sync.Once{}}
	rdb.AddHook(gate)
	l := NewLimiter(rdb, nil)
	limit := Limit{Events: 2, Window: time.Hour}
	if !l.Allow(alice, "forms", limit).Allowed {
		t.Fatal("the first event was refused")
	}
	synced := make(chan error, 1)
	go func() { synced <- l.Sync(context.Background()) }()
	<-gate.held // the first event is on its way
	if !l.Allow(alice, "forms", limit).Allowed {
		t.Fatal("the second event was refused")
	}
	if d := l.Allow(alice, "forms", limit); d.Allowed {
		t.Error("the third event was allowed while the first was on its way to Redis")
	}
	close(gate.release)
	if err := <-synced; err != nil {
		t.Fatal(err)
	}
	if d := l.Allow(alice, "forms", limit); d.Allowed {
		t.Error("the fourth event was allowed after the sync")
	}
}
