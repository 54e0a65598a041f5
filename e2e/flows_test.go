package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/urlflow/urlflow/internal/redistest"
)

// canary is the secret entered in the browser. It must appear nowhere but encrypted.
const canary = "demo_CANARYx7Qk2mZp9LwVt4Rb"

func TestPushStyleCompletesAFullFlow(t *testing.T) {
	t.Parallel()
	rs, s, c, dev := startWithDev(t, "push")

	call := c.callAsync("set_secret", map[string]any{"name": "demo_api_key"})
	params := c.nextElicitation(30 * time.Second)
	if params.Mode != "url" || !strings.HasPrefix(params.URL, s.BaseURL+"/e/") || params.ElicitationID == "" {
		t.Fatalf("elicitation/create: %+v", params)
	}
	if !strings.HasSuffix(params.URL, "/e/"+params.ElicitationID) {
		t.Fatalf("the URL %s carries more than the elicitation ID", params.URL)
	}

	dev.open(t, params.URL)
	dev.Screenshot(t, "flow-consent")
	if got := s.status(params.ElicitationID, s.Token).State; got != "in_progress" {
		t.Fatalf("after the owner opened the URL the state is %s, want in_progress", got)
	}
	dev.continueToForm(t)
	dev.Screenshot(t, "flow-secret-form")
	if status := dev.enterSecret(t, canary); status != http.StatusOK {
		t.Fatalf("saving the secret answered %d", status)
	}
	dev.Screenshot(t, "flow-done")

	c.waitCompletion(params.ElicitationID, 30*time.Second)
	res := await(t, call, time.Minute)
	sc := structured(t, res)
	if res.IsError || str(sc, "status") != "stored" || str(sc, "elicitationId") != params.ElicitationID {
		t.Fatalf("set_secret result: %s %v", text(res), sc)
	}

	e := s.waitDelivered(params.ElicitationID, s.Token)
	if e.State != "complete" || e.URL != "" {
		t.Fatalf("after the flow: state %s url %q", e.State, e.URL)
	}
	requireEvents(t, e, "created", "client_accept", "browser_open", "page_continue", "verified", "notified")
	if e.Delivery.WrittenAt == nil || e.Delivery.Attempts < 1 {
		t.Fatalf("delivery not recorded as written: %+v", e.Delivery)
	}

	again := c.CallOK("set_secret", map[string]any{"name": "demo_api_key"})
	if str(structured(t, again), "status") != "stored" || !strings.Contains(text(again), "already stored") {
		t.Fatalf("second set_secret: %s", text(again))
	}
	requireNoCanary(t, rs, map[string]string{"MCP traffic": c.Traffic.String(), "urlflow output": s.Output()})
}

func TestErrorStyleCompletesAFullFlow(t *testing.T) {
	t.Parallel()
	rs, s, c, dev := startWithDev(t, "error")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := c.Call(ctx, "set_secret", map[string]any{"name": "demo_api_key"})
	params := urlElicitationRequired(t, err)[0]
	if params.Mode != "url" || params.ElicitationID == "" || !strings.HasPrefix(params.URL, s.BaseURL+"/e/") {
		t.Fatalf("−32042 elicitation: %+v", params)
	}
	if got := s.status(params.ElicitationID, s.Token).State; got != "pending" {
		t.Fatalf("after −32042 the state is %s, want pending", got)
	}

	// Like a real client: open the URL, wait for the notification, call again.
	dev.completeSecret(t, params.URL, canary)
	c.waitCompletion(params.ElicitationID, 30*time.Second)
	res := c.CallOK("set_secret", map[string]any{"name": "demo_api_key"})
	if res.IsError || str(structured(t, res), "status") != "stored" {
		t.Fatalf("retry after completion: %s", text(res))
	}
	e := s.waitDelivered(params.ElicitationID, s.Token)
	if e.State != "complete" {
		t.Fatalf("state %s, want complete", e.State)
	}
	requireEvents(t, e, "created", "browser_open", "verified", "notified")
	requireNoCanary(t, rs, map[string]string{"MCP traffic": c.Traffic.String(), "urlflow output": s.Output()})
}

