package web

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/flow"
	"github.com/urlflow/urlflow/state/ratelimit"
	"github.com/urlflow/urlflow/web/limits"
)

func TestFormsWithoutAValidCSRFTokenAreRefusedAndChangeNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	e := f.newFlow(t, "alice")
	alice := f.browser(t, "alice")
	form := alice.continueToForm(e.ID)
	signInToken := f.browser(t, "alice").get("/auth/login").csrf(t) // another, signed-out session
	otherAlice := f.browser(t, "alice")
	otherAlice.signIn("/")

	for _, tc := range []struct {
		name string
		csrf []string
	}{
		{"no token", nil},
		{"empty token", []string{""}},
		{"garbage", []string{"not-a-token"}},
		{"the token of a signed-out session", []string{signInToken}},
		{"the token of another session of the same user", []string{otherAlice.csrf()}},
		{"garbage first, the valid token second", []string{"garbage", form.csrf(t)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, action := range []string{"continue", "secret", "decline"} {
				before := f.snapshot(t, e.ID)
				page := alice.post("/e/"+e.ID+"/"+action, url.Values{"csrf": tc.csrf, "secret": {validKey}})
				page.want(t, http.StatusForbidden, "This form has expired or did not come from this page", "Nothing was changed")
				f.wantUnchanged(t, e.ID, before)
			}
		})
	}
	f.wantNoCredential(t, "alice", demoSlot)
	// The form itself still works.
	alice.submit(e.ID, form, validKey).want(t, http.StatusOK)
}

func TestCrossOriginPostsAreRefusedAndChangeNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	b := f.browser(t, "alice")
	b.signIn("/")
	csrf := b.csrf()
	for _, tc := range []struct {
		name    string
		header  http.Header
		refused bool
	}{
		{"cross-site fetch", http.Header{"Sec-Fetch-Site": {"cross-site"}}, true},
		{"same-site fetch from another origin", http.Header{"Sec-Fetch-Site": {"same-site"}}, true},
		{"another Origin", http.Header{"Origin": {"http://evil.example"}}, true},
		{"another port on this host", http.Header{"Origin": {"http://127.0.0.1:1"}}, true},
		{"same-origin fetch", http.Header{"Sec-Fetch-Site": {"same-origin"}}, false},
		{"this Origin", http.Header{"Origin": {f.URL}}, false},
		{"typed by the user", http.Header{"Sec-Fetch-Site": {"none"}}, false},
		{"no browser headers", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := f.newFlow(t, "alice")
			f.apply(t, e.ID, flow.BrowserOpen, state.ActorUser)
			before := f.snapshot(t, e.ID)

			page := b.send(request{method: http.MethodPost, path: "/e/" + e.ID + "/decline",
				form: url.Values{"csrf": {csrf}}, header: tc.header})

			if tc.refused {
				page.want(t, http.StatusForbidden, "cross-origin request refused")
				f.wantUnchanged(t, e.ID, before)
				return
			}
			page.want(t, http.StatusOK, "You declined this request")
			f.wantState(t, e.ID, flow.Declined)
		})
	}
}

func TestOversizedBodiesAreRefusedWith413(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	e := f.newFlow(t, "alice")
	b := f.browser(t, "alice")
	form := b.continueToForm(e.ID)
	before := f.snapshot(t, e.ID)
	huge := url.Values{"csrf": {form.csrf(t)}, "secret": {"demo_" + strings.Repeat("a", formBodyLimit)}}.Encode()

	for _, tc := range []struct {
		name string
		r    request
		json bool
	}{
		{"a form with its length", request{method: http.MethodPost, path: "/e/" + e.ID + "/secret", form: mustParseQuery(t, huge)}, false},
		{"a form sent in chunks", request{method: http.MethodPost, path: "/e/" + e.ID + "/secret", body: strings.NewReader(huge)}, false},
		{"a sign-in form", request{method: http.MethodPost, path: "/auth/login", body: strings.NewReader(huge)}, false},
		{"an API body", request{method: http.MethodPost, path: "/api/v1/elicitations/" + e.ID + "/retry",
			token: f.token(t, "alice"), contentType: "application/json",
			body: strings.NewReader(`{"new": true, "pad": "` + strings.Repeat("a", apiBodyLimit) + `"}`)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			page := b.send(tc.r)
			if tc.json {
				var body map[string]string
				page.decode(t, &body)
				if page.Status != http.StatusRequestEntityTooLarge || body["error"] != "the request is too large" {
					t.Errorf("answered %d %v, want 413 with an error", page.Status, body)
				}
			} else {
				page.want(t, http.StatusRequestEntityTooLarge, "That was too large")
			}
			f.wantUnchanged(t, e.ID, before)
		})
	}
	f.wantNoCredential(t, "alice", demoSlot)
}

