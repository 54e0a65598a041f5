package e2e

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/urlflow/urlflow/internal/redistest"
)

// production is urlflow serve with a real OpenID provider as the deployment's issuer (the
// package's shared one), two real users, a browser for each, and the test's public client
// for real access tokens.
type production struct {
	s             *server
	idp           *idp
	rs            *redistest.Server
	catcher       *codeCatcher
	alice, bob    *person
	resource      string
	operatorToken string
	// clientID is the client urlflow is registered as at the shared issuer: one per test.
	clientID string
}

// urlflowClientSecret is the secret of the client urlflow is registered as at the issuer.
const urlflowClientSecret = "urlflow-client-secret"

// startProduction starts a redis-server and urlflow serve on a free port, registered at the
// shared issuer.
func startProduction(t *testing.T, style string) *production {
	t.Helper()
	return startProductionWith(t, productionOptions{style: style})
}

// productionOptions vary startProductionWith.
type productionOptions struct {
	style string
	// moreConfig is YAML appended to urlflow's configuration file.
	moreConfig string
	// env adds to urlflow's environment.
	env []string
	// tokenFormat is the format of the provider's MCP access tokens: "jwt" (default) or
	// "opaque".
	tokenFormat string
	// atPublicURL, if set, runs with urlflow's public URL before urlflow starts (to register
	// urlflow's redirect URI at another provider).
	atPublicURL func(public string)
	// command, if set, is the command that runs urlflow serve listening on addr with the
	// environment env (URLFLOW_* only), instead of the binary (the container image).
	command func(addr string, env []string) *exec.Cmd
}

// startProductionWith is startProduction with options.
func startProductionWith(t *testing.T, o productionOptions) *production {
	t.Helper()
	if o.tokenFormat == "" {
		o.tokenFormat = "jwt"
	}
	p := &production{rs: redistest.Start(t), catcher: newCodeCatcher(t), operatorToken: "op-" + rand.Text(), idp: sharedIssuer(t)}
	p.idp.register(t, "/test/clients", p.catcher.metadata())
	key := make([]byte, 32)
	rand.Read(key)
	config := t.TempDir() + "/urlflow.yaml"
	os.WriteFile(config, []byte("secrets:\n  - name: demo_api_key\n    label: Demo API key\n"+o.moreConfig), 0o600)
	p.s = onFreePort(t, func(port int) (*server, error) {
		public := fmt.Sprintf("http://127.0.0.1:%d", port)
		p.resource, p.clientID = public+"/mcp", fmt.Sprintf("urlflow-%d", port)
		p.idp.register(t, "/test/clients", map[string]any{"client_id": p.clientID, "client_secret": urlflowClientSecret,
			"redirect_uris": []string{public + "/auth/callback"}, "token_endpoint_auth_method": "client_secret_basic"})
		p.idp.register(t, "/test/resources", map[string]any{"indicator": p.resource, "scope": "mcp mcp:admin", "defaultScope": "mcp",
			"accessTokenFormat": o.tokenFormat, "accessTokenTTL": 600})
		if o.atPublicURL != nil {
			o.atPublicURL(public)
		}
		env := []string{
			"URLFLOW_REDIS_URL=" + p.rs.URL(),
			"URLFLOW_PUBLIC_URL=" + public,
			"URLFLOW_KEYS=k1:" + base64.StdEncoding.EncodeToString(key),
			"URLFLOW_USER_REFERENCE_KEY=" + base64.StdEncoding.EncodeToString([]byte(rand.Text()+rand.Text())),
			"URLFLOW_OIDC_ISSUER=" + p.idp.Issuer,
			"URLFLOW_OIDC_CLIENT_ID=" + p.clientID,
			"URLFLOW_OIDC_CLIENT_SECRET=" + urlflowClientSecret,
			"URLFLOW_OPERATOR_TOKENS=" + p.operatorToken,
			"URLFLOW_ELICITATION_STYLE=" + o.style,
			"URLFLOW_CONFIG=" + config,
		}
		env = append(env, o.env...)
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		cmd := exec.Command(binary, "serve", "--addr", addr)
		cmd.Env = append(os.Environ(), env...)
		if o.command != nil {
			cmd = o.command(addr, env)
		}
		s, _, err := launch(t, cmd, "urlflow serve:")
		if err != nil {
			return nil, err
		}
		s.BaseURL, s.MCPURL = public, p.resource
		return s, nil
	})
	browser := sharedBrowser(t)
	p.alice, p.bob = newPerson(t, browser, "alice"), newPerson(t, browser, "bob")
	return p
}

// initialize posts an MCP initialize with token and returns the response.
func initialize(t *testing.T, mcpURL, token string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, mcpURL, strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body)) // read it whole, so that the connection is free
	return resp
}

