package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/urlflow/urlflow/internal/redistest"
)

// Each way a flow can end without success ends in its own state, answers the waiting tool
// honestly, and notifies the originating session.

func TestDeclineInTheClientEndsDeclined(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	s := startServer(t, serverConfig{Redis: rs, Style: "push"})
	c := connect(t, s, clientConfig{Token: s.Token, URLMode: true, Answer: "decline"})

	res := c.CallOK("set_secret", map[string]any{"name": "demo_api_key"})
	sc := structured(t, res)
	if str(sc, "status") != "declined" || !strings.Contains(text(res), "declined") {
		t.Fatalf("result: %s %v", text(res), sc)
	}
	id := str(sc, "elicitationId")
	c.waitCompletion(id, 30*time.Second)
	e := s.waitDelivered(id, s.Token)
	if e.State != "declined" {
		t.Fatalf("state %s, want declined", e.State)
	}
	requireEvents(t, e, "created", "client_decline", "notified")
}

func TestCancelInTheClientEndsCancelled(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	s := startServer(t, serverConfig{Redis: rs, Style: "push"})
	c := connect(t, s, clientConfig{Token: s.Token, URLMode: true, Answer: "cancel"})

	res := c.CallOK("set_secret", map[string]any{"name": "demo_api_key"})
	id := str(structured(t, res), "elicitationId")
	if str(structured(t, res), "status") != "cancelled" {
		t.Fatalf("result: %s", text(res))
	}
	c.waitCompletion(id, 30*time.Second)
	requireEvents(t, s.waitDelivered(id, s.Token), "created", "client_cancel", "notified")
}

func TestDeclineOnThePageEndsDeclined(t *testing.T) {
	t.Parallel()
	_, s, c, dev := startWithDev(t, "push")

	call := c.callAsync("set_secret", map[string]any{"name": "demo_api_key"})
	params := c.nextElicitation(30 * time.Second)
	dev.open(t, params.URL)
	if status := dev.declineOnPage(t); status != http.StatusOK {
		t.Fatalf("decline answered %d", status)
	}
	dev.Screenshot(t, "flow-declined")
	res := await(t, call, time.Minute)
	if str(structured(t, res), "status") != "declined" {
		t.Fatalf("result: %s", text(res))
	}
	c.waitCompletion(params.ElicitationID, 30*time.Second)
	e := s.waitDelivered(params.ElicitationID, s.Token)
	requireEvents(t, e, "client_accept", "browser_open", "page_decline", "notified")
	if e.State != "declined" {
		t.Fatalf("state %s", e.State)
	}

	// A late form post after the end changes nothing and says so.
	if status := dev.open(t, params.URL); status != http.StatusOK {
		t.Fatalf("reopening an ended flow answered %d", status)
	}
	if !strings.Contains(strings.ToLower(dev.Text(t, "main")), "declined") {
		t.Fatalf("reopened page: %s", dev.Text(t, "main"))
	}
}

func TestCancelThroughTheAPIEndsCancelled(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	s := startServer(t, serverConfig{Redis: rs, Style: "push"})
	c := connect(t, s, clientConfig{Token: s.Token, URLMode: true})

	call := c.callAsync("set_secret", map[string]any{"name": "demo_api_key"})
	params := c.nextElicitation(30 * time.Second)
	s.waitState(params.ElicitationID, s.Token, "consented", 10*time.Second)

	var e elicitation
	if code := s.doJSON(http.MethodPost, "/api/v1/elicitations/"+params.ElicitationID+"/cancel", s.Token, nil, &e); code != http.StatusOK || e.State != "cancelled" {
		t.Fatalf("cancel: %d %s", code, e.State)
	}
	res := await(t, call, time.Minute)
	if str(structured(t, res), "status") != "cancelled" {
		t.Fatalf("result: %s", text(res))
	}
	c.waitCompletion(params.ElicitationID, 30*time.Second)
	if code := s.doJSON(http.MethodPost, "/api/v1/elicitations/"+params.ElicitationID+"/cancel", s.Token, nil, &e); code != http.StatusConflict || e.State != "cancelled" {
		t.Fatalf("second cancel: %d %s, want 409 cancelled", code, e.State)
	}
}

func TestTheDeadlineEndsExpiredWithoutAnyReader(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	s := startServer(t, serverConfig{Redis: rs, Style: "error", TTL: "5s"})
	c := connect(t, s, clientConfig{Token: s.Token, URLMode: true})
	dev := newPerson(t, sharedBrowser(t), "dev")

	_, err := c.Call(t.Context(), "set_secret", map[string]any{"name": "demo_api_key"})
	params := urlElicitationRequired(t, err)[0]
	// Nobody reads it: the sweeper expires it and the session is told.
	c.waitCompletion(params.ElicitationID, 30*time.Second)
	e := s.waitDelivered(params.ElicitationID, s.Token)
	if e.State != "expired" {
		t.Fatalf("state %s, want expired", e.State)
	}
	requireEvents(t, e, "created", "deadline", "notified")
	if e.History[1].Actor != "system" {
		t.Fatalf("the deadline was not applied by the system: %+v", e.History[1])
	}
	dev.open(t, params.URL)
	if !strings.Contains(strings.ToLower(dev.Text(t, "main")), "expired") {
		t.Fatalf("the page of an expired link: %s", dev.Text(t, "main"))
	}
	dev.Screenshot(t, "flow-expired")
}

func TestAClientThatNeverAnswersLeavesTheStateUnknown(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	s := startServer(t, serverConfig{Redis: rs, Style: "push"})
	c := connect(t, s, clientConfig{Token: s.Token, URLMode: true, Answer: "fail"})
	dev := newPerson(t, sharedBrowser(t), "dev")

	call := c.callAsync("set_secret", map[string]any{"name": "demo_api_key"})
	params := c.nextElicitation(30 * time.Second)
	e := s.waitState(params.ElicitationID, s.Token, "unknown", 10*time.Second)
	requireEvents(t, e, "created", "no_answer")

	// Unknown is not success, and the user can still finish from the link.
	dev.completeSecret(t, params.URL, canary)
	res := await(t, call, time.Minute)
	if str(structured(t, res), "status") != "stored" {
		t.Fatalf("result: %s", text(res))
	}
	requireEvents(t, s.status(params.ElicitationID, s.Token), "no_answer", "browser_open", "verified")
}
