package e2e

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urlflow/urlflow/services"
)

// Delegation (README, "Delegating from your MCP server"): a delegating service asks urlflow,
// with its key and its user's real access token, to collect a secret; the user completes
// it in Chromium after signing in at the real provider; the service learns the outcome by
// long-poll, and the secret is stored for that service alone.

// delegation is urlflow serve with one service, weather, whose resource the shared
// provider issues tokens for.
type delegation struct {
	*production
	key, resource string
}

func startDelegation(t *testing.T) *delegation {
	t.Helper()
	key, digest := services.NewKey()
	keys := filepath.Join(t.TempDir(), "weather.keys")
	if err := os.WriteFile(keys, []byte(digest+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	resource := "https://weather-" + strings.ToLower(rand.Text()[:8]) + ".example/mcp"
	sharedIssuer(t).register(t, "/test/resources", map[string]any{"indicator": resource, "scope": "mcp", "defaultScope": "mcp",
		"accessTokenFormat": "jwt", "accessTokenTTL": 600})
	p := startProductionWith(t, productionOptions{style: "error", moreConfig: fmt.Sprintf(`services:
  - name: weather
    label: Weather MCP
    resource: %s
    slots: [demo_api_key]
    keys_file: %s
`, resource, keys)})
	return &delegation{production: p, key: key, resource: resource}
}

// asService sends an API request as the service with userToken as the evidence of its
// user (none if empty).
func (d *delegation) asService(method, path, userToken, body string) apiAnswer {
	d.s.t.Helper()
	header := http.Header{"Authorization": {"Bearer " + d.key}}
	if userToken != "" {
		header.Set("Urlflow-User-Token", userToken)
	}
	return d.s.apiRequest(method, path, header, body)
}

// createAnswer is the answer of POST /api/v1/elicitations.
type createAnswer struct {
	Status      string    `json:"status"`
	Elicitation *fullView `json:"elicitation"`
	Credential  *struct {
		Name    string `json:"name"`
		Service string `json:"service"`
	} `json:"credential"`
}

func (a apiAnswer) created(t *testing.T) createAnswer {
	t.Helper()
	var c createAnswer
	if err := json.Unmarshal(a.body, &c); err != nil {
		t.Fatalf("status %d, not a create answer: %v\n%s", a.status, err, a.body)
	}
	return c
}

func TestServeCollectsASecretForADelegatingServiceItsUserCalled(t *testing.T) {
	t.Parallel()
	d := startDelegation(t)
	forWeather := d.idp.accessToken(t, d.catcher, d.alice, "alice", "alice-pw", d.resource)
	forUrlflow := d.idp.accessToken(t, d.catcher, d.alice, "alice", "alice-pw", d.production.resource)
	var traffic strings.Builder

	// A token for urlflow is no evidence for weather, and a token for weather opens nothing
	// at urlflow.
	if got := d.asService(http.MethodPost, "/api/v1/elicitations", forUrlflow, `{"slot": "demo_api_key"}`); got.status != http.StatusUnauthorized ||
		!strings.Contains(string(got.body), "wrong audience") {
		t.Fatalf("a user token for urlflow as evidence: %d %s", got.status, got.body)
	}
	if resp := initialize(t, d.s.MCPURL, forWeather); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("weather's user token at /mcp: %d", resp.StatusCode)
	}
	if got := d.s.api(http.MethodPost, "/api/v1/elicitations", forWeather, `{"slot": "demo_api_key"}`); got.status != http.StatusUnauthorized {
		t.Fatalf("weather's user token as authentication to the API: %d %s", got.status, got.body)
	}

	got := d.asService(http.MethodPost, "/api/v1/elicitations", forWeather,
		`{"slot": "demo_api_key", "message": "Weather needs your demo key.", "client": {"name": "Claude Code", "version": "2.1"}}`)
	traffic.Write(got.body)
	created := got.created(t)
	if got.status != http.StatusCreated || created.Elicitation == nil || created.Elicitation.URL == "" {
		t.Fatalf("create: %d %s", got.status, got.body)
	}
	e := created.Elicitation

	if status := d.alice.Navigate(t, e.URL); status != http.StatusOK {
		t.Fatalf("Alice opening the link got %d:\n%s", status, d.alice.Text(t, "main"))
	}
	page := d.alice.Text(t, "main")
	for _, want := range []string{"Weather MCP", "Verified by urlflow", "Claude Code", "Self-reported by the client", "Weather needs your demo key."} {
		if !strings.Contains(page, want) {
			t.Errorf("the consent page does not say %q:\n%s", want, page)
		}
	}
	d.alice.Screenshot(t, "delegated-consent")
	d.alice.continueToForm(t)
	if status := d.alice.enterSecret(t, canary); status != http.StatusOK {
		t.Fatalf("saving the secret got %d", status)
	}

	got = d.asService(http.MethodGet, elicitationPath(e.ID)+"?wait=20", "", "")
	traffic.Write(got.body)
	if v := got.view(t); got.status != http.StatusOK || v.State != "complete" {
		t.Fatalf("the service's long poll: %d %s", got.status, got.body)
	}
	got = d.asService(http.MethodPost, "/api/v1/elicitations", forWeather, `{"slot": "demo_api_key"}`)
	traffic.Write(got.body)
	if again := got.created(t); got.status != http.StatusOK || again.Status != "stored" || again.Credential == nil ||
		again.Credential.Service != "weather" {
		t.Fatalf("asking again: %d %s", got.status, got.body)
	}

	// urlflow's own tools keep their own secret apart.
	alice := connect(t, d.s, clientConfig{Token: forUrlflow, URLMode: true})
	if res := alice.CallOK("list_connections", nil); !strings.Contains(text(res), "held for the service weather") {
		t.Fatalf("list_connections: %s", text(res))
	}
	requireNoCanary(t, d.rs, map[string]string{"service traffic": traffic.String(), "MCP traffic": alice.Traffic.String(),
		"urlflow output": d.s.Output()})
}
