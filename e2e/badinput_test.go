package e2e

import (
	"html"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/urlflow/urlflow/internal/redistest"
)

// Bad input: every refusal says clearly what happened and changes nothing, checked through
// the recovery API (state and history) and, where a secret was involved, by asking again.

// openFlow is an elicitation of the development user that its owner has opened: urlflow in
// error style, the client that asked, and a formBrowser signed in as the owner, on the
// consent page.
type openFlow struct {
	rs      *redistest.Server
	s       *server
	c       *client
	b       *formBrowser
	id, url string
	consent webPage
}

func startOpenFlow(t *testing.T) *openFlow {
	t.Helper()
	rs := redistest.Start(t)
	s := startServer(t, serverConfig{Redis: rs, Style: "error"})
	c := connect(t, s, clientConfig{Token: s.Token, URLMode: true})
	params := askErrorStyle(t, c)
	b := newFormBrowser(t, s, "dev")
	consent := b.open(params.URL)
	if consent.Status != http.StatusOK {
		t.Fatalf("the owner opening the link got %d: %s", consent.Status, consent.Text())
	}
	if st := s.status(params.ElicitationID, s.Token).State; st != "in_progress" {
		t.Fatalf("after the owner opened the link the state is %s, want in_progress", st)
	}
	return &openFlow{rs: rs, s: s, c: c, b: b, id: params.ElicitationID, url: params.URL, consent: consent}
}

// with returns a copy of form with key set to value.
func with(form url.Values, key, value string) url.Values {
	out := url.Values{}
	for k, v := range form {
		out[k] = append([]string(nil), v...)
	}
	out.Set(key, value)
	return out
}

// anotherValidSecret passes the demo slot's validation; it is never meant to be stored.
const anotherValidSecret = "demo_NOTSTOREDx7Qk2mZp9LwVt"

func TestFormPostsWithoutAValidCSRFTokenAreRefused(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	s := startServer(t, serverConfig{Redis: rs, Style: "error"})
	c := connect(t, s, clientConfig{Token: s.Token, URLMode: true})
	id := askErrorStyle(t, c).ElicitationID
	b := newFormBrowser(t, s, "dev")

	// Sign in by hand, keeping the token of the session from before sign-in.
	login := b.get("/auth/login?next=" + url.QueryEscape("/e/"+id))
	stale := login.csrf(t)
	if signed := b.post("/auth/login", url.Values{"name": {"dev"}, "csrf": {stale}, "next": {"/e/" + id}}); signed.Status != http.StatusSeeOther {
		t.Fatalf("sign-in answered %d: %s", signed.Status, signed.Text())
	}
	consent := b.get("/e/" + id)
	good := consent.csrf(t)
	if good == stale {
		t.Fatal("the CSRF token did not change at sign-in: the session was not rotated")
	}
	foreign := newFormBrowser(t, s, "dev").get("/auth/login").csrf(t)
	before := s.status(id, s.Token)
	if before.State != "in_progress" {
		t.Fatalf("state %s, want in_progress", before.State)
	}

	tokens := []struct {
		name  string
		token *string
	}{
		{"without a token", nil},
		{"with an empty token", new("")},
		{"with a made-up token", new("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")},
		{"with another browser's token", &foreign},
		{"with this browser's token from before sign-in", &stale},
	}
	posts := []struct {
		name, path string
		fields     url.Values
	}{
		{"continue", "/e/" + id + "/continue", url.Values{}},
		{"secret", "/e/" + id + "/secret", url.Values{"secret": {anotherValidSecret}}},
		{"decline", "/e/" + id + "/decline", url.Values{}},
		{"sign-out", "/auth/logout", url.Values{}},
	}
	for _, tok := range tokens {
		for _, post := range posts {
			t.Run(post.name+" "+tok.name, func(t *testing.T) {
				form := post.fields
				if tok.token != nil {
					form = with(form, "csrf", *tok.token)
				}
				page := b.post(post.path, form)
				if page.Status != http.StatusForbidden {
					t.Fatalf("answered %d, want 403: %s", page.Status, page.Text())
				}
				if words := page.Text(); !strings.Contains(words, "did not come from this page") || !strings.Contains(words, "Nothing was changed") {
					t.Fatalf("the refusal does not explain itself: %s", words)
				}
			})
		}
	}
	requireUnchanged(t, before, s.status(id, s.Token))

	// Sign-in is a form too: without a valid token nobody is signed in.
	for _, token := range []string{"", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", good} {
		fresh := newFormBrowser(t, s, "mallory")
		fresh.get("/auth/login")
		if page := fresh.post("/auth/login", url.Values{"name": {"mallory"}, "csrf": {token}, "next": {"/"}}); page.Status != http.StatusForbidden {
			t.Fatalf("sign-in with token %q answered %d, want 403", token, page.Status)
		}
		if page := fresh.get("/e/" + id); page.Status != http.StatusSeeOther || !strings.HasPrefix(page.Location(), "/auth/login") {
			t.Fatalf("after a refused sign-in the browser is signed in: %d %s", page.Status, page.Text())
		}
	}
	requireUnchanged(t, before, s.status(id, s.Token))

	// Nothing was stored: the same request is still being asked for.
	if again := askErrorStyle(t, c); again.ElicitationID != id {
		t.Fatalf("set_secret started %s instead of asking again for %s", again.ElicitationID, id)
	}
	if strings.Contains(s.Output(), anotherValidSecret) {
		t.Fatal("a refused secret reached urlflow's output")
	}
	// The browser is still signed in (sign-out was refused), and its own token works.
	if page := b.post("/e/"+id+"/continue", url.Values{"csrf": {good}}); page.Status != http.StatusSeeOther || page.Location() != "/e/"+id+"/secret" {
		t.Fatalf("continue with the right token answered %d to %q: %s", page.Status, page.Location(), page.Text())
	}
}

