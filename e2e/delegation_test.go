package e2e

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/urlflow/urlflow/internal/redistest"
	"github.com/urlflow/urlflow/services"
)

// Delegation (README, "Delegating from your MCP server"): a delegating service asks urlflow,
// with its key and its user's real access token, to collect a secret; the user completes
// it in Chromium after signing in at the real provider; the service learns the outcome by
// long-poll and uses the secret through the proxy, which stores it for that service alone
// and never shows it to the service.

// delegation is urlflow serve with one service, weather, whose resource the shared
// provider issues tokens for, and a slot, weather_key, whose API is weatherAPI.
type delegation struct {
	*production
	key, resource string
	// clientID is weather's OAuth client at the shared issuer (client credentials).
	clientID string
}

// weatherClientSecret is the secret of weather's OAuth client.
const weatherClientSecret = "weather-client-secret-0123456789"

// weatherAPI is the weather slot's API: GET /whoami answers 200 to the key canary and 401
// to anything else; POST /echo answers the request's Authorization header and body, so
// that the test sees urlflow redact the key.
func weatherAPI(t *testing.T) *httptest.Server {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+canary {
			http.Error(w, `{"error": "unknown key"}`, http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/whoami":
			io.WriteString(w, `{"account": "alice"}`)
		case "/echo":
			body, _ := io.ReadAll(r.Body)
			json.NewEncoder(w).Encode(map[string]string{"authorization": r.Header.Get("Authorization"), "body": string(body)})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(api.Close)
	return api
}

func startDelegation(t *testing.T) *delegation {
	t.Helper()
	return startDelegationFor(t, "https://weather-"+strings.ToLower(rand.Text()[:8])+".example/mcp")
}

// startDelegationFor is startDelegation with weather's resource.
func startDelegationFor(t *testing.T, resource string) *delegation {
	t.Helper()
	key, digest := services.NewKey()
	keys := filepath.Join(t.TempDir(), "weather.keys")
	if err := os.WriteFile(keys, []byte(digest+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sharedIssuer(t).register(t, "/test/resources", map[string]any{"indicator": resource, "scope": "mcp", "defaultScope": "mcp",
		"accessTokenFormat": "jwt", "accessTokenTTL": 600})
	clientID := "weather-" + strings.ToLower(rand.Text()[:8])
	sharedIssuer(t).register(t, "/test/clients", map[string]any{"client_id": clientID, "client_secret": weatherClientSecret,
		"grant_types": []string{"client_credentials"}, "redirect_uris": []string{}, "response_types": []string{}})
	// The configuration's secrets: list goes on with weather_key. urlflow's resource at the
	// issuer also has the scope that weather's client credentials token must carry.
	p := startProductionWith(t, productionOptions{style: "error", atPublicURL: func(public string) {
		sharedIssuer(t).register(t, "/test/resources", map[string]any{"indicator": public + "/mcp", "scope": "mcp mcp:admin " + services.DefaultClientScope,
			"defaultScope": "mcp", "accessTokenFormat": "jwt", "accessTokenTTL": 600})
	}, moreConfig: fmt.Sprintf(`  - name: weather_key
    label: Weather API key
    api:
      base_url: %s
      methods: [GET, POST]
      inject: {header: Authorization, template: "Bearer {secret}"}
services:
  - name: weather
    label: Weather MCP
    resource: %s
    slots: [weather_key]
    keys_file: %s
    client_id: %s
`, weatherAPI(t).URL, resource, keys, clientID)})
	return &delegation{production: p, key: key, resource: resource, clientID: clientID}
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
	if got := d.asService(http.MethodPost, "/api/v1/elicitations", forUrlflow, `{"slot": "weather_key"}`); got.status != http.StatusUnauthorized ||
		!strings.Contains(string(got.body), "wrong audience") {
		t.Fatalf("a user token for urlflow as evidence: %d %s", got.status, got.body)
	}
	if resp := initialize(t, d.s.MCPURL, forWeather); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("weather's user token at /mcp: %d", resp.StatusCode)
	}
	if got := d.s.api(http.MethodPost, "/api/v1/elicitations", forWeather, `{"slot": "weather_key"}`); got.status != http.StatusUnauthorized {
		t.Fatalf("weather's user token as authentication to the API: %d %s", got.status, got.body)
	}

	got := d.asService(http.MethodPost, "/api/v1/elicitations", forWeather,
		`{"slot": "weather_key", "message": "Weather needs your demo key.", "client": {"name": "Claude Code", "version": "2.1"}}`)
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
	got = d.asService(http.MethodPost, "/api/v1/elicitations", forWeather, `{"slot": "weather_key"}`)
	traffic.Write(got.body)
	if again := got.created(t); got.status != http.StatusOK || again.Status != "stored" || again.Credential == nil ||
		again.Credential.Service != "weather" {
		t.Fatalf("asking again: %d %s", got.status, got.body)
	}

	// The service uses it through the proxy: the API sees the secret, the service never.
	for _, call := range []string{
		`{"slot": "weather_key", "method": "GET", "path": "/whoami"}`,
		`{"slot": "weather_key", "method": "POST", "path": "/echo", "body": "{\"q\": 1}"}`,
	} {
		got = d.asService(http.MethodPost, "/api/v1/proxy", forWeather, call)
		traffic.Write(got.body)
		var resp struct {
			Status int    `json:"status"`
			Body   string `json:"body"`
		}
		if err := json.Unmarshal(got.body, &resp); err != nil || got.status != http.StatusOK || resp.Status != http.StatusOK {
			t.Fatalf("proxy %s: %d %s", call, got.status, got.body)
		}
		if strings.Contains(call, "/echo") && !strings.Contains(resp.Body, `"authorization":"[redacted]"`) {
			t.Errorf("the echoed key is not redacted: %s", resp.Body)
		}
	}
	if got = d.asService(http.MethodPost, "/api/v1/proxy", forWeather,
		`{"slot": "weather_key", "method": "POST", "path": "/echo", "body": "is `+canary+` right?"}`); got.status != http.StatusUnprocessableEntity {
		t.Fatalf("a proxy request carrying the secret: %d %s", got.status, got.body)
	}

	// urlflow's own tools keep their own secret apart.
	alice := connect(t, d.s, clientConfig{Token: forUrlflow, URLMode: true})
	if res := alice.CallOK("list_connections", nil); !strings.Contains(text(res), "held for the service weather") {
		t.Fatalf("list_connections: %s", text(res))
	}
	requireNoCanary(t, d.rs, map[string]string{"service traffic": traffic.String(), "MCP traffic": alice.Traffic.String(),
		"urlflow output": d.s.Output()})
}

// clientToken gets weather's own access token for urlflow at the issuer, with client
// credentials, for scope.
func (d *delegation) clientToken(t *testing.T, scope string) string {
	t.Helper()
	form := url.Values{"grant_type": {"client_credentials"}, "resource": {d.production.resource}, "scope": {scope}}
	req, _ := http.NewRequest(http.MethodPost, d.idp.Issuer+"/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(d.clientID, weatherClientSecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil || resp.StatusCode != http.StatusOK || tok.AccessToken == "" {
		t.Fatalf("client credentials at the issuer: %d %v", resp.StatusCode, err)
	}
	return tok.AccessToken
}

func TestServeAuthenticatesAServiceByItsClientCredentials(t *testing.T) {
	t.Parallel()
	d := startDelegation(t)
	forWeather := d.idp.accessToken(t, d.catcher, d.alice, "alice", "alice-pw", d.resource)
	// A token weather's client got for another purpose at the same issuer is not weather
	// at urlflow: it lacks the scope that says so.
	other := d.clientToken(t, "mcp")
	header := http.Header{"Authorization": {"Bearer " + other}, "Urlflow-User-Token": {forWeather}}
	got := d.s.apiRequest(http.MethodPost, "/api/v1/elicitations", header, `{"slot": "weather_key"}`)
	if challenge := got.header.Get("WWW-Authenticate"); got.status != http.StatusForbidden ||
		!strings.Contains(challenge, `error="insufficient_scope", scope="`+services.DefaultClientScope+`"`) ||
		!strings.Contains(string(got.body), services.DefaultClientScope) {
		t.Fatalf("a create with weather's client token for another purpose: %d %q %s", got.status, challenge, got.body)
	}
	own := d.clientToken(t, services.DefaultClientScope)
	header.Set("Authorization", "Bearer "+own)
	got = d.s.apiRequest(http.MethodPost, "/api/v1/elicitations", header, `{"slot": "weather_key"}`)
	if c := got.created(t); got.status != http.StatusCreated || c.Elicitation == nil || c.Elicitation.ID == "" {
		t.Fatalf("a create with weather's client credentials token: %d %s", got.status, got.body)
	}
	// That token names no user: /mcp refuses it, and says so.
	resp := initialize(t, d.s.MCPURL, own)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), "names no user") {
		t.Fatalf("weather's client token at /mcp: %d %s", resp.StatusCode, body)
	}
}

// The example delegating server next to urlflow serve, with the real OpenID provider: alice
// gets a token for the example from the provider, her go-sdk client calls the example's
// tool, she enters the key in Chromium after signing in at the provider, and the tool's
// call reaches the weather API through urlflow's proxy.
func TestServeAndTheExampleServerWithTheRealIssuer(t *testing.T) {
	t.Parallel()
	port := redistest.FreePort(t)
	resource := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	d := startDelegationFor(t, resource)
	cmd := exec.Command(exampleBinary, "--addr", fmt.Sprintf("127.0.0.1:%d", port), "--slot", "weather_key")
	cmd.Env = []string{"URLFLOW_URL=" + d.s.BaseURL, "URLFLOW_SERVICE_KEY=" + d.key}
	example, _, err := launch(t, cmd, "weather: MCP on")
	if err != nil {
		t.Fatal(err)
	}
	token := d.idp.accessToken(t, d.catcher, d.alice, "alice", "alice-pw", resource)
	c := connect(t, &server{t: t, MCPURL: resource}, clientConfig{Token: token, URLMode: true})
	call := c.callAsync("forecast", map[string]any{"city": "Paris"})
	params := c.nextElicitation(30 * time.Second)
	if status := d.alice.Navigate(t, params.URL); status != http.StatusOK {
		t.Fatalf("alice opening the link got %d:\n%s", status, d.alice.Text(t, "main"))
	}
	if page := d.alice.Text(t, "main"); !strings.Contains(page, "Weather MCP") || !strings.Contains(page, "Verified by urlflow") {
		t.Errorf("the consent page does not name the service:\n%s", page)
	}
	d.alice.continueToForm(t)
	if status := d.alice.enterSecret(t, canary); status != http.StatusOK {
		t.Fatalf("saving the secret got %d", status)
	}
	res := await(t, call, time.Minute)
	if !strings.Contains(text(res), "Sunny in Paris") || !strings.Contains(text(res), "HTTP 200") {
		t.Fatalf("the tool: %q", text(res))
	}
	c.waitCompletion(params.ElicitationID, 5*time.Second)
	requireNoCanary(t, d.rs, map[string]string{"client traffic": c.Traffic.String(), "example output": example.Output(),
		"urlflow output": d.s.Output()})
}