func mustParseQuery(t testing.TB, s string) url.Values {
	t.Helper()
	v, err := url.ParseQuery(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestAFormThatCannotBeReadIsABadRequest(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	page := f.browser(t, "alice").send(request{method: http.MethodPost, path: "/auth/login", body: strings.NewReader("csrf=%zz")})
	page.want(t, http.StatusBadRequest, "the form could not be read")
}

func TestPagesCarryTheSecurityHeaders(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	e := f.newFlow(t, "alice")
	b := f.browser(t, "alice")
	want := map[string]string{
		"Content-Security-Policy":      "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
		"X-Frame-Options":              "DENY",
		"X-Content-Type-Options":       "nosniff",
		"Referrer-Policy":              "no-referrer",
		"Cross-Origin-Opener-Policy":   "same-origin",
		"Cross-Origin-Resource-Policy": "same-origin",
		"Permissions-Policy":           "camera=(), microphone=(), geolocation=(), payment=()",
		"Cache-Control":                "no-store",
	}
	for _, page := range []struct {
		name string
		get  func() answer
	}{
		{"sign-in", func() answer { return b.get("/auth/login") }},
		{"consent", func() answer { return b.open(e.ID) }},
		{"refused form", func() answer { return b.post("/e/"+e.ID+"/decline", url.Values{}) }},
		{"not found", func() answer { return b.get("/e/not-an-id") }},
		{"API", func() answer { return f.api(t, http.MethodGet, "/api/v1/elicitations/"+e.ID, "", "") }},
		{"MCP endpoint", func() answer {
			return f.send(t, nil, request{method: http.MethodPost, path: "/mcp", token: f.token(t, "alice"), body: strings.NewReader("{}")})
		}},
	} {
		got := page.get()
		for header, value := range want {
			if v := got.Header.Get(header); v != value {
				t.Errorf("%s (%d): %s = %q, want %q", page.name, got.Status, header, v, value)
			}
		}
		if v := got.Header.Get("Strict-Transport-Security"); v != "" {
			t.Errorf("%s: Strict-Transport-Security %q on plain HTTP", page.name, v)
		}
	}

	static := b.get("/static/urlflow.css")
	static.want(t, http.StatusOK)
	if cc := static.Header.Get("Cache-Control"); cc == "no-store" {
		t.Error("static files are served no-store")
	}
	if static.Header.Get("Content-Security-Policy") != want["Content-Security-Policy"] {
		t.Error("static files are served without the CSP")
	}
}

func TestStaticFilesAreServed(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	for _, tc := range []struct {
		path, contentType string
		status            int
	}{
		{"/static/urlflow.css", "text/css; charset=utf-8", http.StatusOK},
		{"/static/favicon.svg", "image/svg+xml", http.StatusOK},
		{"/static/missing.js", "", http.StatusNotFound},
	} {
		page := f.send(t, nil, request{method: http.MethodGet, path: tc.path})
		if page.Status != tc.status || (tc.contentType != "" && page.Header.Get("Content-Type") != tc.contentType) {
			t.Errorf("GET %s: %d %q, want %d %q", tc.path, page.Status, page.Header.Get("Content-Type"), tc.status, tc.contentType)
		}
	}
}

func TestADevelopmentServerAnswersOnlyToLoopbackHostNames(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	_, port, _ := strings.Cut(strings.TrimPrefix(f.URL, "http://"), ":")
	for _, tc := range []struct {
		host   string
		status int
	}{
		{"127.0.0.1:" + port, http.StatusOK},
		{"localhost:" + port, http.StatusOK},
		{"LOCALHOST", http.StatusOK},
		{"[::1]:" + port, http.StatusOK},
		{"127.0.0.2", http.StatusOK},
		{"evil.example", http.StatusMisdirectedRequest},
		{"evil.example:" + port, http.StatusMisdirectedRequest},
		{"127.0.0.1.evil.example", http.StatusMisdirectedRequest},
		{"localhost.evil.example", http.StatusMisdirectedRequest},
		{"10.0.0.1:" + port, http.StatusMisdirectedRequest},
	} {
		for _, path := range []string{"/healthz", "/auth/login", "/api/v1/elicitations/x", "/dev/token?user=alice", "/mcp"} {
			page := f.send(t, nil, request{method: http.MethodGet, path: path, host: tc.host})
			if tc.status == http.StatusOK && page.Status == http.StatusMisdirectedRequest ||
				tc.status != http.StatusOK && page.Status != tc.status {
				t.Errorf("Host %s, GET %s: %d, want %d", tc.host, path, page.Status, tc.status)
			}
		}
	}
	page := f.send(t, nil, request{method: http.MethodGet, path: "/auth/login", host: "evil.example"})
	page.want(t, http.StatusMisdirectedRequest, "Wrong address for this server", "loopback")
}

func TestSecretFormPostsOverTheRateLimitAreRefusedAndChangeNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{rateLimits: limits.Rates{Forms: ratelimit.Limit{Events: 1, Window: 24 * time.Hour}}})
	e := f.newFlow(t, "alice")
	b := f.browser(t, "alice")
	form := b.continueToForm(e.ID)
	b.submit(e.ID, form, invalidKey).want(t, http.StatusUnprocessableEntity)
	before := f.snapshot(t, e.ID)

	for range 2 {
		page := b.submit(e.ID, form, validKey)
		page.want(t, http.StatusTooManyRequests, "You have sent this form too often", "Nothing was changed")
		retry, err := strconv.Atoi(page.Header.Get("Retry-After"))
		if err != nil || retry < 1 || retry > 24*60*60 {
			t.Errorf("Retry-After %q, want whole seconds until the window ends", page.Header.Get("Retry-After"))
		}
		if !strings.Contains(page.Text(), "wait "+page.Header.Get("Retry-After")+" seconds") {
			t.Error("the page does not say how long to wait")
		}
	}
	f.wantUnchanged(t, e.ID, before)
	f.wantNoCredential(t, "alice", demoSlot)
	if got := f.counter(t, `urlflow_rate_limited_total{what="form"}`); got != 1 {
		t.Errorf(`urlflow_rate_limited_total{what="form"} = %d, want 1 (counted once per window)`, got)
	}

	// The limit is Alice's: Bob's form is served.
	other := f.newFlow(t, "bob")
	bob := f.browser(t, "bob")
	bob.submit(other.ID, bob.continueToForm(other.ID), validKey).want(t, http.StatusOK)
	// Declining is never limited: it makes urlflow call nobody.
	b.post("/e/"+e.ID+"/decline", url.Values{"csrf": {form.csrf(t)}}).want(t, http.StatusOK, "You declined")
}

func TestAPanicIsAnsweredWithAnErrorPage(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	f.mcp.panics.Store(true)
	page := f.send(t, nil, request{method: http.MethodPost, path: "/mcp", token: f.token(t, "alice"), body: strings.NewReader("{}")})
	page.want(t, http.StatusInternalServerError, "Something went wrong")
	if !strings.Contains(f.logs.String(), "panic serving request") {
		t.Error("the panic was not logged")
	}
	if !strings.Contains(f.logs.String(), "msg=\"http request\" method=POST path=/mcp status=500") {
		t.Errorf("the request was not logged with its status:\n%s", f.logs.String())
	}
}