func TestARejectedSecretIsNeverShownAndNothingIsStored(t *testing.T) {
	t.Parallel()
	f := startOpenFlow(t)
	token := f.b.continueToForm(f.id).csrf(t)
	path := "/e/" + f.id + "/secret"

	cases := []struct {
		name, value, rule string
	}{
		{"empty", "", "Enter your Demo API key."},
		{"too short", "demo_Rj", "That is too short: it needs at least 21 characters."},
		{"too long", "demo_" + strings.Repeat("LONGx7Qk", 20), "That is too long: it can have at most 128 characters."},
		{"of the wrong shape", "nope_REJECTx7Qk2mZp9LwVt4", "That does not look like a Demo API key. It starts with demo_ followed by 16 or more letters or digits."},
		{"too easy to guess", "demo_aaaaaaaaaaaaaaaaaaaa", "That is too easy to guess: it needs an estimated 64 bits of randomness"},
		{"with markup", "demo_<b>x7Qk2mZp9LwVt4Rb</b>", "That does not look like a Demo API key."},
		{"not valid text", "demo_\xff\xfeINVALIDx7Qk2mZp9LwVt", "The value is not valid text."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := f.s.status(f.id, f.s.Token)
			page := f.b.post(path, url.Values{"csrf": {token}, "secret": {tc.value}})
			if page.Status != http.StatusUnprocessableEntity {
				t.Fatalf("answered %d, want 422: %s", page.Status, page.Text())
			}
			if !strings.Contains(page.Text(), tc.rule) {
				t.Fatalf("the page does not say %q:\n%s", tc.rule, page.Text())
			}
			if v, ok := page.field("secret"); !ok || v != "" {
				t.Fatalf("the form comes back without an empty secret field (present %v, value %q)", ok, v)
			}
			after := f.s.status(f.id, f.s.Token)
			requireUnchanged(t, before, after, "input_rejected")
			if tc.value == "" {
				return
			}
			for _, form := range []string{tc.value, html.EscapeString(tc.value), url.QueryEscape(tc.value)} {
				if strings.Contains(page.HTML, form) {
					t.Fatalf("the page shows the refused value (as %q)", form)
				}
			}
			if strings.Contains(after.History[len(after.History)-1].Reason, tc.value) {
				t.Fatal("the history holds the refused value")
			}
			if strings.Contains(f.s.Output(), tc.value) {
				t.Fatal("urlflow's output holds the refused value")
			}
		})
	}

	// Nothing was stored: set_secret asks again, for the same running request.
	if again := askErrorStyle(t, f.c); again.ElicitationID != f.id {
		t.Fatalf("set_secret started %s instead of asking again for %s", again.ElicitationID, f.id)
	}
	// And the form still takes a good value.
	if page := f.b.post(path, url.Values{"csrf": {token}, "secret": {canary}}); page.Status != http.StatusOK {
		t.Fatalf("a valid secret after refusals answered %d: %s", page.Status, page.Text())
	}
	f.c.waitCompletion(f.id, 30*time.Second)
	if res := f.c.CallOK("set_secret", map[string]any{"name": "demo_api_key"}); str(structured(t, res), "status") != "stored" {
		t.Fatalf("set_secret after the flow: %s", text(res))
	}
}

