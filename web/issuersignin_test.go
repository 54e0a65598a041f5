package web

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/urlflow/urlflow/internal/issuertest"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/flow"
	"golang.org/x/oauth2"
)

// These tests run the production identity (fixture option oidc): the browser signs in with
// identity.BrowserSignIn at an OpenID provider in the test process, and bearer tokens are
// verified by identity.ResourceServer.

func TestSigningInAtTheIssuerReturnsToTheLinkAsTheIssuersUser(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{oidc: true})
	e := f.newFlow(t, "alice")
	link := "/e/" + e.ID
	b := f.browser(t, "alice")

	toSignIn := b.get(link)
	if toSignIn.Status != http.StatusSeeOther || toSignIn.Location() != "/auth/login?next="+url.QueryEscape(link) {
		t.Fatalf("a signed-out visit answered %d to %q, want 303 to sign-in and back to the link", toSignIn.Status, toSignIn.Location())
	}
	toIssuer := b.get(toSignIn.Location())
	authURL, err := url.Parse(toIssuer.Location())
	if err != nil || toIssuer.Status != http.StatusFound || authURL.Scheme+"://"+authURL.Host+authURL.Path != f.issuer.AuthorizationEndpoint {
		t.Fatalf("/auth/login answered %d to %q, want 302 to the issuer's authorization endpoint", toIssuer.Status, toIssuer.Location())
	}
	planted := b.sessionCookie()
	plantedID := f.sessionID(t, planted)
	kept := f.sessionValues(t, plantedID)
	q := authURL.Query()
	for param, want := range map[string]string{
		"response_type": "code", "client_id": f.issuer.ClientID, "redirect_uri": f.URL + "/auth/callback",
		"state": kept["signin_state"], "nonce": kept["signin_nonce"],
		"code_challenge": oauth2.S256ChallengeFromVerifier(kept["signin_verifier"]), "code_challenge_method": "S256",
	} {
		if got := q.Get(param); got != want || got == "" {
			t.Errorf("the authorization URL has %s=%q, want %q", param, got, want)
		}
	}
	if kept["signin_next"] != link || strings.Contains(toIssuer.Location(), kept["signin_verifier"]) {
		t.Errorf("the session keeps next %q (want %s), or the verifier is in the URL", kept["signin_next"], link)
	}
	if scopes := strings.Fields(q.Get("scope")); !slices.Contains(scopes, "openid") {
		t.Errorf("scope %q, want openid", q.Get("scope"))
	}

	back := b.get(f.atIssuer(t, toIssuer.Location(), f.issuerUser("alice")))

	if back.Status != http.StatusSeeOther || back.Location() != link {
		t.Fatalf("the callback answered %d to %q, want 303 back to the link: %s", back.Status, back.Location(), back.Text())
	}
	signedInID := f.sessionID(t, b.sessionCookie())
	if signedInID == plantedID {
		t.Fatal("the session ID did not change at sign-in")
	}
	if old := f.sessionValues(t, plantedID); old != nil {
		t.Errorf("the session from before sign-in still exists: %v", old)
	}
	values := f.sessionValues(t, signedInID)
	if values["iss"] != f.issuer.URL || values["sub"] != "alice" || values["signin_state"] != "" || values["signin_verifier"] != "" {
		t.Errorf("the signed-in session holds %v, want the issuer and subject alice and no sign-in attempt", values)
	}
	attacker := f.browser(t, "mallory")
	attacker.setSessionCookie(planted)
	if got := attacker.get(link); got.Status != http.StatusSeeOther || !strings.HasPrefix(got.Location(), "/auth/login") {
		t.Errorf("the cookie from before sign-in opened the link: %d %q", got.Status, got.Location())
	}
	f.wantState(t, e.ID, flow.Pending)

	b.get(link).want(t, http.StatusOK, "Signed in as alice", "Provide your Demo API key?", "Continue")
	f.wantState(t, e.ID, flow.InProgress)
	if last := f.lastEntry(t, e.ID); last.Event != flow.BrowserOpen || last.Actor != state.ActorUser {
		t.Errorf("last history entry %+v, want browser_open by the user", last)
	}

	before := f.snapshot(t, e.ID)
	bob := f.browser(t, "bob")
	bob.signIn(link)
	bob.get(link).want(t, http.StatusForbidden, "This link belongs to another account", "You are signed in as bob", "Nothing was changed")
	f.wantState(t, e.ID, flow.InProgress)
	if h := f.history(t, e.ID); len(h) != before.History+1 || h[len(h)-1].Event != flow.OtherUserOpened ||
		!strings.Contains(h[len(h)-1].Reason, f.user("bob").String()) {
		t.Errorf("history %v, want one more other_user_opened naming bob", events(h))
	}
	f.wantNoCredential(t, "alice", demoSlot)
}

