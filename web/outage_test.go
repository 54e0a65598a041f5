package web

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/urlflow/urlflow/state/flow"
	"github.com/urlflow/urlflow/state/ratelimit"
	"github.com/urlflow/urlflow/web/limits"
)

func TestWhileRedisIsDownPagesAndTheAPIAnswer503AndChangeNothing(t *testing.T) {
	t.Parallel()
	// Without retries, and with a small pool whose dial errors soon open its circuit, each
	// request during the outage fails after one dial instead of go-redis's retries.
	f := newFixture(t, fixtureOptions{redisQuery: "max_retries=-1&pool_size=4",
		rateLimits: limits.Rates{MCP: ratelimit.Limit{Events: 2, Window: 24 * time.Hour}}})
	e := f.newFlow(t, "alice")
	b := f.browser(t, "alice")
	form := b.continueToForm(e.ID)
	before := f.snapshot(t, e.ID)
	alice := f.token(t, "alice")
	f.send(t, nil, request{method: http.MethodGet, path: "/mcp", token: alice}).want(t, http.StatusOK)

	f.redis.Stop()

	for _, tc := range []struct {
		name string
		r    request
		json bool
	}{
		{"the consent page", request{method: http.MethodGet, path: "/e/" + e.ID}, false},
		{"the secret form", request{method: http.MethodGet, path: "/e/" + e.ID + "/secret"}, false},
		{"a secret", request{method: http.MethodPost, path: "/e/" + e.ID + "/secret",
			form: url.Values{"csrf": {form.csrf(t)}, "secret": {validKey}}}, false},
		{"a decline", request{method: http.MethodPost, path: "/e/" + e.ID + "/decline", form: url.Values{"csrf": {form.csrf(t)}}}, false},
		{"the status", request{method: http.MethodGet, path: "/api/v1/elicitations/" + e.ID, token: alice}, true},
		{"a cancel", request{method: http.MethodPost, path: "/api/v1/elicitations/" + e.ID + "/cancel", token: alice}, true},
		{"a retry", request{method: http.MethodPost, path: "/api/v1/elicitations/" + e.ID + "/retry", token: alice}, true},
	} {
		got := b.send(tc.r)
		if tc.json {
			var body map[string]string
			got.decode(t, &body)
			if got.Status != http.StatusServiceUnavailable || !strings.Contains(body["error"], "cannot reach its store") {
				t.Errorf("%s: %d %v, want 503 saying the store is unreachable", tc.name, got.Status, body)
			}
		} else if got.Status != http.StatusServiceUnavailable || !strings.Contains(got.Text(), "The service is not available right now") ||
			!strings.Contains(got.Text(), "Nothing was changed") {
			t.Errorf("%s: %d, want the 503 page: %s", tc.name, got.Status, got.Text())
		}
		if strings.Contains(got.Body, f.redis.Addr) {
			t.Errorf("%s: the answer names Redis's address", tc.name)
		}
	}
	ready := f.send(t, nil, request{method: http.MethodGet, path: "/readyz"})
	var checks map[string]string
	ready.decode(t, &checks)
	if ready.Status != http.StatusServiceUnavailable || checks["redis"] != "unavailable" || checks["keys"] != "ok" {
		t.Errorf("/readyz while Redis is down: %d %v, want 503 naming redis", ready.Status, checks)
	}
	if got := f.send(t, nil, request{method: http.MethodGet, path: "/healthz"}); got.Status != http.StatusOK {
		t.Errorf("/healthz while Redis is down: %d, want 200 (the process is alive)", got.Status)
	}
	// This process's figures are still shown; the gauge says the counters are not.
	if got := f.send(t, nil, request{method: http.MethodGet, path: "/metrics", token: f.operatorToken}); got.Status != http.StatusOK ||
		!strings.Contains(got.Body, "urlflow_counters_up 0\n") || strings.Contains(got.Body, "urlflow_elicitations_created_total") {
		t.Errorf("/metrics while Redis is down: %d, want 200 with urlflow_counters_up 0 and no counters:\n%s", got.Status, got.Body)
	}
	// A rate limit never causes an outage: it counts in memory, and the MCP request is served.
	f.send(t, nil, request{method: http.MethodGet, path: "/mcp", token: alice}).want(t, http.StatusOK)

	f.redis.Restart(t)
	f.waitReady(t)

	f.wantUnchanged(t, e.ID, before)
	f.wantNoCredential(t, "alice", demoSlot)
	f.send(t, nil, request{method: http.MethodGet, path: "/mcp", token: alice}).want(t, http.StatusTooManyRequests)
	if got := len(f.mcp.reached()); got != 2 {
		t.Errorf("the MCP server was reached %d times, want 2", got)
	}
	// The same browser session and form work again.
	b.submit(e.ID, form, validKey).want(t, http.StatusOK)
	f.wantState(t, e.ID, flow.Complete)
}
