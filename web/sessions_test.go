package web

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/urlflow/urlflow/internal/redistest"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/browsersession"
)

func TestSessionCookieIsSecureBehindHTTPS(t *testing.T) {
	store := browsersession.NewStore(redistest.StartEmbedded(t).Client)
	for _, secure := range []bool{true, false} {
		sessions := newSessionStore(store, []byte(strings.Repeat("k", 32)), secure)
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		w := httptest.NewRecorder()
		sess, err := sessions.Get(r, sessions.name)
		if err != nil {
			t.Fatal(err)
		}
		sess.Values[valueSubject] = "alice"
		if err := sess.Save(r, w); err != nil {
			t.Fatal(err)
		}
		cookies := w.Result().Cookies()
		if len(cookies) != 1 {
			t.Fatalf("cookies: %v", cookies)
		}
		c := cookies[0]
		if c.Secure != secure || !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Path != "/" ||
			strings.HasPrefix(c.Name, "__Host-") != secure {
			t.Errorf("secure=%v: cookie %+v", secure, c)
		}
		if strings.Contains(c.Value, "alice") {
			t.Error("the cookie carries session data; it must carry only the signed ID")
		}
	}
}

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
				if c.MaxAge <= 0 || c.MaxAge > int(signInWindow/time.Second) {
					t.Errorf("the sign-in page's cookie lives %ds, want at most %s", c.MaxAge, signInWindow)
				}
			}
			kept := f.browserSessions(t)
			if len(kept) != visitors {
				t.Errorf("%d visits to the sign-in page kept %d browser sessions, want one each", visitors, len(kept))
			}
			for id, left := range kept {
				if left <= 0 || left > signInWindow {
					t.Errorf("session %s before sign-in lives %s, want at most %s", id, left, signInWindow)
				}
			}

			b := f.browser(t, "alice")
			b.signIn(link)
			id := f.sessionID(t, b.sessionCookie())
			if left := f.browserSessions(t)[id]; left <= signInWindow || left > browserSessionTTL {
				t.Errorf("the signed-in session lives %s, want up to %s", left, browserSessionTTL)
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
	cookie, err := f.server.sessions.codec.Encode(f.server.sessions.name, legacy)
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
