package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/urlflow/urlflow/internal/redistest"
)

// TestAnOperatorFixesStuckFlowsInTheBrowser: in headless Chromium, urlflow dev's
// development operator finds a stuck flow on /admin, opens its timeline, cancels it with a
// reason (and a confirmation), starts a new attempt of it, and a user who is not an
// operator is refused. Flows are stuck after a second here (operators.stuck_after).
func TestAnOperatorFixesStuckFlowsInTheBrowser(t *testing.T) {
	t.Parallel()
	demo, err := os.ReadFile("../cmd/urlflow/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(t.TempDir(), "urlflow.yaml")
	if err := os.WriteFile(config, append(demo, "\noperators:\n  stuck_after: {pending: 1s}\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, serverConfig{Redis: redistest.Start(t), Style: "error", ConfigFile: config})
	alices := askErrorStyle(t, connect(t, s, clientConfig{Token: s.devToken("alice"), URLMode: true})).ElicitationID
	bobs := askErrorStyle(t, connect(t, s, clientConfig{Token: s.devToken("bob"), URLMode: true})).ElicitationID
	time.Sleep(1100 * time.Millisecond)

	b := sharedBrowser(t)
	op := newPerson(t, b, "operator")
	if status := op.open(t, s.BaseURL+"/admin"); status != http.StatusOK {
		t.Fatalf("/admin answered %d:\n%s", status, op.Text(t, "main"))
	}
	stuck := op.Text(t, `section[aria-labelledby="stuck"]`)
	if !strings.Contains(stuck, alices[:12]) || !strings.Contains(stuck, bobs[:12]) || !strings.Contains(stuck, "stuck") {
		t.Fatalf("the stuck flows are not listed:\n%s", stuck)
	}
	op.Screenshot(t, "operator-stuck")

	// Alice's flow: its timeline, then a cancel with a reason, confirmed.
	op.Submit(t, `section[aria-labelledby="stuck"] a[href="/admin/flows/`+alices+`"]`)
	if timeline := op.Text(t, `section[aria-labelledby="timeline"]`); !strings.Contains(timeline, "created") {
		t.Fatalf("the timeline does not show the creation:\n%s", timeline)
	}
	op.Screenshot(t, "operator-flow")
	op.Fill(t, `#reason-cancel`, "the user asked on the helpdesk")
	op.Submit(t, `form[action$="/cancel"] button[type="submit"]`)
	if text := op.Text(t, "main"); !strings.Contains(text, "Cancel this flow?") || !strings.Contains(text, "the user asked on the helpdesk") {
		t.Fatalf("no confirmation step:\n%s", text)
	}
	op.Screenshot(t, "operator-confirm")
	op.Submit(t, `form[action$="/cancel"] button[type="submit"]`)
	if text := op.Text(t, "main"); !strings.Contains(text, "The flow is cancelled.") || !strings.Contains(text, "browser operator") {
		t.Fatalf("after the cancel:\n%s", text)
	}
	e := s.status(alices, s.devToken("alice"))
	cancelled := false
	for _, h := range e.History {
		cancelled = cancelled || h.Event == "cancel" && h.Actor == "operator" && h.Reason == "the user asked on the helpdesk"
	}
	if e.State != "cancelled" || !cancelled {
		t.Fatalf("alice's flow is %s, history %+v", e.State, e.History)
	}

	// A new attempt of it, from the same page.
	op.Fill(t, `#reason-retry`, "she wants to try again")
	op.Submit(t, `form[action$="/retry"] button[type="submit"]`)
	op.Submit(t, `form[action$="/retry"] button[type="submit"]`)
	if text := op.Text(t, "main"); !strings.Contains(text, "A new attempt started") || !strings.Contains(text, "pending") {
		t.Fatalf("after the retry:\n%s", text)
	}
	op.Screenshot(t, "operator-retried")

	// Bob is no operator.
	bob := newPerson(t, b, "bob")
	if status := bob.open(t, s.BaseURL+"/admin"); status != http.StatusForbidden {
		t.Fatalf("bob opening /admin got %d", status)
	}
	if e := s.status(bobs, s.devToken("bob")); e.State != "pending" {
		t.Fatalf("bob's flow is %s", e.State)
	}
}
