package web

import (
	"crypto/rand"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"

	"github.com/urlflow/urlflow/internal/locale"
	"github.com/urlflow/urlflow/oauth/identity"
	"github.com/urlflow/urlflow/state/credentials"
	"github.com/urlflow/urlflow/state/languages"
)

func TestPagesSayTheirLanguageAndVaryWithTheReaders(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	for accept, want := range map[string]struct{ lang, dir string }{
		"":                  {"en", "ltr"},
		"de-DE,de;q=0.9":    {"de", "ltr"},
		"ja":                {"ja", "ltr"},
		"ar;q=0.8,en;q=0.5": {"ar", "rtl"},
		"fr-CA":             {"fr", "ltr"},
		"pt-BR":             {"en", "ltr"}, // none of the catalogs
	} {
		got := f.send(t, nil, request{method: http.MethodGet, path: "/", header: http.Header{"Accept-Language": {accept}}})
		vary := strings.Join(got.Header.Values("Vary"), ",")
		if got.Status != http.StatusOK || got.Header.Get("Content-Language") != want.lang ||
			!strings.Contains(got.Body, `<html lang="`+want.lang+`" dir="`+want.dir+`">`) ||
			!strings.Contains(vary, "Accept-Language") || !strings.Contains(vary, "Cookie") {
			t.Errorf("Accept-Language %q: %d, Content-Language %q, Vary %q, want %s %s",
				accept, got.Status, got.Header.Get("Content-Language"), vary, want.lang, want.dir)
		}
	}
}

// TestTheReadersChoiceOfLanguageIsKeptAndWinsOverTheirBrowsers follows the language
// switcher: the choice is kept in a cookie and wins over Accept-Language on every later
// page, the browser goes back to the page it was on, its query kept, and a language urlflow
// lacks, or an address of another host, changes nothing.
func TestTheReadersChoiceOfLanguageIsKeptAndWinsOverTheirBrowsers(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	client := noRedirects(jar)
	german := http.Header{"Accept-Language": {"de"}, "Accept": {"text/html,application/xhtml+xml"}}

	page := f.send(t, client, request{method: http.MethodGet, path: "/", header: german})
	if !strings.Contains(page.Body, `<select id="language" name="lang">`) || !strings.Contains(page.Body, `<option value="fr" lang="fr">français</option>`) {
		t.Fatalf("the page offers no choice of language:\n%s", page.Body)
	}
	chose := f.send(t, client, request{method: http.MethodGet, path: "/connections?a=1&lang=fr&b=2", header: german})
	if chose.Status != http.StatusSeeOther || chose.Location() != "/connections?a=1&b=2" {
		t.Errorf("choosing French: %d to %q, want 303 to /connections?a=1&b=2", chose.Status, chose.Location())
	}
	if got := f.send(t, client, request{method: http.MethodGet, path: "/", header: german}); got.Header.Get("Content-Language") != "fr" ||
		!strings.Contains(got.Body, `<option value="fr" lang="fr" selected>`) {
		t.Errorf("after choosing French, a reader whose browser asks for German reads %q", got.Header.Get("Content-Language"))
	}

	f.send(t, client, request{method: http.MethodGet, path: "/?lang=xx", header: german})
	// An API request's lang is not a choice of the pages' language.
	if got := f.send(t, client, request{method: http.MethodGet, path: "/healthz?lang=de", header: http.Header{"Accept": {"application/json"}}}); got.Status != http.StatusOK {
		t.Errorf("a request for JSON with ?lang= answered %d, want 200", got.Status)
	}
	if got := f.send(t, client, request{method: http.MethodGet, path: "/", header: german}); got.Header.Get("Content-Language") != "fr" {
		t.Errorf("choosing a language urlflow lacks changed the reader's choice to %q", got.Header.Get("Content-Language"))
	}
	for _, path := range []string{"//evil.example/?lang=de", "/\\evil.example/?lang=de"} {
		// "/%5Cevil.example/" is this host's: a browser reads a backslash as "/" only unescaped.
		if loc := f.send(t, client, request{method: http.MethodGet, path: path, header: german}).Location(); !strings.HasPrefix(loc, "/") ||
			strings.HasPrefix(loc, "//") || strings.HasPrefix(loc, "/\\") {
			t.Errorf("%s sends the browser to %q, another host", path, loc)
		}
	}
}

// TestARefusedValueIsExplainedInTheReadersLanguageAndRecordedInEnglish: a reader who chose
// German reads the rules of the secret and why a value was refused in German; the flow's
// history, which operators read, keeps the English sentence.
func TestARefusedValueIsExplainedInTheReadersLanguageAndRecordedInEnglish(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	e := f.newFlow(t, "alice")
	b := f.browser(t, "alice")
	b.send(request{method: http.MethodGet, path: "/?lang=de", header: http.Header{"Accept": {"text/html"}}})
	de := locale.Default().Negotiate("de", "")
	form := b.continueToForm(e.ID)
	if rule := de.T("secret.rule_length", map[string]any{"Min": 21, "Max": 128}); !strings.Contains(form.Text(), rule) {
		t.Errorf("the form does not give its rules in German (%q):\n%s", rule, form.Text())
	}
	page := b.submit(e.ID, form, "demo_1")
	page.want(t, http.StatusUnprocessableEntity, de.N("secret.invalid_too_short", 21, nil))
	if last := f.lastEntry(t, e.ID); last.Reason != "That is too short: it needs at least 21 characters." {
		t.Errorf("the history records %q, want the English sentence", last.Reason)
	}
	// Another replica (a store of its own) reads it for the words of MCP results.
	if lang, err := languages.New(f.redis.Client(t)).Of(t.Context(), f.user("alice")); err != nil || lang != "de" {
		t.Errorf("the language alice read the pages in is kept as %q (%v), want de", lang, err)
	}
}

