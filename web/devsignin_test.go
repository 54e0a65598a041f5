package web

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/flow"
)

func TestTheDevelopmentSignInPageSaysItIsDevelopment(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	page := f.browser(t, "alice").get("/auth/login?next=" + url.QueryEscape("/e/ABC"))
	page.want(t, http.StatusOK, "Development", "operator is also an operator.")
	if target, ok := page.link("The operators' pages"); !ok || target != "/admin" {
		t.Errorf("the link to the operators' pages goes to %q", target)
	}
	if next, _ := page.field("next"); next != "/e/ABC" {
		t.Errorf("the form goes on to %q, want /e/ABC", next)
	}
	if _, ok := page.field("name"); !ok {
		t.Error("the page has no name field")
	}
	page.csrf(t)
}

func TestDevelopmentSignInTakesAValidNameAndRefusesOthers(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	for _, tc := range []struct {
		typed string
		user  string // empty: refused
	}{
		{"alice", "alice"},
		{"  Alice ", "alice"},
		{"dev.user_1-2", "dev.user_1-2"},
		{strings.Repeat("a", 64), strings.Repeat("a", 64)},
		{"", ""},
		{"a b", ""},
		{"-alice", ""},
		{"ali/ce", ""},
		{"élise", ""},
		{strings.Repeat("a", 65), ""},
	} {
		t.Run(tc.typed, func(t *testing.T) {
			b := f.browser(t, "unused")
			e := f.newFlow(t, "alice")
			page := b.get("/auth/login?next=" + url.QueryEscape("/e/"+e.ID))

			done := b.post("/auth/login", url.Values{"name": {tc.typed}, "csrf": {page.csrf(t)}, "next": {"/e/" + e.ID}})

			if tc.user == "" {
				done.want(t, http.StatusUnprocessableEntity, "Use 1 to 64 lower-case letters")
				if next, _ := done.field("next"); next != "/e/"+e.ID {
					t.Errorf("the form shown again goes on to %q", next)
				}
				if got := b.get("/e/" + e.ID); got.Status != http.StatusSeeOther {
					t.Errorf("after a refused name, the link answered %d, want 303 to sign-in", got.Status)
				}
				return
			}
			if done.Status != http.StatusSeeOther || done.Location() != "/e/"+e.ID {
				t.Fatalf("sign-in answered %d to %q: %s", done.Status, done.Location(), done.Text())
			}
			opened := b.get("/e/" + e.ID)
			if tc.user == "alice" {
				opened.want(t, http.StatusOK, "Signed in as alice")
			} else {
				opened.want(t, http.StatusForbidden, "You are signed in as "+tc.user)
			}
		})
	}
}

func TestDevelopmentSignInNeedsTheFormsCSRFToken(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	b := f.browser(t, "alice")
	b.get("/auth/login")
	other := f.browser(t, "alice").get("/auth/login").csrf(t)
	for name, csrf := range map[string][]string{"none": nil, "another browser's": {other}} {
		page := b.post("/auth/login", url.Values{"name": {"alice"}, "csrf": csrf, "next": {"/"}})
		page.want(t, http.StatusForbidden, "This form has expired")
		if strings.Contains(b.get("/").Text(), "Signed in as") {
			t.Errorf("a sign-in with %s token signed the browser in", name)
		}
	}
}

func TestSignInGoesOnOnlyToAPathOnThisServer(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	for _, next := range []string{"//evil.example/x", "https://evil.example/", "/\\evil.example"} {
		b := f.browser(t, "alice")
		page := b.get("/auth/login?next=" + url.QueryEscape(next))
		if v, _ := page.field("next"); v != "/" {
			t.Errorf("next=%q: the form goes on to %q, want /", next, v)
		}
		done := b.post("/auth/login", url.Values{"name": {"alice"}, "csrf": {page.csrf(t)}, "next": {next}})
		if done.Status != http.StatusSeeOther || done.Location() != "/" {
			t.Errorf("next=%q: sign-in answered %d to %q, want 303 to /", next, done.Status, done.Location())
		}
	}
}

