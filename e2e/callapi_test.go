package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/urlflow/urlflow/internal/redistest"
)

// demoAccount is what the dev demo API calls the account of canary ("demo-" and 8 hex
// digits of its SHA-256); see package demoapi.
func whoami(t *testing.T, c *client) (string, map[string]any) {
	t.Helper()
	res := c.CallOK("call_api", map[string]any{"name": "demo_api_key", "method": "GET", "path": "/whoami"})
	sc := structured(t, res)
	if res.IsError {
		t.Fatalf("call_api /whoami: %s", text(res))
	}
	return text(res), sc
}

func TestSetSecretThenCallAPIAgainstTheDemoAPI(t *testing.T) {
	t.Parallel()
	rs, s, c, dev := startWithDev(t, "push")

	call := c.callAsync("set_secret", map[string]any{"name": "demo_api_key"})
	params := c.nextElicitation(30 * time.Second)
	dev.completeSecret(t, params.URL, canary)
	if res := await(t, call, time.Minute); str(structured(t, res), "status") != "stored" {
		t.Fatalf("set_secret: %s", text(res))
	}

	words, sc := whoami(t, c)
	if sc["status"] != float64(http.StatusOK) || !strings.Contains(words, `"account":"demo-`) {
		t.Fatalf("whoami: %s %v", words, sc)
	}
	headers, _ := sc["headers"].(map[string]any)
	if !strings.HasPrefix(str(headers, "X-Demo-Account"), "demo-") {
		t.Fatalf("selected response header missing: %v", headers)
	}

	// The demo API echoes the request, Authorization header included: urlflow redacts it.
	res := c.CallOK("call_api", map[string]any{"name": "demo_api_key", "method": "POST", "path": "/echo",
		"query": map[string]any{"q": "1"}, "body": `{"hello":"world"}`})
	if res.IsError || !strings.Contains(text(res), `"Authorization":"[redacted]"`) || strings.Contains(text(res), "Bearer") || !strings.Contains(text(res), `{\"hello\":\"world\"}`) {
		t.Fatalf("echo: %s", text(res))
	}

	// list_connections shows it, with times, never the value.
	list := c.CallOK("list_connections", nil)
	conns, _ := structured(t, list)["connections"].([]any)
	if len(conns) != 1 {
		t.Fatalf("list_connections: %s", text(list))
	}
	conn := conns[0].(map[string]any)
	if conn["name"] != "demo_api_key" || conn["storedAt"] == nil || conn["verifiedAt"] == nil || conn["lastUsedAt"] == nil {
		t.Fatalf("connection: %v", conn)
	}
	requireNoCanary(t, rs, map[string]string{"MCP traffic": c.Traffic.String(), "urlflow output": s.Output()})
}

func TestCallAPIAsksForAMissingSecretInTheSameCall(t *testing.T) {
	t.Parallel()
	rs, s, c, dev := startWithDev(t, "push")

	call := c.callAsync("call_api", map[string]any{"name": "demo_api_key", "method": "GET", "path": "/whoami"})
	params := c.nextElicitation(30 * time.Second)
	dev.completeSecret(t, params.URL, canary)
	res := await(t, call, time.Minute)
	if res.IsError || structured(t, res)["status"] != float64(http.StatusOK) {
		t.Fatalf("call_api after entering the secret: %s", text(res))
	}
	requireNoCanary(t, rs, map[string]string{"MCP traffic": c.Traffic.String(), "urlflow output": s.Output()})
}

func TestCallAPIWithoutURLModeGivesTheFallbackThenWorks(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	s := startServer(t, serverConfig{Redis: rs})
	c := connect(t, s, clientConfig{Token: s.Token})
	dev := newPerson(t, sharedBrowser(t), "dev")

	res := c.CallOK("call_api", map[string]any{"name": "demo_api_key", "method": "GET", "path": "/whoami"})
	sc := structured(t, res)
	if res.IsError || str(sc, "status") != "user_action_required" {
		t.Fatalf("fallback: %s", text(res))
	}
	dev.completeSecret(t, str(sc, "url"), canary)
	if _, sc := whoami(t, c); sc["status"] != float64(http.StatusOK) {
		t.Fatalf("after the browser step: %v", sc)
	}
}