func TestNotificationGoesOnlyToTheOriginatingSession(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	s := startServer(t, serverConfig{Redis: rs, Style: "error"})
	alice := s.devToken("alice")
	origin := connect(t, s, clientConfig{Token: alice, URLMode: true})
	sameUser := connect(t, s, clientConfig{Token: alice, URLMode: true})
	otherUser := connect(t, s, clientConfig{Token: s.devToken("bob"), URLMode: true})
	person := newPerson(t, sharedBrowser(t), "alice")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := origin.Call(ctx, "set_secret", map[string]any{"name": "demo_api_key"})
	params := urlElicitationRequired(t, err)[0]
	person.completeSecret(t, params.URL, canary)

	origin.waitCompletion(params.ElicitationID, 30*time.Second)
	// The originating session got its notification; give a misdirected one time to arrive.
	sameUser.noCompletion(2 * time.Second)
	otherUser.noCompletion(0)
}

func TestOtherUserIsRefusedAndNothingChanges(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	s := startServer(t, serverConfig{Redis: rs, Style: "error"})
	alice := s.devToken("alice")
	c := connect(t, s, clientConfig{Token: alice, URLMode: true})
	bob := newPerson(t, sharedBrowser(t), "bob")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := c.Call(ctx, "set_secret", map[string]any{"name": "demo_api_key"})
	params := urlElicitationRequired(t, err)[0]

	if status := bob.open(t, params.URL); status != http.StatusForbidden {
		t.Fatalf("Bob opening Alice's URL got %d, want 403", status)
	}
	bob.Screenshot(t, "flow-refused")
	page := strings.ToLower(bob.Text(t, "main"))
	if !strings.Contains(page, "another account") && !strings.Contains(page, "not for you") {
		t.Fatalf("the refusal page does not explain itself:\n%s", page)
	}
	e := s.status(params.ElicitationID, alice)
	if e.State != "pending" {
		t.Fatalf("after Bob opened it the state is %s, want pending (unchanged)", e.State)
	}
	last := e.History[len(e.History)-1]
	if last.Event != "other_user_opened" || last.From != "pending" || last.To != "pending" {
		t.Fatalf("the refusal is not recorded as a no-change event: %+v", last)
	}
	if !strings.Contains(s.Output(), "opened by another user") {
		t.Fatal("the refusal is not logged")
	}
	// Bob's own status call cannot see it.
	var unknown map[string]string
	if code := s.getJSON("/api/v1/elicitations/"+params.ElicitationID, s.devToken("bob"), &unknown); code != http.StatusNotFound || unknown["state"] != "unknown" {
		t.Fatalf("Bob reading Alice's elicitation: %d %v", code, unknown)
	}
}

func TestClientWithoutURLModeGetsTheFallbackAndSucceedsOnTheNextCall(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	s := startServer(t, serverConfig{Redis: rs, Style: "push"})
	c := connect(t, s, clientConfig{Token: s.Token, URLMode: false})
	dev := newPerson(t, sharedBrowser(t), "dev")

	res := c.CallOK("set_secret", map[string]any{"name": "demo_api_key"})
	sc := structured(t, res)
	if res.IsError || str(sc, "status") != "user_action_required" {
		t.Fatalf("fallback result: isError=%v %v", res.IsError, sc)
	}
	url, id := str(sc, "url"), str(sc, "elicitationId")
	if !strings.HasPrefix(url, s.BaseURL+"/e/") || id == "" || sc["expiresAt"] == nil {
		t.Fatalf("fallback result lacks url, elicitationId or expiresAt: %v", sc)
	}
	words := text(res)
	for _, want := range []string{url, "browser", "same request"} {
		if !strings.Contains(words, want) {
			t.Errorf("fallback text does not mention %q:\n%s", want, words)
		}
	}
	select {
	case p := <-c.Elicitations:
		t.Fatalf("a client without URL mode got elicitation/create: %+v", p)
	default:
	}

	// The same call before the browser step reuses the same elicitation.
	if again := structured(t, c.CallOK("set_secret", map[string]any{"name": "demo_api_key"})); str(again, "elicitationId") != id {
		t.Fatalf("a second call started another elicitation: %v", again)
	}

	dev.completeSecret(t, url, canary)
	res = c.CallOK("set_secret", map[string]any{"name": "demo_api_key"})
	if str(structured(t, res), "status") != "stored" {
		t.Fatalf("after the browser step: %s", text(res))
	}
	// The completion notification belongs to URL mode, which this client did not declare.
	e := s.waitFor(id, s.Token, "skipped delivery", 10*time.Second,
		func(e elicitation) bool { return strings.HasPrefix(e.Delivery.LastError, "not sent") })
	if e.Delivery.WrittenAt != nil {
		t.Fatalf("a notification was written to a client without URL mode: %+v", e.Delivery)
	}
	c.noCompletion(0)
	requireNoCanary(t, rs, map[string]string{"MCP traffic": c.Traffic.String(), "urlflow output": s.Output()})
}