// TestErrorPagesSayWhatWentWrongInTheReadersLanguage: a reader who chose German reads in
// German what went wrong, not only the heading, on the error pages that handlers raise: a
// link to no request, a form whose CSRF token is not its session's, and the operators'
// pages refused to a user who is not one (with the placeholders filled in).
func TestErrorPagesSayWhatWentWrongInTheReadersLanguage(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	b := f.browser(t, "alice")
	b.send(request{method: http.MethodGet, path: "/?lang=de", header: http.Header{"Accept": {"text/html"}}})
	b.signIn("/")
	de, en := locale.Default().Negotiate("de", ""), locale.Default().Negotiate("en", "")
	for _, tc := range []struct {
		name   string
		page   answer
		status int
		id     string
		data   map[string]any
	}{
		{"unknown link", b.get("/e/" + rand.Text()), http.StatusNotFound, "error.no_such_elicitation", nil},
		{"bad CSRF token", b.post("/auth/logout", url.Values{"csrf": {"not-this-sessions"}}), http.StatusForbidden, "error.bad_csrf", nil},
		{"not an operator", b.get("/admin"), http.StatusForbidden, "error.not_an_operator_dev",
			map[string]any{"Subject": "alice", "Operator": identity.DevOperator}},
	} {
		german, english := de.T(tc.id, tc.data), en.T(tc.id, tc.data)
		if german == english || german == tc.id {
			t.Fatalf("%s: %s has no German of its own: %q", tc.name, tc.id, german)
		}
		tc.page.want(t, tc.status, german)
		if text := tc.page.Text(); strings.Contains(text, english) || tc.page.Header.Get("Content-Language") != "de" {
			t.Errorf("%s: the page (Content-Language %q) still says it in English: %s", tc.name, tc.page.Header.Get("Content-Language"), text)
		}
	}
}

// TestTheConnectionsPageSpeaksTheReadersLanguage: a reader who chose German reads the
// connections page's group of urlflow's own tools in German, and, on removing what they
// stored there and a connection a service held, what came of it, in German too.
func TestTheConnectionsPageSpeaksTheReadersLanguage(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	p.revocable = true
	f := newFixture(t, fixtureOptions{provider: p})
	f.storeOwn(t, "alice")
	f.connectFor(t, weather, "alice")
	b := f.browser(t, "alice")
	b.send(request{method: http.MethodGet, path: "/?lang=de", header: http.Header{"Accept": {"text/html"}}})
	b.signIn("/connections")
	de, en := locale.Default().Negotiate("de", ""), locale.Default().Negotiate("en", "")
	german := func(id string, data map[string]any) string {
		t.Helper()
		g, e := de.T(id, data), en.T(id, data)
		if g == e || g == id {
			t.Fatalf("%s has no German of its own: %q", id, g)
		}
		return g
	}

	page := b.get("/connections")
	page.want(t, http.StatusOK, german("connections.own_tools", map[string]any{"Product": "urlflow"}), german("common.provider_account", map[string]any{"Provider": "Acme"}))
	if text := page.Text(); strings.Contains(text, en.T("connections.own_tools", map[string]any{"Product": "urlflow"})) || strings.Contains(text, "Acme account") {
		t.Errorf("the page still names the holder or the account in English: %s", text)
	}

	removed := b.post("/connections/remove", url.Values{"name": {demoSlot}, "csrf": {page.csrf(t)}})
	removed.want(t, http.StatusOK, german("connections.deleted_own", map[string]any{"Label": "Demo API key", "Product": "urlflow"}))
	if text := removed.Text(); strings.Contains(text, "Your Demo API key is deleted") {
		t.Errorf("the notice is still in English: %s", text)
	}
	f.wantNoCredential(t, "alice", demoSlot)

	name := credentials.Name(weather, "acme")
	disconnected := b.post("/connections/remove", url.Values{"name": {name}, "csrf": {page.csrf(t)}})
	disconnected.want(t, http.StatusOK, german("connections.disconnect_revoked", map[string]any{"Holder": "Weather MCP", "Provider": "Acme", "Product": "urlflow"}))
	if text := disconnected.Text(); strings.Contains(text, "is disconnected") {
		t.Errorf("the notice is still in English: %s", text)
	}
	f.wantNoCredential(t, "alice", name)
	b.post("/connections/remove", url.Values{"name": {demoSlot}, "csrf": {page.csrf(t)}}).
		want(t, http.StatusOK, german("connections.nothing_removed", nil))
}
