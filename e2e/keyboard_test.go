package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/urlflow/urlflow/internal/browsertest"
	"github.com/urlflow/urlflow/internal/redistest"
)

// walkTo presses Tab from the top of p's page until the focus is on selector, and fails the
// test unless the first stop is the skip link and every stop shows a focus indicator on
// the screen (WCAG 2.4.1, 2.4.7, 2.4.11), and unless axe-core finds nothing on the page as
// the running server rendered it.
func walkTo(t *testing.T, p *person, page, selector string) {
	t.Helper()
	stops := p.TabTo(t, selector, 25)
	if stops[0].Element != "a Skip to content" {
		t.Errorf("%s: the first stop is %q, want the skip link", page, stops[0].Element)
	}
	var names []string
	for _, s := range stops {
		names = append(names, s.Element)
		if !s.Indicated || !s.OnScreen {
			t.Errorf("%s: the focus on %q is not seen (indicator %v, on the screen %v)", page, s.Element, s.Indicated, s.OnScreen)
		}
	}
	t.Logf("%s: %d presses of Tab: %q", page, len(stops), names)
	noAxeViolations(t, p, page)
}

// noAxeViolations fails the test for each violation axe-core finds on p's page.
func noAxeViolations(t *testing.T, p *person, page string) {
	t.Helper()
	for _, v := range p.Axe(t) {
		t.Errorf("%s: %s", page, v)
	}
}

// TestAPersonCompletesASecretFlowByKeyboardAlone: in Chromium, with Tab, typing and Enter
// only, alice signs in on the development page, reads the consent page, continues, types
// the secret and saves it. The flow completes.
func TestAPersonCompletesASecretFlowByKeyboardAlone(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverConfig{Redis: redistest.Start(t), Style: "error"})
	asked := askErrorStyle(t, connect(t, s, clientConfig{Token: s.devToken("alice"), URLMode: true}))
	p := newPerson(t, sharedBrowser(t), "alice")

	p.Navigate(t, asked.URL)
	if !strings.Contains(p.Location(t), "/auth/login") {
		t.Fatalf("the link did not ask to sign in: %s", p.Location(t))
	}
	walkTo(t, p, "sign-in", `input[name="name"]`)
	p.Type(t, "alice")
	if status := p.PressEnter(t); status != http.StatusOK || !strings.Contains(p.Location(t), "/e/"+asked.ElicitationID) {
		t.Fatalf("signing in by Enter answered %d at %s", status, p.Location(t))
	}
	walkTo(t, p, "consent", `form[action$="/continue"] button[type="submit"]`)
	if status := p.PressEnter(t); status != http.StatusOK {
		t.Fatalf("Continue by Enter answered %d: %s", status, p.Text(t, "main"))
	}
	walkTo(t, p, "secret form", `input[name="secret"]`)
	p.Type(t, canary)
	if status := p.PressEnter(t); status != http.StatusOK || !strings.Contains(strings.ToLower(p.Text(t, "main")), "stored") {
		t.Fatalf("saving by Enter answered %d: %s", status, p.Text(t, "main"))
	}
	noAxeViolations(t, p, "stored")
	if e := s.status(asked.ElicitationID, s.devToken("alice")); e.State != "complete" {
		t.Errorf("the flow is %s, want complete", e.State)
	}
}

// TestAnOperatorCancelsAFlowByKeyboardAlone: in Chromium, with Tab, typing and Enter only,
// the development operator opens a pending flow from /admin, gives a reason, cancels
// and confirms.
func TestAnOperatorCancelsAFlowByKeyboardAlone(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverConfig{Redis: redistest.Start(t), Style: "error"})
	id := askErrorStyle(t, connect(t, s, clientConfig{Token: s.devToken("alice"), URLMode: true})).ElicitationID
	op := newPerson(t, sharedBrowser(t), "operator")
	if status := op.open(t, s.BaseURL+"/admin?state=pending"); status != http.StatusOK {
		t.Fatalf("/admin answered %d", status)
	}
	op.Navigate(t, s.BaseURL+"/admin?state=pending")
	walkTo(t, op, "admin", `section[aria-labelledby="flows"] a[href="/admin/flows/`+id+`"]`)
	if status := op.PressEnter(t); status != http.StatusOK {
		t.Fatalf("the flow's link by Enter answered %d", status)
	}
	walkTo(t, op, "flow", `#reason-cancel`)
	op.Type(t, "asked on the helpdesk")
	if status := op.PressEnter(t); status != http.StatusOK || !strings.Contains(op.Text(t, "main"), "Cancel this flow?") {
		t.Fatalf("the cancel by Enter answered %d: %s", status, op.Text(t, "main"))
	}
	walkTo(t, op, "confirmation", `form[action$="/cancel"] button[type="submit"]`)
	if status := op.PressEnter(t); status != http.StatusOK || !strings.Contains(op.Text(t, "main"), "The flow is cancelled.") {
		t.Fatalf("the confirmation by Enter answered %d: %s", status, op.Text(t, "main"))
	}
	noAxeViolations(t, op, "cancelled")
	if e := s.status(id, s.devToken("alice")); e.State != "cancelled" {
		t.Errorf("the flow is %s, want cancelled", e.State)
	}
}

// TestAPersonChoosesTheirLanguageByKeyboardAlone: in Chromium, whose browser asks for
// English, alice reaches the language switcher at the foot of the page with Tab, picks
// Deutsch by typing its first letter, and presses Enter on the button: the page, and every
// page after it, is in German.
func TestAPersonChoosesTheirLanguageByKeyboardAlone(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverConfig{Redis: redistest.Start(t), Style: "error"})
	p := newPerson(t, sharedBrowser(t), "alice")
	p.Navigate(t, s.BaseURL+"/")
	walkTo(t, p, "home", `select#language`)
	p.Type(t, "D")
	p.Tab(t, false)
	if status := p.PressEnter(t); status != http.StatusOK {
		t.Fatalf("choosing a language by Enter answered %d", status)
	}
	for _, page := range []string{"/", "/auth/login"} {
		if page != "/" {
			p.Navigate(t, s.BaseURL+page)
		}
		if lang := browsertest.Evaluate[string](t, p.User, `document.documentElement.lang`); lang != "de" {
			t.Errorf("%s after choosing Deutsch: lang %q, want de", page, lang)
		}
	}
	noAxeViolations(t, p, "home in German")
}
