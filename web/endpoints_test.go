package web

import (
	"crypto/rand"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/urlflow/urlflow/oauth/identity"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/ratelimit"
	"github.com/urlflow/urlflow/web/limits"
)

func TestMCPIsServedOnlyWithAValidBearerToken(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	metadata := fmt.Sprintf(`Bearer resource_metadata=%q`, f.URL+"/.well-known/oauth-protected-resource/mcp")
	otherResource, err := identity.NewDev([]byte(rand.Text()), f.URL+"/elsewhere").Issue("alice")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, token string }{
		{"no token", ""},
		{"garbage", "not-a-token"},
		{"for another resource", otherResource},
		{"an operator token", f.operatorToken},
	} {
		got := f.send(t, nil, request{method: http.MethodPost, path: "/mcp", token: tc.token,
			body: strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`), contentType: "application/json"})
		if tc.token == "" {
			if got.Status != http.StatusUnauthorized || got.Header.Get("WWW-Authenticate") != metadata {
				t.Errorf("%s: %d %q, want 401 with the resource metadata", tc.name, got.Status, got.Header.Get("WWW-Authenticate"))
			}
			continue
		}
		got.wantRefusedToken(t, f.URL+"/.well-known/oauth-protected-resource/mcp")
	}
	if reached := f.mcp.reached(); len(reached) != 0 {
		t.Fatalf("requests without a valid token reached the MCP server: %v", reached)
	}

	got := f.send(t, nil, request{method: http.MethodPost, path: "/mcp", token: f.token(t, "alice"),
		body: strings.NewReader(`{}`), contentType: "application/json"})

	if got.Status != http.StatusOK || got.Body != `{"probe":"reached"}` {
		t.Errorf("with a valid token: %d %s, want the MCP server's answer", got.Status, got.Body)
	}
	if reached := f.mcp.reached(); !slices.Equal(reached, []state.User{f.user("alice")}) {
		t.Errorf("the MCP server saw %v, want alice once", reached)
	}
}

func TestMCPWantsTheRequiredScopes(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{requiredScopes: []string{"urlflow"}, scopes: map[string][]string{"alice": {"urlflow"}}})

	got := f.send(t, nil, request{method: http.MethodGet, path: "/mcp", token: f.token(t, "bob")})
	want := fmt.Sprintf(`Bearer error="insufficient_scope", scope="urlflow", resource_metadata=%q`, f.URL+"/.well-known/oauth-protected-resource/mcp")
	if got.Status != http.StatusForbidden || got.Header.Get("WWW-Authenticate") != want {
		t.Errorf("without the scope: %d %q, want 403 %q", got.Status, got.Header.Get("WWW-Authenticate"), want)
	}
	f.send(t, nil, request{method: http.MethodGet, path: "/mcp", token: f.token(t, "alice")}).want(t, http.StatusOK)
	if reached := f.mcp.reached(); !slices.Equal(reached, []state.User{f.user("alice")}) {
		t.Errorf("the MCP server saw %v, want alice once", reached)
	}
}

func TestMCPRequestsOverTheRateLimitAreRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{rateLimits: limits.Rates{MCP: ratelimit.Limit{Events: 2, Window: 24 * time.Hour}}})
	alice := f.token(t, "alice")
	for range 2 {
		f.send(t, nil, request{method: http.MethodGet, path: "/mcp", token: alice}).want(t, http.StatusOK)
	}

	for range 2 {
		got := f.send(t, nil, request{method: http.MethodGet, path: "/mcp", token: alice})
		var body map[string]string
		got.decode(t, &body)
		retry, err := strconv.Atoi(got.Header.Get("Retry-After"))
		if got.Status != http.StatusTooManyRequests || body["error"] != "rate_limited" || err != nil || retry < 1 || retry > 24*60*60 ||
			!strings.Contains(body["error_description"], "at most 2 per 24h0m0s") {
			t.Errorf("over the limit: %d %v (Retry-After %q), want 429 rate_limited", got.Status, body, got.Header.Get("Retry-After"))
		}
	}
	f.send(t, nil, request{method: http.MethodGet, path: "/mcp", token: f.token(t, "bob")}).want(t, http.StatusOK)

	want := []state.User{f.user("alice"), f.user("alice"), f.user("bob")}
	if reached := f.mcp.reached(); !slices.Equal(reached, want) {
		t.Errorf("the MCP server saw %v, want %v", reached, want)
	}
	if got := f.counter(t, `urlflow_rate_limited_total{what="mcp"}`); got != 1 {
		t.Errorf(`urlflow_rate_limited_total{what="mcp"} = %d, want 1`, got)
	}
}

func TestHealthAndReadiness(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	health := f.send(t, nil, request{method: http.MethodGet, path: "/healthz"})
	if health.Status != http.StatusOK || health.Body != "ok\n" {
		t.Errorf("/healthz: %d %q, want 200 ok", health.Status, health.Body)
	}
	ready := f.send(t, nil, request{method: http.MethodGet, path: "/readyz"})
	var checks map[string]string
	ready.decode(t, &checks)
	if ready.Status != http.StatusOK || len(checks) != 2 || checks["redis"] != "ok" || checks["keys"] != "ok" {
		t.Errorf("/readyz: %d %v, want 200 with redis and keys ok", ready.Status, checks)
	}
}

func TestMetricsAreForOperatorsOnly(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	e := f.newFlow(t, "alice")
	f.browser(t, "bob").open(e.ID).want(t, http.StatusForbidden)
	// A path that matches no route must not become a label either.
	f.send(t, nil, request{method: http.MethodGet, path: "/nowhere/" + e.ID}).want(t, http.StatusNotFound)

	for name, token := range map[string]string{"no token": "", "a user token": f.token(t, "alice"), "garbage": "x"} {
		got := f.send(t, nil, request{method: http.MethodGet, path: "/metrics", token: token})
		got.want(t, http.StatusUnauthorized, "an operator token is required")
		if got.Header.Get("WWW-Authenticate") != `Bearer realm="urlflow metrics"` {
			t.Errorf("%s: WWW-Authenticate %q", name, got.Header.Get("WWW-Authenticate"))
		}
	}

	got := f.send(t, nil, request{method: http.MethodGet, path: "/metrics", token: f.operatorToken})

	if got.Status != http.StatusOK || !strings.HasPrefix(got.Header.Get("Content-Type"), "text/plain; version=0.0.4; charset=utf-8") {
		t.Fatalf("/metrics: %d %q, want 200 Prometheus text", got.Status, got.Header.Get("Content-Type"))
	}
	for _, want := range []string{
		"# TYPE urlflow_elicitations_created_total counter\nurlflow_elicitations_created_total{kind=\"secret\"} 1\n",
		"# TYPE urlflow_phishing_refusals_total counter\nurlflow_phishing_refusals_total 1\n",
		"urlflow_counters_up 1\n",
		"# TYPE urlflow_http_request_duration_seconds histogram\n",
		`urlflow_http_request_duration_seconds_count{method="GET",route="/e/:id",status="403"} 1` + "\n",
		"# TYPE go_goroutines gauge\n",
		"# TYPE process_cpu_seconds_total counter\n",
	} {
		if !strings.Contains(got.Body, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, got.Body)
		}
	}
	for _, secret := range []string{e.ID, f.user("alice").Key(), "alice", "bob"} {
		if strings.Contains(got.Body, secret) {
			t.Errorf("/metrics names %q", secret)
		}
	}
	if n := strings.Count(got.Body, "# TYPE urlflow_transitions_total counter"); n > 1 {
		t.Errorf("a counter is typed %d times", n)
	}
}

func TestProtectedResourceMetadataNamesTheMCPResource(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		opts    fixtureOptions
		servers []string
		scopes  []string
	}{
		{"development", fixtureOptions{}, nil, nil},
		{"with an issuer", fixtureOptions{issuer: "https://id.example", requiredScopes: []string{"urlflow"}},
			[]string{"https://id.example"}, []string{"urlflow"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, tc.opts)
			for _, path := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"} {
				got := f.send(t, nil, request{method: http.MethodGet, path: path})
				var meta struct {
					Resource             string   `json:"resource"`
					ResourceName         string   `json:"resource_name"`
					AuthorizationServers []string `json:"authorization_servers"`
					BearerMethods        []string `json:"bearer_methods_supported"`
					Scopes               []string `json:"scopes_supported"`
				}
				got.decode(t, &meta)
				if got.Status != http.StatusOK || meta.Resource != f.URL+"/mcp" || meta.ResourceName != "urlflow" ||
					!slices.Equal(meta.AuthorizationServers, tc.servers) || !slices.Equal(meta.BearerMethods, []string{"header"}) ||
					!slices.Equal(meta.Scopes, tc.scopes) {
					t.Errorf("%s: %d %+v", path, got.Status, meta)
				}
			}
		})
	}
}

func TestTheDevelopmentTokenEndpointMintsTokensForValidNames(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	got := f.send(t, nil, request{method: http.MethodGet, path: "/dev/token?user=carol"})
	var body map[string]string
	got.decode(t, &body)
	if got.Status != http.StatusOK {
		t.Fatalf("/dev/token?user=carol: %d %v", got.Status, body)
	}
	id, err := f.dev.Verify(t.Context(), body["token"])
	if err != nil || id.User != f.user("carol") {
		t.Errorf("the token is for %v (%v), want carol", id.User, err)
	}
	f.send(t, nil, request{method: http.MethodGet, path: "/mcp", token: body["token"]}).want(t, http.StatusOK)

	for _, name := range []string{"", "Carol", "a%20b", "-x", strings.Repeat("a", 65)} {
		got := f.send(t, nil, request{method: http.MethodGet, path: "/dev/token?user=" + name})
		var body map[string]string
		got.decode(t, &body)
		if got.Status != http.StatusBadRequest || body["token"] != "" || !strings.Contains(body["error"], "user must be 1 to 64") {
			t.Errorf("user=%q: %d %v, want 400 with the rule", name, got.Status, body)
		}
	}
}

func TestTheDemoAPIIsServedInDevelopment(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	got := f.send(t, nil, request{method: http.MethodGet, path: "/demo/api/whoami", token: validKey})
	var body map[string]string
	got.decode(t, &body)
	if got.Status != http.StatusOK || !strings.HasPrefix(body["account"], "demo-") {
		t.Errorf("/demo/api/whoami: %d %v", got.Status, body)
	}
}
