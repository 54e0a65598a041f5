package counters

import (
	"log/slog"
	"slices"
	"testing"

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
