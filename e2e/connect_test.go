package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/urlflow/urlflow/internal/redistest"
	"github.com/urlflow/urlflow/oauth/identity"
	"github.com/urlflow/urlflow/oauth/providers"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/credentials"
	"github.com/urlflow/urlflow/state/vault"
)

// Connecting a third-party account: a second real OAuth server (oidc-provider as "Acme")
// plays the provider, with a protected API that checks its tokens for real.

const acmeSecret = "acme-client-secret"

// connectSetup is urlflow dev with the provider acme configured, the acme server, and
// Alice at a browser.
type connectSetup struct {
	rs    *redistest.Server
	s     *server
	acme  *idp
	alice *person
}

func startConnect(t *testing.T, style string, acmeAccessTTL int) *connectSetup {
	t.Helper()
	acme, config := startAcme(t, acmeAccessTTL)
	rs := redistest.Start(t)
	s := onFreePort(t, func(port int) (*server, error) {
		acme.allowRedirect(t, fmt.Sprintf("http://127.0.0.1:%d", port))
		return tryServer(t, serverConfig{Redis: rs, Style: style, Addr: fmt.Sprintf("127.0.0.1:%d", port),
			ConfigFile: config, Env: []string{"ACME_SECRET=" + acmeSecret}})
	})
	return &connectSetup{rs: rs, s: s, acme: acme, alice: newPerson(t, sharedBrowser(t), "alice")}
}

// startAcme starts the third-party provider and writes urlflow's configuration file naming
// it; it returns the provider and the file. allowRedirect registers urlflow's redirect URI
// once urlflow's port is known.
func startAcme(t *testing.T, acmeAccessTTL int) (*idp, string) {
	t.Helper()
	acme := startIDP(t, map[string]any{
		"role": "thirdparty",
		"accounts": []map[string]any{
			{"id": "alice", "password": "alice-acme-pw", "email": "alice@acme.test", "name": "Alice"},
			{"id": "bob", "password": "bob-acme-pw", "email": "bob@acme.test", "name": "Bob"},
		},
		"scopes": []string{"acme.read"},
		"ttl":    map[string]any{"accessToken": acmeAccessTTL},
	})
	config := filepath.Join(t.TempDir(), "urlflow.yaml")
	os.WriteFile(config, []byte(acmeProviderConfig(acme)), 0o600)
	return acme, config
}

// allowRedirect registers urlflow at public as acme's client "urlflow-acme" (again, with
// this redirect URI, if it was registered before).
func (acme *idp) allowRedirect(t *testing.T, public string) {
	t.Helper()
	acme.register(t, "/test/clients", map[string]any{"client_id": "urlflow-acme", "client_secret": acmeSecret,
		"redirect_uris": []string{public + "/oauth/callback"}, "grant_types": []string{"authorization_code", "refresh_token"},
		"token_endpoint_auth_method": "client_secret_basic"})
}

// acmeProviderConfig is the providers section of urlflow's configuration for acme.
func acmeProviderConfig(acme *idp) string {
	return fmt.Sprintf(`
providers:
  - name: acme
    label: Acme
    issuer: %s
    client_id: urlflow-acme
    client_secret_env: ACME_SECRET
    scopes: [openid, email, acme.read]
    api:
      base_url: %s/api
      methods: [GET]
`, acme.Issuer, acme.Issuer)
}

// connectInBrowser takes person through the connect page, the provider's login and
// consent, and back.
func (cs *connectSetup) connectInBrowser(t *testing.T, p *person, url, account, password string, shots bool) int {
	t.Helper()
	p.open(t, url)
	if shots {
		p.Screenshot(t, "connect-consent")
	}
	p.Submit(t, `form[action$="/authorize"] button[type="submit"]`)
	if shots && strings.Contains(p.HTML(t), `name="password"`) {
		p.Screenshot(t, "connect-provider-login")
	}
	if strings.Contains(p.HTML(t), `name="password"`) {
		p.Fill(t, `input[name="login"]`, account)
		p.Fill(t, `input[name="password"]`, password)
		p.Submit(t, `button#submit`)
	}
	status := 0
	if strings.Contains(p.HTML(t), `id="approve"`) {
		if shots {
			p.Screenshot(t, "connect-provider-consent")
		}
		status = p.Submit(t, `button#approve`)
	}
	if shots {
		p.Screenshot(t, "connect-done")
	}
	return status
}