func TestAnOversizedFormPostIsRefused(t *testing.T) {
	t.Parallel()
	f := startOpenFlow(t)
	token := f.b.continueToForm(f.id).csrf(t)
	before := f.s.status(f.id, f.s.Token)
	path := "/e/" + f.id + "/secret"
	huge := url.Values{"csrf": {token}, "secret": {"demo_" + strings.Repeat("A", 70<<10)}}

	cases := []struct {
		name string
		req  formRequest
	}{
		{"with its length", formRequest{method: http.MethodPost, path: path, form: huge}},
		{"chunked, without a length", formRequest{method: http.MethodPost, path: path, body: io.MultiReader(strings.NewReader(huge.Encode()))}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			page := f.b.send(tc.req)
			if page.Status != http.StatusRequestEntityTooLarge || !strings.Contains(page.Text(), "too large") {
				t.Fatalf("answered %d, want 413 saying it is too large: %s", page.Status, page.Text())
			}
			requireUnchanged(t, before, f.s.status(f.id, f.s.Token))
		})
	}
	t.Run("API", func(t *testing.T) {
		a := f.s.api(http.MethodPost, elicitationPath(f.id)+"/retry", f.s.Token, `{"new": true, "pad": "`+strings.Repeat("x", 20<<10)+`"}`)
		if a.status != http.StatusRequestEntityTooLarge || !strings.Contains(str(a.object(t), "error"), "too large") {
			t.Fatalf("answered %d, want 413: %s", a.status, a.body)
		}
		requireUnchanged(t, before, f.s.status(f.id, f.s.Token))
	})
}

func TestPostsAfterTheFlowCompletedChangeNothing(t *testing.T) {
	t.Parallel()
	f := startOpenFlow(t)
	form := f.b.continueToForm(f.id)
	token := form.csrf(t)
	if done := f.b.post("/e/"+f.id+"/secret", url.Values{"csrf": {token}, "secret": {canary}}); done.Status != http.StatusOK {
		t.Fatalf("saving the secret answered %d: %s", done.Status, done.Text())
	}
	f.c.waitCompletion(f.id, 30*time.Second)
	f.s.waitDelivered(f.id, f.s.Token)

	places := map[string]string{}
	cases := []struct {
		name, action string
		fields       url.Values
	}{
		{"the same secret again", "secret", url.Values{"secret": {canary}}},
		{"another secret", "secret", url.Values{"secret": {anotherValidSecret}}},
		{"a decline", "decline", url.Values{}},
		{"a continue", "continue", url.Values{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := f.s.status(f.id, f.s.Token)
			if before.State != "complete" {
				t.Fatalf("state %s, want complete", before.State)
			}
			page := f.b.post("/e/"+f.id+"/"+tc.action, with(tc.fields, "csrf", token))
			places["the 409 page after "+tc.name] = page.HTML
			if page.Status != http.StatusConflict {
				t.Fatalf("answered %d, want 409: %s", page.Status, page.Text())
			}
			if words := page.Text(); !strings.Contains(words, "Nothing was changed") || !strings.Contains(words, "Already done") {
				t.Fatalf("the page does not say that nothing changed: %s", words)
			}
			requireUnchanged(t, before, f.s.status(f.id, f.s.Token), "late_post")
		})
	}
	if res := f.c.CallOK("set_secret", map[string]any{"name": "demo_api_key"}); str(structured(t, res), "status") != "stored" {
		t.Fatalf("set_secret after the late posts: %s", text(res))
	}
	places["MCP traffic"] = f.c.Traffic.String()
	places["urlflow output"] = f.s.Output()
	requireNoCanary(t, f.rs, places)
	if strings.Contains(f.s.Output(), anotherValidSecret) {
		t.Fatal("the late secret reached urlflow's output")
	}
}