func TestVerificationFailureEndsFailedAndTheUserCanTryAgain(t *testing.T) {
	t.Parallel()
	_, s, c, dev := startWithDev(t, "error")

	_, err := c.Call(t.Context(), "set_secret", map[string]any{"name": "demo_api_key"})
	params := urlElicitationRequired(t, err)[0]
	dev.open(t, params.URL)
	dev.continueToForm(t)
	// Passes the form's rules, fails the API's check (the demo API refuses revoked keys).
	if status := dev.enterSecret(t, "demo_revokedx7Qk2mZp9LwVt"); status != http.StatusUnprocessableEntity {
		t.Fatalf("a key the API refuses answered %d", status)
	}
	dev.Screenshot(t, "flow-verification-failed")
	page := dev.Text(t, "main")
	if !strings.Contains(page, "401") || !strings.Contains(page, "Nothing was stored") {
		t.Fatalf("the failure page does not explain: %s", page)
	}
	e := s.status(params.ElicitationID, s.Token)
	if e.State != "failed" {
		t.Fatalf("state %s, want failed", e.State)
	}
	last := e.History[len(e.History)-1]
	if last.Event != "verify_failed" || !strings.Contains(last.Reason, "401") {
		t.Fatalf("history: %+v", last)
	}
	if res := c.CallOK("list_connections", nil); strings.Contains(text(res), "demo_api_key") {
		t.Fatalf("a refused key was stored: %s", text(res))
	}

	// Try again from the page: the flow goes back in progress and completes.
	dev.Submit(t, `a[href$="/secret"]`)
	if got := s.status(params.ElicitationID, s.Token).State; got != "in_progress" {
		t.Fatalf("after try again the state is %s", got)
	}
	if status := dev.enterSecret(t, canary); status != http.StatusOK {
		t.Fatalf("the second attempt answered %d", status)
	}
	c.waitCompletion(params.ElicitationID, 30*time.Second)
	requireEvents(t, s.status(params.ElicitationID, s.Token), "verify_failed", "browser_open", "verified")
}

func TestReplacingKeepsTheOldSecretUntilTheNewOneIsVerified(t *testing.T) {
	t.Parallel()
	_, _, c, dev := startWithDev(t, "error")

	_, err := c.Call(t.Context(), "set_secret", map[string]any{"name": "demo_api_key"})
	first := urlElicitationRequired(t, err)[0]
	dev.completeSecret(t, first.URL, canary)
	c.waitCompletion(first.ElicitationID, 30*time.Second)
	before, _ := whoami(t, c)

	_, err = c.Call(t.Context(), "set_secret", map[string]any{"name": "demo_api_key", "replace": true})
	second := urlElicitationRequired(t, err)[0]
	dev.open(t, second.URL)
	if !strings.Contains(strings.ToLower(dev.Text(t, "main")), "replace") {
		t.Fatalf("the consent page does not say it replaces: %s", dev.Text(t, "main"))
	}
	dev.continueToForm(t)
	if now, _ := whoami(t, c); now != before {
		t.Fatalf("while the replacement runs, call_api no longer uses the old key:\n%s\n%s", before, now)
	}
	dev.enterSecret(t, "demo_revokedQk2mZp9LwVt4") // refused by the API
	if now, _ := whoami(t, c); now != before {
		t.Fatal("a refused replacement replaced the old key")
	}
	dev.Submit(t, `a[href$="/secret"]`)
	dev.enterSecret(t, "demo_REPLACEMENTx7Qk2mZp9")
	c.waitCompletion(second.ElicitationID, 30*time.Second)
	if now, _ := whoami(t, c); now == before {
		t.Fatal("after the verified replacement, call_api still uses the old key")
	}
}

func TestAnotherUsersToolsCannotUseListOrDeleteACredential(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	s := startServer(t, serverConfig{Redis: rs, Style: "error"})
	alice := connect(t, s, clientConfig{Token: s.devToken("alice"), URLMode: true})
	bob := connect(t, s, clientConfig{Token: s.devToken("bob"), URLMode: true})
	person := newPerson(t, sharedBrowser(t), "alice")

	_, err := alice.Call(t.Context(), "set_secret", map[string]any{"name": "demo_api_key"})
	params := urlElicitationRequired(t, err)[0]
	person.completeSecret(t, params.URL, canary)
	alice.waitCompletion(params.ElicitationID, 30*time.Second)

	if res := bob.CallOK("list_connections", nil); strings.Contains(text(res), "demo_api_key") {
		t.Fatalf("Bob lists Alice's secret: %s", text(res))
	}
	if res := bob.CallOK("disconnect", map[string]any{"name": "demo_api_key"}); structured(t, res)["deleted"] != false {
		t.Fatalf("Bob deleted something: %s", text(res))
	}
	// Bob's call_api asks Bob for his own key; it never uses Alice's.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = bob.Call(ctx, "call_api", map[string]any{"name": "demo_api_key", "method": "GET", "path": "/whoami"})
	if bobs := urlElicitationRequired(t, err)[0]; bobs.ElicitationID == params.ElicitationID {
		t.Fatal("Bob got Alice's elicitation")
	}
	if _, sc := whoami(t, alice); sc["status"] != float64(http.StatusOK) {
		t.Fatalf("Alice's key stopped working: %v", sc)
	}

	// Alice deletes it; it is gone, and the deletion is in her audit.
	if res := alice.CallOK("disconnect", map[string]any{"name": "demo_api_key"}); structured(t, res)["deleted"] != true {
		t.Fatalf("disconnect: %s", text(res))
	}
	if res := alice.CallOK("list_connections", nil); strings.Contains(text(res), "demo_api_key") {
		t.Fatalf("still listed after disconnect: %s", text(res))
	}
}

func TestOperatorTokensCannotUseCredentials(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	s := startServer(t, serverConfig{Redis: rs})
	resp := initialize(t, s.MCPURL, s.OperatorToken)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("an operator token on /mcp got %d, want 401: operators never reach the tools", resp.StatusCode)
	}
	if strings.Contains(s.Output(), s.OperatorToken) && strings.Count(s.Output(), s.OperatorToken) > 1 {
		t.Fatal("the operator token appears in the logs (beyond the banner)")
	}
}
