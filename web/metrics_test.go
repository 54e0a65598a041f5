package web

import (
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"testing"

	"github.com/urlflow/urlflow/internal/buildinfo"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/flow"
)

// scrape returns the value of every series of /metrics, by its text (name and labels).
func (f *fixture) scrape(t *testing.T) map[string]float64 {
	t.Helper()
	got := f.send(t, nil, request{method: http.MethodGet, path: "/metrics", token: f.operatorToken})
	if got.Status != http.StatusOK {
		t.Fatalf("/metrics: %d", got.Status)
	}
	series := map[string]float64{}
	for _, m := range regexp.MustCompile(`(?m)^([a-z_]+(?:\{[^}]*\})?) (\S+)$`).FindAllStringSubmatch(got.Body, -1) {
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			t.Fatalf("series %s: %v", m[0], err)
		}
		series[m[1]] = v
	}
	return series
}

func TestMetricsFollowTheFlows(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	first := f.newFlow(t, "alice")
	f.newFlow(t, "bob")
	m := f.scrape(t)
	if m[`urlflow_flows{state="pending"}`] != 2 || m[`urlflow_flows{state="consented"}`] != 0 || m[`urlflow_flows_stuck{reason="pending"}`] != 0 {
		t.Errorf("two pending flows scraped as pending %v, stuck %v", m[`urlflow_flows{state="pending"}`], m[`urlflow_flows_stuck{reason="pending"}`])
	}

	f.clock.Advance(flow.DefaultStuckAfter.Pending)
	f.apply(t, first.ID, flow.CancelRequested, state.ActorUser)
	f.api(t, http.MethodGet, "/api/v1/elicitations", "not.a.token", "").want(t, http.StatusUnauthorized)
	m = f.scrape(t)
	for series, want := range map[string]float64{
		`urlflow_flows{state="pending"}`:                                                1,
		`urlflow_flows_stuck{reason="pending"}`:                                         1,
		`urlflow_notifications_owed`:                                                    0,
		`urlflow_flow_duration_seconds_count{kind="secret",state="cancelled"}`:          1,
		`urlflow_flow_duration_seconds_bucket{kind="secret",state="cancelled",le="60"}`: 0,
		`urlflow_identity_refusals_total{where="bearer"}`:                               1,
		`urlflow_elicitation_transitions_total{kind="secret",to="cancelled"}`:           1,
	} {
		if got, ok := m[series]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", series, got, ok, want)
		}
	}
	info := buildinfo.Get()
	if series := fmt.Sprintf(`urlflow_build_info{commit="%s",goversion="%s",version="%s"}`, info.Commit, info.Go, info.Version); m[series] != 1 {
		t.Errorf("%s missing or not 1 in %v", series, m)
	}
	// The test clock moves with the real one too.
	if got, want := m[`urlflow_flow_duration_seconds_sum{kind="secret",state="cancelled"}`], flow.DefaultStuckAfter.Pending.Seconds(); got < want || got > want+30 {
		t.Errorf("the cancelled flow took %vs, want about %v", got, want)
	}
}