func TestCrossOriginFormPostsAreRefused(t *testing.T) {
	t.Parallel()
	f := startOpenFlow(t)
	token := f.consent.csrf(t)
	before := f.s.status(f.id, f.s.Token)

	origins := []struct {
		name   string
		header http.Header
	}{
		{"Origin of another site", http.Header{"Origin": {"http://evil.example"}}},
		{"Origin null", http.Header{"Origin": {"null"}}},
		{"Sec-Fetch-Site cross-site", http.Header{"Sec-Fetch-Site": {"cross-site"}}},
		{"Sec-Fetch-Site same-site", http.Header{"Sec-Fetch-Site": {"same-site"}}},
		{"both", http.Header{"Origin": {"http://evil.example"}, "Sec-Fetch-Site": {"cross-site"}}},
	}
	posts := []struct {
		name, path string
		fields     url.Values
	}{
		{"continue", "/e/" + f.id + "/continue", url.Values{}},
		{"secret", "/e/" + f.id + "/secret", url.Values{"secret": {anotherValidSecret}}},
		{"decline", "/e/" + f.id + "/decline", url.Values{}},
		{"sign-in", "/auth/login", url.Values{"name": {"mallory"}, "next": {"/"}}},
		{"sign-out", "/auth/logout", url.Values{}},
	}
	for _, o := range origins {
		for _, post := range posts {
			t.Run(post.name+" with "+o.name, func(t *testing.T) {
				page := f.b.send(formRequest{method: http.MethodPost, path: post.path, form: with(post.fields, "csrf", token), header: o.header})
				if page.Status != http.StatusForbidden || !strings.Contains(page.Text(), "cross-origin request refused") {
					t.Fatalf("answered %d, want 403 cross-origin: %s", page.Status, page.Text())
				}
			})
		}
	}
	requireUnchanged(t, before, f.s.status(f.id, f.s.Token))

	// The same post from urlflow's own page goes through, as the owner who is still signed in.
	page := f.b.send(formRequest{method: http.MethodPost, path: "/e/" + f.id + "/continue", form: url.Values{"csrf": {token}},
		header: http.Header{"Origin": {f.s.BaseURL}, "Sec-Fetch-Site": {"same-origin"}}})
	if page.Status != http.StatusSeeOther || page.Location() != "/e/"+f.id+"/secret" {
		t.Fatalf("a same-origin continue answered %d to %q: %s", page.Status, page.Location(), page.Text())
	}
}

