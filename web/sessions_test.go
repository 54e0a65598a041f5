package web

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/browsersession"
	"github.com/urlflow/urlflow/web/browser"
)

// A visitor who never signs in costs Redis at most the sign-in window: the pages other than
// sign-in keep nothing, the sign-in page keeps its session (the development form's CSRF
// binding, or the attempt at the issuer) for 15 minutes, and the 12 hours start at sign-in.
func TestAVisitorWhoDoesNotSignInKeepsNoLongSession(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		oidc bool
	}{{"development", false}, {"issuer", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, fixtureOptions{oidc: tc.oidc})
			e := f.newFlow(t, "alice")
			link := "/e/" + e.ID
			const visitors = 5
			for range visitors {
				b := f.browser(t, "alice")
				for _, path := range []string{"/", link, link + "/secret", "/auth/callback?code=x&state=y", "/healthz"} {
					b.get(path)
				}
				for _, path := range []string{link + "/decline", link + "/continue", "/auth/login", "/auth/logout"} {
					b.post(path, url.Values{"name": {"alice"}})
				}
			}
			if kept := f.browserSessions(t); len(kept) != 0 {
				t.Fatalf("anonymous visits to pages other than sign-in kept %d browser sessions: %v", len(kept), kept)
			}

			for range visitors {
				page := f.browser(t, "alice").get("/auth/login?next=" + url.QueryEscape(link))
				c, err := http.ParseSetCookie(page.Header.Get("Set-Cookie"))
				if err != nil {
					t.Fatalf("the sign-in page set no session cookie: %v", err)
				}
				if c.MaxAge <= 0 || c.MaxAge > int(browser.SignInWindow/time.Second) {
					t.Errorf("the sign-in page's cookie lives %ds, want at most %s", c.MaxAge, browser.SignInWindow)
				}
			}
			kept := f.browserSessions(t)
			if len(kept) != visitors {
				t.Errorf("%d visits to the sign-in page kept %d browser sessions, want one each", visitors, len(kept))
			}
			for id, left := range kept {
				if left <= 0 || left > browser.SignInWindow {
					t.Errorf("session %s before sign-in lives %s, want at most %s", id, left, browser.SignInWindow)
				}
			}

			b := f.browser(t, "alice")
			b.signIn(link)
			id := f.sessionID(t, b.sessionCookie())
			if left := f.browserSessions(t)[id]; left <= browser.SignInWindow || left > browser.SessionTTL {
				t.Errorf("the signed-in session lives %s, want up to %s", left, browser.SessionTTL)
			}
			b.get(link).want(t, http.StatusOK, "Signed in as alice")
		})
	}
}

func TestASignedInSessionLivesInItsUsersSlotAndAnEarlierOneStillWorks(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	e := f.newFlow(t, "alice")
	b := f.browser(t, "alice")
	b.signIn("/e/" + e.ID)
	id := f.sessionID(t, b.sessionCookie())
	if want := state.UserTag(f.user("alice").Key()) + "bs:"; !strings.HasPrefix(browsersession.Key(id), want) {
		t.Fatalf("the signed-in session %s is kept at %s, want in alice's slot (%s…)", id, browsersession.Key(id), want)
	}
	b.get("/e/"+e.ID).want(t, http.StatusOK, "Signed in as alice")

	// A session signed in before sessions moved to the user's slot: its data under
	// urlflow:bs:ID. The pages still know who it is.
	values := f.sessionValues(t, id)
	data, err := json.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	legacy := "LEGACYSESSIONLEGACYSESSION"
	if err := f.redis.Client(t).Set(t.Context(), state.KeyPrefix+"bs:"+legacy, data, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	cookie, err := f.browsers.CookieOfSession(legacy)
	if err != nil {
		t.Fatal(err)
	}
	earlier := f.browser(t, "alice")
	earlier.setSessionCookie(cookie)
	earlier.get("/e/"+e.ID).want(t, http.StatusOK, "Signed in as alice")
	earlier.get("/e/"+e.ID+"/secret").want(t, http.StatusOK, "Signed in as alice")
}

// A page that starts from what this replica read before (the session and the record, for a
// post moments after the page it came from) writes only if the session still holds it: a
// session signed out meanwhile on another replica changes nothing and gets the sign-in.
func TestAPostFromASessionEndedElsewhereChangesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	e := f.newFlow(t, "alice")
	b := f.browser(t, "alice")
	consent := b.open(e.ID)
	consent.want(t, http.StatusOK)
	before := f.history(t, e.ID)

	// Another replica signs the session out: its key goes; this replica still has its copy.
	id := f.sessionID(t, b.sessionCookie())
	if err := f.redis.Client(t).Del(t.Context(), browsersession.Key(id)).Err(); err != nil {
		t.Fatal(err)
	}
	got := b.post("/e/"+e.ID+"/continue", url.Values{"csrf": {consent.csrf(t)}})
	if got.Status != http.StatusSeeOther || !strings.HasPrefix(got.Location(), "/auth/login") {
		t.Fatalf("a post from a session signed out elsewhere: %d to %q, want the sign-in", got.Status, got.Location())
	}
	if after := f.history(t, e.ID); len(after) != len(before) {
		t.Errorf("the post changed the flow: %+v", after[len(before):])
	}

	// Signed in again, the same post goes on.
	b.signIn("/e/" + e.ID)
	page := b.get("/e/" + e.ID)
	if got := b.post("/e/"+e.ID+"/continue", url.Values{"csrf": {page.csrf(t)}}); got.Status != http.StatusSeeOther || got.Location() != "/e/"+e.ID+"/secret" {
		t.Fatalf("continue after signing in again: %d to %q", got.Status, got.Location())
	}
}