// An answer from the issuer that does not sign the browser in leaves it signed out, says
// what happened, and changes nothing.
func TestIssuerAnswersThatDoNotSignInLeaveTheBrowserSignedOut(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{oidc: true})
	failingToken := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, `{"error":"server_error"}`, http.StatusInternalServerError)
	})
	for _, tc := range []struct {
		name string
		// answer is how the issuer answers; tokenEndpoint, when set, answers the exchange in
		// its place.
		answer        issuertest.Answer
		tokenEndpoint http.Handler
		// anotherBrowsers makes the browser bring the answer to a sign-in another browser
		// started, while it has one of its own.
		anotherBrowsers bool
		status          int
		says            string
		// exchanged: the code went to the token endpoint (golang.org/x/oauth2 may send it
		// twice, trying the other client authentication after a failure).
		exchanged bool
	}{
		{name: "the answer to another browser's sign-in", answer: f.issuerUser("alice"), anotherBrowsers: true,
			status: http.StatusBadRequest, says: "belongs to another browser"},
		{name: "an answer naming another issuer", answer: issuertest.Answer{User: issuertest.User{Subject: "alice"}, Iss: "https://evil.example"},
			status: http.StatusBadRequest, says: "belongs to another browser"},
		{name: "access denied", answer: issuertest.Answer{Error: "access_denied", Iss: f.issuer.URL},
			status: http.StatusForbidden, says: "the sign-in was refused or cancelled"},
		{name: "nobody signed in at the issuer", answer: issuertest.Answer{},
			status: http.StatusForbidden, says: "the sign-in was refused or cancelled"},
		{name: "a failing token exchange", answer: f.issuerUser("alice"), tokenEndpoint: failingToken,
			status: http.StatusBadGateway, says: "Signing you in failed", exchanged: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The issuer's answer and endpoints are shared: these run one after another.
			e := f.newFlow(t, "alice")
			link := "/e/" + e.ID
			before := f.snapshot(t, e.ID)
			b := f.browser(t, "alice")
			authURL := b.startSignIn(link)
			if tc.anotherBrowsers {
				authURL = f.browser(t, "alice").startSignIn(link)
			}
			if tc.tokenEndpoint != nil {
				f.issuer.Override(f.issuer.TokenEndpoint, tc.tokenEndpoint)
				defer f.issuer.Override(f.issuer.TokenEndpoint, nil)
			}
			exchanges := f.issuer.Requests(f.issuer.TokenEndpoint)

			page := b.get(f.atIssuer(t, authURL, tc.answer))

			page.want(t, tc.status, tc.says, "Nothing was changed")
			// A refused code is sent once: the client authentication comes from discovery, not
			// from trying one way and then the other.
			if got, want := f.issuer.Requests(f.issuer.TokenEndpoint)-exchanges, map[bool]int{true: 1}[tc.exchanged]; got != want {
				t.Errorf("the token endpoint was asked %d times, want %d", got, want)
			}
			b.wantSignedOut(link)
			f.wantUnchanged(t, e.ID, before)
		})
	}
}

func TestAnIssuerAnswerIsSpentOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{oidc: true})
	e := f.newFlow(t, "alice")
	link := "/e/" + e.ID
	b := f.browser(t, "alice")
	callback := f.atIssuer(t, b.startSignIn(link), f.issuerUser("alice"))
	if got := b.get(callback); got.Status != http.StatusSeeOther || got.Location() != link {
		t.Fatalf("the callback answered %d to %q, want 303 to the link", got.Status, got.Location())
	}
	sessionID := f.sessionID(t, b.sessionCookie())

	b.get(callback).want(t, http.StatusBadRequest, "already used", "Nothing was changed")
	// Someone who copied the answer gets nothing either.
	other := f.browser(t, "mallory")
	other.get(callback).want(t, http.StatusBadRequest, "already used", "Nothing was changed")

	if got := f.issuer.Requests(f.issuer.TokenEndpoint); got != 1 {
		t.Errorf("the code was exchanged %d times, want once", got)
	}
	other.wantSignedOut(link)
	if got := f.sessionID(t, b.sessionCookie()); got != sessionID {
		t.Error("the replay changed the session of the browser that signed in")
	}
	b.get(link).want(t, http.StatusOK, "Signed in as alice")
}

func TestIssuerSignInGoesOnOnlyToAPathOnThisServer(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{oidc: true})
	for _, next := range []string{"//evil.example/x", "https://evil.example/", "/\\evil.example", "/e/ABC\r\nLocation: //evil"} {
		b := f.browser(t, "alice")
		authURL := b.startSignIn(next)
		if got := b.get(f.atIssuer(t, authURL, f.issuerUser("alice"))); got.Status != http.StatusSeeOther || got.Location() != "/" {
			t.Errorf("next=%q: the callback answered %d to %q, want 303 to /", next, got.Status, got.Location())
		}
	}
}