func TestANonLoopbackHostIsMisdirected(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	s := startServer(t, serverConfig{Redis: rs, Style: "error"})
	id := askErrorStyle(t, connect(t, s, clientConfig{Token: s.Token, URLMode: true})).ElicitationID
	before := s.status(id, s.Token)
	port := s.BaseURL[strings.LastIndex(s.BaseURL, ":")+1:]
	b := newFormBrowser(t, s, "dev")

	hosts := []string{"evil.example", "evil.example:" + port, "127.0.0.1.nip.io:" + port, "localhost.evil.example:" + port, "10.0.0.1:" + port}
	paths := []string{"/dev/token?user=alice", "/auth/login", "/e/" + id}
	for _, host := range hosts {
		for _, path := range paths {
			t.Run(host+path, func(t *testing.T) {
				page := b.send(formRequest{method: http.MethodGet, path: path, host: host})
				if page.Status != http.StatusMisdirectedRequest {
					t.Fatalf("answered %d, want 421: %s", page.Status, page.Text())
				}
				if strings.HasPrefix(path, "/dev/token") {
					a := apiAnswer{status: page.Status, header: page.Header, body: []byte(page.HTML)}
					m := a.object(t)
					if _, leaked := m["token"]; leaked || !strings.Contains(str(m, "error"), "loopback") {
						t.Fatalf("/dev/token answered %s", page.HTML)
					}
					return
				}
				if words := page.Text(); !strings.Contains(words, "Wrong address for this server") || !strings.Contains(words, "loopback") {
					t.Fatalf("the page does not explain itself: %s", words)
				}
			})
		}
	}
	requireUnchanged(t, before, s.status(id, s.Token))

	// Loopback names work.
	for _, host := range []string{"localhost:" + port, "127.0.0.1:" + port} {
		if page := b.send(formRequest{method: http.MethodGet, path: "/dev/token?user=alice", host: host}); page.Status != http.StatusOK {
			t.Fatalf("/dev/token with Host %s answered %d: %s", host, page.Status, page.Text())
		}
	}
}

func TestDevTokenNeedsAValidUserName(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	s := startServer(t, serverConfig{Redis: rs})
	queries := []string{
		"", "?user=", "?name=alice", "?user=Alice", "?user=-alice", "?user=a%20b", "?user=..%2F..%2Fetc",
		"?user=al%0Aice", "?user=" + strings.Repeat("a", 65),
	}
	for _, q := range queries {
		t.Run(q, func(t *testing.T) {
			a := s.api(http.MethodGet, "/dev/token"+q, "", "")
			if a.status != http.StatusBadRequest || !strings.HasPrefix(a.header.Get("Content-Type"), "application/json") {
				t.Fatalf("answered %d (%s), want 400 JSON: %s", a.status, a.header.Get("Content-Type"), a.body)
			}
			m := a.object(t)
			if len(m) != 1 || !strings.Contains(str(m, "error"), "user must be 1 to 64 lower-case letters") {
				t.Fatalf("answered %s", a.body)
			}
		})
	}
}

func TestSetSecretWithAnUnknownSlotNamesTheKnownOnes(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	s := startServer(t, serverConfig{Redis: rs, Style: "push"})
	c := connect(t, s, clientConfig{Token: s.Token, URLMode: true})
	for _, name := range []string{"nope", "", "DEMO_API_KEY", "demo_api_key ", "../demo_api_key"} {
		t.Run(strconv.Quote(name), func(t *testing.T) {
			res := c.CallOK("set_secret", map[string]any{"name": name})
			words := text(res)
			if !res.IsError {
				t.Fatalf("set_secret %q is not an error: %s", name, words)
			}
			quoted := strconv.Quote(name)
			if !strings.Contains(words, quoted) || !strings.Contains(strings.Replace(words, quoted, "", 1), "demo_api_key") {
				t.Fatalf("the error does not name %s and the known slots: %s", quoted, words)
			}
		})
	}
	select {
	case p := <-c.Elicitations:
		t.Fatalf("an unknown slot started an elicitation: %+v", p)
	default:
	}
}

func TestElicitationLinksThatLeadNowhereAreNotFound(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	s := startServer(t, serverConfig{Redis: rs})
	b := newFormBrowser(t, s, "dev")
	if page := b.signIn("/"); page.Status != http.StatusSeeOther {
		t.Fatalf("sign-in answered %d", page.Status)
	}
	token := b.get("/auth/login").csrf(t)

	ids := []string{"not-an-id", "abc", strings.ToLower(randomID()), randomID() + "A", randomID()}
	for _, id := range ids {
		reqs := []formRequest{
			{method: http.MethodGet, path: "/e/" + id},
			{method: http.MethodGet, path: "/e/" + id + "/secret"},
			{method: http.MethodPost, path: "/e/" + id + "/continue", form: url.Values{"csrf": {token}}},
			{method: http.MethodPost, path: "/e/" + id + "/secret", form: url.Values{"csrf": {token}, "secret": {anotherValidSecret}}},
			{method: http.MethodPost, path: "/e/" + id + "/decline", form: url.Values{"csrf": {token}}},
		}
		for _, r := range reqs {
			t.Run(r.method+" "+r.path, func(t *testing.T) {
				page := b.send(r)
				if page.Status != http.StatusNotFound {
					t.Fatalf("answered %d, want 404: %s", page.Status, page.Text())
				}
				if words := page.Text(); !strings.Contains(words, "This link is not valid") || !strings.Contains(words, "does not lead to a request we know") {
					t.Fatalf("the page does not explain itself: %s", words)
				}
			})
		}
	}
}