func TestServeAcceptsOnlyValidAccessTokens(t *testing.T) {
	t.Parallel()
	p := startProduction(t, "push")
	now := time.Now()
	claims := func(change func(jwt.MapClaims)) jwt.MapClaims {
		c := jwt.MapClaims{"iss": p.idp.Issuer, "sub": "alice", "aud": p.resource, "scope": "mcp",
			"iat": now.Unix(), "exp": now.Add(10 * time.Minute).Unix()}
		if change != nil {
			change(c)
		}
		return c
	}
	otherKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	if resp := initialize(t, p.resource, p.idp.mint(t, claims(nil), nil)); resp.StatusCode != http.StatusOK {
		t.Fatalf("a valid token got %d", resp.StatusCode)
	}
	// Each refusal says why (the reason urlflow found) and never quotes the token.
	bad := map[string]struct{ token, reason string }{
		"none":                          {"", "a bearer token is required"},
		"garbage":                       {"not-a-token", "not a JWT"},
		"wrong audience":                {p.idp.mint(t, claims(func(c jwt.MapClaims) { c["aud"] = "http://127.0.0.1:1/mcp" }), nil), "wrong audience (want "},
		"audience list without urlflow": {p.idp.mint(t, claims(func(c jwt.MapClaims) { c["aud"] = []string{"a", "b"} }), nil), "wrong audience (want "},
		"wrong issuer":                  {p.idp.mint(t, claims(func(c jwt.MapClaims) { c["iss"] = "https://evil.example" }), nil), "wrong issuer"},
		"expired":                       {p.idp.mint(t, claims(func(c jwt.MapClaims) { c["exp"] = now.Add(-5 * time.Minute).Unix() }), nil), "expired"},
		"not yet valid":                 {p.idp.mint(t, claims(func(c jwt.MapClaims) { c["nbf"] = now.Add(5 * time.Minute).Unix() }), nil), "not valid yet"},
		"no expiry":                     {p.idp.mint(t, claims(func(c jwt.MapClaims) { delete(c, "exp") }), nil), "no expiry"},
		"bad signature":                 {p.idp.mint(t, claims(nil), otherKey), "bad signature"},
		"operator token":                {p.operatorToken, "not a JWT"},
	}
	for name, tt := range bad {
		t.Run(name, func(t *testing.T) {
			resp := initialize(t, p.resource, tt.token)
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("got %d, want 401", resp.StatusCode)
			}
			if h := resp.Header.Get("WWW-Authenticate"); !strings.Contains(h, `resource_metadata="`+p.s.BaseURL+`/.well-known/oauth-protected-resource/mcp"`) {
				t.Fatalf("WWW-Authenticate: %q", h)
			}
			if !strings.Contains(string(body), tt.reason) || (tt.token != "" && strings.Contains(string(body), tt.token)) {
				t.Fatalf("the refusal %q does not say %q, or quotes the token", body, tt.reason)
			}
		})
	}
	if strings.Contains(p.s.Output(), "mcp session started") && strings.Count(p.s.Output(), "mcp session started") > 1 {
		t.Fatal("a refused token started a session")
	}
	var meta struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
	}
	if code := p.s.getJSON("/.well-known/oauth-protected-resource/mcp", "", &meta); code != http.StatusOK ||
		meta.Resource != p.resource || len(meta.AuthorizationServers) != 1 || meta.AuthorizationServers[0] != p.idp.Issuer {
		t.Fatalf("protected resource metadata: %d %+v", code, meta)
	}
}

// In production the pages sign people in at the real provider. Bob opening Alice's link is
// refused and changes nothing; Alice signs in and completes it; Bob's tools cannot see or
// use what Alice stored.
func TestServeSignsInRealUsersAndRefusesTheWrongOne(t *testing.T) {
	t.Parallel()
	p := startProduction(t, "error")
	aliceToken := p.idp.accessToken(t, p.catcher, p.alice, "alice", "alice-pw", p.resource)
	bobToken := p.idp.accessToken(t, p.catcher, p.bob, "bob", "bob-pw", p.resource)
	alice := connect(t, p.s, clientConfig{Token: aliceToken, URLMode: true})
	bob := connect(t, p.s, clientConfig{Token: bobToken, URLMode: true})

	params := askErrorStyle(t, alice)
	// Bob opens Alice's link: sign-in at the provider (his session there is reused), then refusal.
	if status := p.bob.Navigate(t, params.URL); status != http.StatusForbidden {
		t.Fatalf("Bob opening Alice's link got %d, want 403:\n%s", status, p.bob.Text(t, "main"))
	}
	p.bob.Screenshot(t, "serve-refused")
	e := p.s.status(params.ElicitationID, aliceToken)
	if e.State != "pending" || e.History[len(e.History)-1].Event != "other_user_opened" {
		t.Fatalf("after Bob: %s %v", e.State, e.events())
	}
	if metrics := p.metrics(t); !strings.Contains(metrics, "urlflow_phishing_refusals_total 1\n") {
		t.Fatalf("the refusal is not counted:\n%s", metrics)
	}

	p.aliceStores(t, alice, params, canary, "serve-consent")
	requireEvents(t, p.s.status(params.ElicitationID, aliceToken), "created", "other_user_opened", "browser_open", "verified")

	if res := bob.CallOK("list_connections", nil); strings.Contains(text(res), "demo_api_key") {
		t.Fatalf("Bob lists Alice's secret: %s", text(res))
	}
	var unknown map[string]string
	if code := p.s.getJSON("/api/v1/elicitations/"+params.ElicitationID, bobToken, &unknown); code != http.StatusNotFound {
		t.Fatalf("Bob reading Alice's elicitation got %d", code)
	}
	requireNoCanary(t, p.rs, map[string]string{"MCP traffic": alice.Traffic.String(), "urlflow output": p.s.Output()})
	// After a whole flow and a refusal, /metrics serves everything the alert rules and the
	// dashboard use.
	requireServedMetrics(t, func() string { return p.metrics(t) })
}