// connectAlice connects Alice's Acme account (error style) with a go-sdk client of hers,
// and returns the client and the elicitation.
func (cs *connectSetup) connectAlice(t *testing.T) (*client, *sdk.ElicitParams) {
	t.Helper()
	c := connect(t, cs.s, clientConfig{Token: cs.s.devToken("alice"), URLMode: true})
	_, err := c.Call(t.Context(), "connect", map[string]any{"provider": "acme"})
	params := urlElicitationRequired(t, err)[0]
	cs.connectInBrowser(t, cs.alice, params.URL, "alice", "alice-acme-pw", false)
	c.waitCompletion(params.ElicitationID, 30*time.Second)
	return c, params
}

// storedToken opens the sealed token of user's connection to acme with urlflow dev's own
// keys, so that the test can look for it where it must not be.
func (cs *connectSetup) storedToken(t *testing.T, user string) providers.Token {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(cs.s.configHome, "urlflow", "dev.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dev struct{ Keys string }
	json.Unmarshal(raw, &dev)
	ring, err := vault.ParseKeyRing(dev.Keys)
	if err != nil {
		t.Fatal(err)
	}
	rdb, err := state.Connect(t.Context(), cs.rs.URL(), state.Standalone)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	u := state.User{Issuer: identity.DevIssuer, Subject: user}
	c, err := credentials.NewStore(rdb, credentials.Options{}).Get(t.Context(), u, "acme")
	if err != nil {
		t.Fatalf("no stored connection: %v", err)
	}
	secret, err := vault.NewVault(ring).Open(u, "acme", c.Sealed)
	if err != nil {
		t.Fatal(err)
	}
	var tok providers.Token
	if err := json.Unmarshal([]byte(secret.Reveal()), &tok); err != nil {
		t.Fatal(err)
	}
	return tok
}

// acmeStats returns the provider's count of token requests by grant type.
func (cs *connectSetup) acmeStats(t *testing.T) map[string]any {
	t.Helper()
	resp, err := http.Get(cs.acme.Issuer + "/test/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var stats map[string]any
	json.NewDecoder(resp.Body).Decode(&stats)
	return stats
}

func (cs *connectSetup) acmePost(t *testing.T, path string) {
	t.Helper()
	resp, err := http.Post(cs.acme.Issuer+path, "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %d", path, resp.StatusCode)
	}
}

func TestConnectAThirdPartyAccountAndUseIt(t *testing.T) {
	t.Parallel()
	cs := startConnect(t, "push", 3600)
	c := connect(t, cs.s, clientConfig{Token: cs.s.devToken("alice"), URLMode: true})

	call := c.callAsync("connect", map[string]any{"provider": "acme"})
	params := c.nextElicitation(30 * time.Second)
	if status := cs.connectInBrowser(t, cs.alice, params.URL, "alice", "alice-acme-pw", true); status != http.StatusOK {
		t.Fatalf("back from the provider: %d\n%s", status, cs.alice.Text(t, "main"))
	}
	if !strings.Contains(cs.alice.Text(t, "main"), "alice@acme.test") {
		t.Fatalf("the done page does not name the account: %s", cs.alice.Text(t, "main"))
	}
	res := await(t, call, time.Minute)
	sc := structured(t, res)
	if res.IsError || str(sc, "status") != "connected" || str(sc, "account") != "alice@acme.test" {
		t.Fatalf("connect: %s %v", text(res), sc)
	}
	e := cs.s.waitDelivered(params.ElicitationID, cs.s.devToken("alice"))
	requireEvents(t, e, "created", "client_accept", "browser_open", "page_continue", "verified", "notified")

	// call_api uses the token against the provider's API; the token never shows.
	api := c.CallOK("call_api", map[string]any{"name": "acme", "method": "GET", "path": "/me"})
	if api.IsError || structured(t, api)["status"] != float64(http.StatusOK) || !strings.Contains(text(api), `"account":"alice"`) {
		t.Fatalf("call_api against Acme: %s", text(api))
	}
	list := c.CallOK("list_connections", nil)
	conns, _ := structured(t, list)["connections"].([]any)
	if len(conns) != 1 || conns[0].(map[string]any)["account"] != "alice@acme.test" || conns[0].(map[string]any)["scopes"] == nil {
		t.Fatalf("list_connections: %s", text(list))
	}
	tok := cs.storedToken(t, "alice")
	if tok.AccessToken == "" || tok.RefreshToken == "" {
		t.Fatalf("stored token incomplete: access %v refresh %v", tok.AccessToken != "", tok.RefreshToken != "")
	}
	for name, where := range map[string]string{"MCP traffic": c.Traffic.String(), "urlflow output": cs.s.Output()} {
		if strings.Contains(where, tok.AccessToken) || strings.Contains(where, tok.RefreshToken) {
			t.Fatalf("a token appears in %s", name)
		}
	}

	// A replayed callback after success changes nothing: complete stays complete.
	cs.alice.Navigate(t, cs.s.BaseURL+"/oauth/callback?state=replayed&code=x")
	if got := cs.s.status(params.ElicitationID, cs.s.devToken("alice")).State; got != "complete" {
		t.Fatalf("after a replayed callback the state is %s", got)
	}

	// Disconnect revokes at the provider, then deletes.
	before := cs.acmeStats(t)
	res = c.CallOK("disconnect", map[string]any{"name": "acme"})
	if sc := structured(t, res); sc["deleted"] != true || sc["revoked"] != true {
		t.Fatalf("disconnect: %s", text(res))
	}
	if after := cs.acmeStats(t); fmt.Sprint(after["revocation"]) == fmt.Sprint(before["revocation"]) {
		t.Fatalf("no revocation reached the provider: %v -> %v", before["revocation"], after["revocation"])
	}
}

func TestAProviderRefusalEndsFailedAndTheUserCanTryAgain(t *testing.T) {
	t.Parallel()
	cs := startConnect(t, "error", 3600)
	c := connect(t, cs.s, clientConfig{Token: cs.s.devToken("alice"), URLMode: true})
	_, err := c.Call(t.Context(), "connect", map[string]any{"provider": "acme"})
	params := urlElicitationRequired(t, err)[0]

	cs.alice.open(t, params.URL)
	cs.alice.Submit(t, `form[action$="/authorize"] button[type="submit"]`)
	cs.alice.Fill(t, `input[name="login"]`, "alice")
	cs.alice.Fill(t, `input[name="password"]`, "alice-acme-pw")
	cs.alice.Submit(t, `button#submit`)
	if status := cs.alice.Submit(t, `button#deny`); status != http.StatusUnprocessableEntity {
		t.Fatalf("after denying at the provider: %d\n%s", status, cs.alice.Text(t, "main"))
	}
	cs.alice.Screenshot(t, "connect-denied")
	if got := cs.s.status(params.ElicitationID, cs.s.devToken("alice")).State; got != "failed" {
		t.Fatalf("state %s, want failed", got)
	}
	if res := c.CallOK("list_connections", nil); strings.Contains(text(res), "acme") {
		t.Fatalf("a refused connection was stored: %s", text(res))
	}
	// Try again: back to the consent page, through the provider, connected.
	cs.alice.Submit(t, `a[href="/e/`+params.ElicitationID+`"]`)
	cs.connectInBrowser(t, cs.alice, params.URL, "alice", "alice-acme-pw", false)
	c.waitCompletion(params.ElicitationID, 30*time.Second)
	requireEvents(t, cs.s.status(params.ElicitationID, cs.s.devToken("alice")), "verify_failed", "browser_open", "verified")
}

func TestConcurrentCallsRefreshAnExpiredTokenOnce(t *testing.T) {
	t.Parallel()
	cs := startConnect(t, "error", 3)
	c, _ := cs.connectAlice(t)

	first := cs.storedToken(t, "alice")
	time.Sleep(time.Until(first.Expiry)) // the provider's clock decides: wait until the token has expired
	cs.acmePost(t, "/test/stats/reset")
	const calls = 8
	var wg sync.WaitGroup
	errs := make(chan string, calls)
	for range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			res, err := c.Call(ctx, "call_api", map[string]any{"name": "acme", "method": "GET", "path": "/me"})
			if err != nil || res.IsError || structured(t, res)["status"] != float64(http.StatusOK) {
				errs <- fmt.Sprintf("%v %v", err, res)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Errorf("a concurrent call failed: %s", e)
	}
	stats := cs.acmeStats(t)
	token, _ := stats["token"].(map[string]any)
	if fmt.Sprint(token["refresh_token"]) != "1" {
		t.Fatalf("refreshes at the provider: %v, want exactly 1 (stats %v)", token["refresh_token"], stats)
	}
	if next := cs.storedToken(t, "alice"); next.RefreshToken == first.RefreshToken || next.AccessToken == first.AccessToken {
		t.Fatal("the rotated tokens were not stored")
	}
}

func TestARevokedGrantAsksTheUserToConnectAgain(t *testing.T) {
	t.Parallel()
	cs := startConnect(t, "error", 3)
	c, params := cs.connectAlice(t)

	cs.acmePost(t, "/test/revoke?account=alice")
	time.Sleep(time.Until(cs.storedToken(t, "alice").Expiry)) // until the access token has expired
	_, err := c.Call(t.Context(), "call_api", map[string]any{"name": "acme", "method": "GET", "path": "/me"})
	again := urlElicitationRequired(t, err)[0]
	if again.ElicitationID == params.ElicitationID {
		t.Fatal("no new elicitation for the reconnection")
	}
	if res := c.CallOK("list_connections", nil); !strings.Contains(text(res), "needs to be connected again") {
		t.Fatalf("list_connections does not say it needs reconnecting: %s", text(res))
	}
	cs.connectInBrowser(t, cs.alice, again.URL, "alice", "alice-acme-pw", false)
	c.waitCompletion(again.ElicitationID, 30*time.Second)
	if res := c.CallOK("call_api", map[string]any{"name": "acme", "method": "GET", "path": "/me"}); structured(t, res)["status"] != float64(http.StatusOK) {
		t.Fatalf("after reconnecting: %s", text(res))
	}
}

func TestBobCannotOpenOrUseAlicesConnection(t *testing.T) {
	t.Parallel()
	cs := startConnect(t, "error", 3600)
	alice := connect(t, cs.s, clientConfig{Token: cs.s.devToken("alice"), URLMode: true})
	bob := connect(t, cs.s, clientConfig{Token: cs.s.devToken("bob"), URLMode: true})
	bobAtBrowser := newPerson(t, sharedBrowser(t), "bob")

	_, err := alice.Call(t.Context(), "connect", map[string]any{"provider": "acme"})
	params := urlElicitationRequired(t, err)[0]
	if status := bobAtBrowser.open(t, params.URL); status != http.StatusForbidden {
		t.Fatalf("Bob opening Alice's connect link got %d", status)
	}
	cs.connectInBrowser(t, cs.alice, params.URL, "alice", "alice-acme-pw", false)
	alice.waitCompletion(params.ElicitationID, 30*time.Second)

	_, err = bob.Call(t.Context(), "call_api", map[string]any{"name": "acme", "method": "GET", "path": "/me"})
	if bobs := urlElicitationRequired(t, err)[0]; bobs.ElicitationID == params.ElicitationID {
		t.Fatal("Bob was given Alice's elicitation")
	}
	if res := bob.CallOK("list_connections", nil); strings.Contains(text(res), "acme") {
		t.Fatalf("Bob lists Alice's connection: %s", text(res))
	}
}

// The whole product in production: the TypeScript SDK client signs in to urlflow by the
// real MCP authorization flow (discovery from the 401, dynamic registration, PKCE, the
// resource indicator), then connects Alice's Acme account, then uses it through call_api.
func TestTypeScriptClientSignsInByOAuthThenConnectsAndUsesAnAccount(t *testing.T) {
	t.Parallel()
	acme, _ := startAcme(t, 3600)
	p := startProductionWith(t, productionOptions{style: "push", moreConfig: acmeProviderConfig(acme),
		env: []string{"ACME_SECRET=" + acmeSecret}, atPublicURL: func(public string) { acme.allowRedirect(t, public) }})

	n := startNode(t, "client-v1.mjs", p.s, "", "--oauth", "--url-mode",
		"--tool", "connect", "--args", `{"provider":"acme"}`,
		"--then", "call_api", "--then-args", `{"name":"acme","method":"GET","path":"/me"}`)
	auth := n.next("authorize", 30*time.Second)
	if !strings.HasPrefix(auth.URL, p.idp.Issuer+"/auth?") || !strings.Contains(auth.URL, "resource="+url.QueryEscape(p.resource)) ||
		!strings.Contains(auth.URL, "code_challenge_method=S256") {
		t.Fatalf("the client's authorization request: %s", auth.URL)
	}
	p.alice.Navigate(t, auth.URL)
	p.alice.Screenshot(t, "issuer-login")
	p.idp.login(t, p.alice, "alice", "alice-pw")
	n.next("authorized", 30*time.Second)
	if got := n.next("connected", 30*time.Second).ProtocolVersion; got != lastLegacy {
		t.Fatalf("connected at %s", got)
	}

	ev := n.next("elicitation", 30*time.Second)
	// Alice's browser is signed in at the issuer already: urlflow's sign-in goes through.
	p.alice.Navigate(t, ev.URL)
	p.alice.Submit(t, `form[action$="/authorize"] button[type="submit"]`)
	acme.login(t, p.alice, "alice", "alice-acme-pw")
	if !strings.Contains(p.alice.Text(t, "main"), "connected") {
		t.Fatalf("after Acme: %s", p.alice.Text(t, "main"))
	}
	if sc := n.next("result", time.Minute).structured(t); str(sc, "status") != "connected" || str(sc, "account") != "alice@acme.test" {
		t.Fatalf("connect: %v", sc)
	}
	if sc := n.next("result", time.Minute).structured(t); sc["status"] != float64(http.StatusOK) {
		t.Fatalf("call_api against Acme: %v", sc)
	}
	n.finish()
	if strings.Contains(n.Traffic(), "eyJ") {
		t.Fatal("a JWT appears in the client's MCP traffic")
	}
	requireEvents(t, p.s.status(idFromURL(ev.URL), p.operatorToken), "created", "client_accept", "browser_open", "page_continue", "verified")
}

// connect works in the 2026-07-28 era too: input_required, the browser, the retry.
func TestConnectByMultiRoundTrip(t *testing.T) {
	t.Parallel()
	cs := startConnect(t, "push", 3600)
	c := connect(t, cs.s, clientConfig{Token: cs.s.devToken("alice"), URLMode: true, ProtocolVersion: modern})
	call := c.callAsync("connect", map[string]any{"provider": "acme"})
	params := c.nextElicitation(30 * time.Second)
	cs.connectInBrowser(t, cs.alice, params.URL, "alice", "alice-acme-pw", false)
	if sc := structured(t, await(t, call, 2*time.Minute)); str(sc, "status") != "connected" {
		t.Fatalf("connect by multi round-trip: %v", sc)
	}
	if res := c.CallOK("call_api", map[string]any{"name": "acme", "method": "GET", "path": "/me"}); structured(t, res)["status"] != float64(http.StatusOK) {
		t.Fatalf("call_api: %s", text(res))
	}
}