func TestASignedOutVisitSignsInAndReturnsToTheLink(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	s := startServer(t, serverConfig{Redis: rs, Style: "error"})
	id := askErrorStyle(t, connect(t, s, clientConfig{Token: s.Token, URLMode: true})).ElicitationID
	before := s.status(id, s.Token)
	b := newFormBrowser(t, s, "dev")

	visit := b.get("/e/" + id)
	want := "/auth/login?next=" + url.QueryEscape("/e/"+id)
	if visit.Status != http.StatusSeeOther || visit.Location() != want {
		t.Fatalf("a signed-out visit answered %d to %q, want 303 to %s", visit.Status, visit.Location(), want)
	}
	requireUnchanged(t, before, s.status(id, s.Token)) // a signed-out visit is nobody's

	login := b.get(visit.Location())
	if next, _ := login.field("next"); login.Status != http.StatusOK || next != "/e/"+id {
		t.Fatalf("the sign-in page answered %d with next %q", login.Status, next)
	}
	if !strings.Contains(strings.ToLower(login.Text()), "development") {
		t.Fatalf("the development sign-in does not say it is one: %s", login.Text())
	}
	signed := b.post("/auth/login", url.Values{"name": {"dev"}, "csrf": {login.csrf(t)}, "next": {"/e/" + id}})
	if signed.Status != http.StatusSeeOther || signed.Location() != "/e/"+id {
		t.Fatalf("sign-in answered %d to %q, want 303 to /e/%s", signed.Status, signed.Location(), id)
	}
	cookie := signed.Header.Get("Set-Cookie")
	if !strings.Contains(cookie, "HttpOnly") || !strings.Contains(cookie, "SameSite=Lax") {
		t.Fatalf("the session cookie is %q, want HttpOnly and SameSite=Lax", cookie)
	}
	consent := b.get(signed.Location())
	if consent.Status != http.StatusOK || !strings.Contains(consent.Text(), "Demo API key") {
		t.Fatalf("back at the link: %d %s", consent.Status, consent.Text())
	}
	if e := s.status(id, s.Token); e.State != "in_progress" {
		t.Fatalf("after signing in at the link the state is %s, want in_progress", e.State)
	}
}

func TestSignInNeverLeavesTheSite(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	s := startServer(t, serverConfig{Redis: rs})
	nexts := []string{
		"//evil.example", "//evil.example/e/X", "https://evil.example", "http:evil.example", `/\evil.example`,
		`\\evil.example`, "/\t/evil.example", "evil.example", " //evil.example", "javascript:alert(1)",
		"/" + strings.Repeat("a", 600),
	}
	for _, next := range nexts {
		t.Run(strconv.Quote(next), func(t *testing.T) {
			b := newFormBrowser(t, s, "dev")
			login := b.get("/auth/login?next=" + url.QueryEscape(next))
			if field, _ := login.field("next"); login.Status != http.StatusOK || field != "/" {
				t.Fatalf("the sign-in page carries next %q (status %d), want /", field, login.Status)
			}
			// A hand-made form post with the bad next fares no better.
			signed := b.post("/auth/login", url.Values{"name": {"dev"}, "csrf": {login.csrf(t)}, "next": {next}})
			if signed.Status != http.StatusSeeOther || signed.Location() != "/" {
				t.Fatalf("sign-in answered %d to %q, want 303 to /", signed.Status, signed.Location())
			}
		})
	}
}