// aliceStores has Alice open params' link in her browser, which signs her in to urlflow
// through her session at the provider, and store value on the form; it returns once her
// MCP client alice has the completion. The consent page's screenshot is named shot.
func (p *production) aliceStores(t *testing.T, alice *client, params *sdk.ElicitParams, value, shot string) {
	t.Helper()
	if status := p.alice.Navigate(t, params.URL); status != http.StatusOK {
		t.Fatalf("Alice opening her link got %d:\n%s", status, p.alice.Text(t, "main"))
	}
	p.alice.Screenshot(t, shot)
	if !strings.Contains(p.alice.Text(t, "header"), "alice") {
		t.Fatalf("the page does not say who is signed in: %s", p.alice.Text(t, "header"))
	}
	p.alice.continueToForm(t)
	if status := p.alice.enterSecret(t, value); status != http.StatusOK {
		t.Fatalf("saving the secret got %d", status)
	}
	alice.waitCompletion(params.ElicitationID, 30*time.Second)
}

// A browser coming back from the provider with an answer that is not its own (replayed,
// forged, or for another browser) is refused and not signed in.
func TestServeRefusesSignInAnswersThatAreNotThisBrowsers(t *testing.T) {
	t.Parallel()
	p := startProduction(t, "error")
	for name, query := range map[string]string{
		"no state":         "code=abc",
		"forged state":     "code=abc&state=forged",
		"provider said no": "error=access_denied&state=whatever",
	} {
		t.Run(name, func(t *testing.T) {
			status := p.bob.Navigate(t, p.s.BaseURL+"/auth/callback?"+query)
			if status < 400 {
				t.Fatalf("got %d", status)
			}
			// Still signed out: a page that needs sign-in sends the browser to the provider.
			p.bob.Navigate(t, p.s.BaseURL+"/e/"+randomID())
			if loc := p.bob.Location(t); !strings.HasPrefix(loc, p.idp.Issuer) {
				t.Fatalf("after a refused sign-in answer the browser is at %s, not at the provider's sign-in", loc)
			}
		})
	}
}

// metrics reads /metrics with the operator token, after checking it refuses anyone else.
func (p *production) metrics(t *testing.T) string {
	t.Helper()
	if resp, err := http.Get(p.s.BaseURL + "/metrics"); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("/metrics without the operator token: %v %v", resp, err)
	}
	req, _ := http.NewRequest(http.MethodGet, p.s.BaseURL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+p.operatorToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d", resp.StatusCode)
	}
	return string(body)
}

// Opaque access tokens are checked at the issuer by introspection, and a token without a
// required scope is refused with 403 and the scope in WWW-Authenticate.
func TestServeIntrospectsOpaqueTokensAndRequiresScopes(t *testing.T) {
	t.Parallel()
	t.Run("opaque token by introspection", func(t *testing.T) {
		t.Parallel()
		p := startProductionWith(t, productionOptions{style: "push", tokenFormat: "opaque",
			env: []string{"URLFLOW_OIDC_INTROSPECTION=true"}})
		token := p.idp.accessToken(t, p.catcher, p.alice, "alice", "alice-pw", p.resource)
		if strings.Count(token, ".") == 2 {
			t.Fatal("the provider issued a JWT: the test would not exercise introspection")
		}
		if resp := initialize(t, p.resource, token); resp.StatusCode != http.StatusOK {
			t.Fatalf("an active opaque token got %d", resp.StatusCode)
		}
		if resp := initialize(t, p.resource, "opaque-but-unknown-token"); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("an unknown opaque token got %d", resp.StatusCode)
		}
	})
	t.Run("required scope", func(t *testing.T) {
		t.Parallel()
		p := startProductionWith(t, productionOptions{style: "push", env: []string{"URLFLOW_OIDC_SCOPES=mcp:admin"}})
		token := p.idp.accessToken(t, p.catcher, p.alice, "alice", "alice-pw", p.resource) // scope mcp only
		resp := initialize(t, p.resource, token)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(resp.Header.Get("WWW-Authenticate"), `scope="mcp:admin"`) {
			t.Fatalf("a token without the required scope: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
		var body map[string]string
		if code := p.s.getJSON("/api/v1/elicitations/"+randomID(), token, &body); code != http.StatusForbidden {
			t.Fatalf("the API with a token without the required scope: %d", code)
		}
	})
}