func TestSignInRotatesTheSessionID(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	e := f.newFlow(t, "alice")
	b := f.browser(t, "alice")
	page := b.get("/auth/login?next=" + url.QueryEscape("/e/"+e.ID))
	planted := b.sessionCookie()
	if planted == "" {
		t.Fatal("the sign-in page set no session cookie")
	}
	plantedID := f.sessionID(t, planted)

	b.post("/auth/login", url.Values{"name": {"alice"}, "csrf": {page.csrf(t)}, "next": {"/e/" + e.ID}})

	signedIn := b.sessionCookie()
	if signedIn == "" || f.sessionID(t, signedIn) == plantedID {
		t.Fatalf("the session ID did not change at sign-in")
	}
	if _, err := f.sessions.Load(t.Context(), plantedID); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("the session from before sign-in still exists (%v)", err)
	}
	// Someone who planted the cookie before sign-in is not signed in with it.
	attacker := f.browser(t, "mallory")
	attacker.setSessionCookie(planted)
	if got := attacker.get("/e/" + e.ID); got.Status != http.StatusSeeOther || !strings.HasPrefix(got.Location(), "/auth/login") {
		t.Errorf("the planted cookie opened the link: %d %q", got.Status, got.Location())
	}
	f.wantState(t, e.ID, flow.Pending)
	b.get("/e/"+e.ID).want(t, http.StatusOK, "Signed in as alice")
}

func TestSignOutEndsTheBrowserSession(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	e := f.newFlow(t, "alice")
	b := f.browser(t, "alice")
	b.open(e.ID).want(t, http.StatusOK)
	cookie := b.sessionCookie()
	id := f.sessionID(t, cookie)

	b.post("/auth/logout", url.Values{}).want(t, http.StatusForbidden, "This form has expired")
	page := b.post("/auth/logout", url.Values{"csrf": {b.csrf()}})

	page.want(t, http.StatusOK, "You are signed out", "This browser is no longer signed in")
	if b.sessionCookie() != "" {
		t.Error("the session cookie is still in the browser")
	}
	if _, err := f.sessions.Load(t.Context(), id); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("the session still exists after sign-out (%v)", err)
	}
	if got := b.get("/e/" + e.ID); got.Status != http.StatusSeeOther || !strings.HasPrefix(got.Location(), "/auth/login") {
		t.Errorf("after sign-out the link answered %d %q, want 303 to sign-in", got.Status, got.Location())
	}
	replay := f.browser(t, "alice")
	replay.setSessionCookie(cookie)
	if got := replay.get("/e/" + e.ID); got.Status != http.StatusSeeOther {
		t.Errorf("the cookie from before sign-out still opens the link: %d", got.Status)
	}
}

func TestAForgedSessionCookieIsANewSession(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	e := f.newFlow(t, "alice")
	b := f.browser(t, "alice")
	b.setSessionCookie("forged-value")
	if got := b.get("/e/" + e.ID); got.Status != http.StatusSeeOther || !strings.HasPrefix(got.Location(), "/auth/login") {
		t.Errorf("a forged cookie answered %d %q, want 303 to sign-in", got.Status, got.Location())
	}
	b.signIn("/e/" + e.ID)
	b.get("/e/"+e.ID).want(t, http.StatusOK, "Signed in as alice")
}

func TestTheProductionSignInCallbackIsNotServedInDevelopment(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	f.browser(t, "alice").get("/auth/callback?code=x&state=y").want(t, http.StatusNotFound, "Sign-in is not configured")
}

func TestBehindHTTPSTheCookieIsSecureAndPagesAskForHSTS(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{https: true})
	page := f.send(t, nil, request{method: http.MethodGet, path: "/auth/login"})
	page.want(t, http.StatusOK)
	if got := page.Header.Get("Strict-Transport-Security"); got != "max-age=63072000" {
		t.Errorf("Strict-Transport-Security %q, want max-age=63072000", got)
	}
	cookies := page.Header.Values("Set-Cookie")
	if len(cookies) != 1 {
		t.Fatalf("Set-Cookie %q, want the session cookie", cookies)
	}
	c, err := http.ParseSetCookie(cookies[0])
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "__Host-urlflow_session" || !c.Secure || !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Path != "/" || c.Domain != "" {
		t.Errorf("session cookie %+v, want __Host-, Secure, HttpOnly, SameSite=Lax, Path=/", c)
	}
}