func TestSigningOutEndsASessionSignedInAtTheIssuer(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{oidc: true})
	e := f.newFlow(t, "alice")
	b := f.browser(t, "alice")
	b.open(e.ID).want(t, http.StatusOK, "Signed in as alice")
	cookie := b.sessionCookie()

	b.post("/auth/logout", url.Values{"csrf": {b.csrf()}}).want(t, http.StatusOK, "You are signed out")

	if b.sessionCookie() != "" {
		t.Error("the session cookie is still in the browser")
	}
	if v := f.sessionValues(t, f.sessionID(t, cookie)); v != nil {
		t.Errorf("the session still exists after sign-out: %v", v)
	}
	b.wantSignedOut("/e/" + e.ID)
	replay := f.browser(t, "alice")
	replay.setSessionCookie(cookie)
	replay.wantSignedOut("/e/" + e.ID)
}

// MCP clients sign in at the issuer and present its access tokens: urlflow takes those for
// its own resource and no other.
func TestTheIssuersTokensForThisResourceOpenMCPAndTheAPI(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{oidc: true})
	e := f.newFlow(t, "alice")
	metadataURL := f.URL + "/.well-known/oauth-protected-resource/mcp"

	claims := func(change func(map[string]any)) map[string]any {
		c := f.issuer.AccessClaims("alice", f.URL+"/mcp")
		change(c)
		return c
	}
	for _, tc := range []struct{ name, token string }{
		{"for another resource", f.issuer.AccessToken(t, claims(func(c map[string]any) { c["aud"] = f.URL + "/elsewhere" }))},
		{"for urlflow's client (an ID token)", f.issuer.AccessToken(t, claims(func(c map[string]any) { c["aud"] = f.issuer.ClientID }))},
		{"expired", f.issuer.AccessToken(t, claims(func(c map[string]any) { c["exp"] = time.Now().Add(-time.Hour).Unix() }))},
		{"signed with a key the issuer does not publish", issuertest.NewKey(t).Sign(t, claims(func(map[string]any) {}))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, r := range []request{
				{method: http.MethodPost, path: "/mcp", body: strings.NewReader(`{}`), contentType: "application/json"},
				{method: http.MethodGet, path: "/api/v1/elicitations/" + e.ID},
			} {
				r.token = tc.token
				got := f.send(t, nil, r)
				got.wantRefusedToken(t, metadataURL)
			}
		})
	}
	if reached := f.mcp.reached(); len(reached) != 0 {
		t.Fatalf("refused tokens reached the MCP server: %v", reached)
	}

	token := f.token(t, "alice")
	mcp := f.send(t, nil, request{method: http.MethodPost, path: "/mcp", token: token, body: strings.NewReader(`{}`), contentType: "application/json"})
	if mcp.Status != http.StatusOK || mcp.Body != `{"probe":"reached"}` {
		t.Errorf("/mcp with the issuer's token: %d %s, want the MCP server's answer", mcp.Status, mcp.Body)
	}
	if reached := f.mcp.reached(); !slices.Equal(reached, []state.User{{Issuer: f.issuer.URL, Subject: "alice"}}) {
		t.Errorf("the MCP server saw %v, want alice at the issuer once", reached)
	}
	var status struct {
		ID    string `json:"id"`
		State string `json:"state"`
	}
	got := f.api(t, http.MethodGet, "/api/v1/elicitations/"+e.ID, token, "")
	got.decode(t, &status)
	if got.Status != http.StatusOK || status.ID != e.ID || status.State != string(flow.Pending) {
		t.Errorf("the API with the issuer's token: %d %+v, want alice's elicitation", got.Status, status)
	}

	var meta struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
	}
	f.send(t, nil, request{method: http.MethodGet, path: "/.well-known/oauth-protected-resource/mcp"}).decode(t, &meta)
	if meta.Resource != f.URL+"/mcp" || !slices.Equal(meta.AuthorizationServers, []string{f.issuer.URL}) {
		t.Errorf("the protected resource metadata says %+v, want the resource and the issuer", meta)
	}
}

// With an issuer, nobody can sign in by typing a name or mint a token: the development
// sign-in and token endpoint are not there.
func TestTheDevelopmentSignInIsNotServedWithAnIssuer(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{oidc: true})
	e := f.newFlow(t, "alice")
	b := f.browser(t, "mallory")

	b.post("/auth/login", url.Values{"name": {"alice"}, "next": {"/e/" + e.ID}}).
		want(t, http.StatusNotFound, "Sign-in is not configured")
	got := f.send(t, nil, request{method: http.MethodGet, path: "/dev/token?user=alice"})

	if got.Status != http.StatusNotFound || strings.Contains(got.Body, "token") {
		t.Errorf("/dev/token answered %d %s, want 404", got.Status, got.Body)
	}
	b.wantSignedOut("/e/" + e.ID)
	f.wantState(t, e.ID, flow.Pending)
}
