package counters

import (
	"context"
	"log/slog"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/urlflow/urlflow/internal/redistest"
)

func TestCountersAddUpAcrossCallsAndReadBackWithTheirLabels(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		c := New(b.Client, slog.New(slog.DiscardHandler))
		c.Add(t.Context(), "urlflow_phishing_refusals_total")
		c.Add(t.Context(), "urlflow_phishing_refusals_total")
		c.Add(t.Context(), "urlflow_elicitation_transitions_total", "kind", "secret", "to", "complete")
		c.Add(t.Context(), "urlflow_odd_total", "what", `a "quoted", {braced} value`)
		b.Client.HSet(t.Context(), key, "not a series{", "7") // written by something else
		var nilCounters *Counters
		nilCounters.Add(t.Context(), "urlflow_phishing_refusals_total") // counts nothing, and does not fail

		all, err := c.All(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		want := []Counter{
			{Series: `urlflow_elicitation_transitions_total{kind="secret",to="complete"}`, Name: "urlflow_elicitation_transitions_total",
				Labels: []Label{{"kind", "secret"}, {"to", "complete"}}, Value: 1},
			{Series: `urlflow_odd_total{what="a \"quoted\", {braced} value"}`, Name: "urlflow_odd_total",
				Labels: []Label{{"what", `a "quoted", {braced} value`}}, Value: 1},
			{Series: "urlflow_phishing_refusals_total", Name: "urlflow_phishing_refusals_total", Value: 2},
		}
		if !slices.EqualFunc(all, want, func(a, b Counter) bool {
			return a.Series == b.Series && a.Name == b.Name && a.Value == b.Value && slices.Equal(a.Labels, b.Labels)
		}) {
			t.Fatalf("All = %+v\nwant %+v", all, want)
		}
	})
}

func TestEachReplicaWritesItsCountsInOneRoundTripAndLosesNone(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		a, other := New(b.Client, slog.New(slog.DiscardHandler)), New(b.Client, slog.New(slog.DiscardHandler))
		for range 3 {
			a.Add(ctx, "urlflow_x_total", "k", "v")
		}
		other.Add(ctx, "urlflow_x_total", "k", "v")
		if n := b.Client.HLen(ctx, key).Val(); n != 0 {
			t.Fatalf("Add wrote to Redis (%d fields); counting must cost no command", n)
		}
		// A replica reads its own counts at once; another's once that one has written them.
		if got := valueOf(t, a, `urlflow_x_total{k="v"}`); got != 3 {
			t.Fatalf("a reads %d, want its own 3", got)
		}
		if err := other.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if got := valueOf(t, a, `urlflow_x_total{k="v"}`); got != 4 {
			t.Fatalf("a reads %d after the other replica wrote, want 4", got)
		}

		// Run writes on its own, and once more when it stops.
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { a.Run(runCtx); close(done) }()
		a.Add(ctx, "urlflow_x_total", "k", "v")
		stop()
		<-done
		if got, _ := b.Client.HGet(ctx, key, `urlflow_x_total{k="v"}`).Int64(); got != 5 {
			t.Fatalf("Redis holds %d after Run stopped, want 5", got)
		}
	})
}

func TestCountsThatCouldNotBeWrittenAreWrittenLater(t *testing.T) {
	rs := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	c := New(rdb, slog.New(slog.DiscardHandler))
	c.Add(t.Context(), "urlflow_x_total")
	rs.Stop()
	if err := c.Flush(t.Context()); err == nil {
		t.Fatal("Flush with Redis stopped answered no error")
	}
	c.Add(t.Context(), "urlflow_x_total")
	rs.Restart(t)
	if got := valueOf(t, c, "urlflow_x_total"); got != 2 {
		t.Fatalf("after Redis came back: %d, want 2", got)
	}
}

// valueOf reads one series through c.
func valueOf(t *testing.T, c *Counters, series string) int64 {
	t.Helper()
	all, err := c.All(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range all {
		if x.Series == series {
			return x.Value
		}
	}
	return 0
}

// FuzzParseSeries: whatever parseSeries accepts reads back the same, and whatever series
// writes, parseSeries reads.
func FuzzParseSeries(f *testing.F) {
	for _, seed := range []string{"x_total", `x{a="b"}`, `x{a="b",c="d"}`, `x{a="\"}"}`, `x{}`, `{a="b"}`, `x{a=b}`, `x{a="b",}`, `x{a="b"`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		name, labels, err := parseSeries(s)
		if err != nil {
			return
		}
		again, againLabels, err := parseSeries(series(name, labels))
		if err != nil || again != name || !slices.Equal(againLabels, labels) {
			t.Fatalf("parseSeries(%q) = %q %v does not read back: %q %v %v", s, name, labels, again, againLabels, err)
		}
	})
}
