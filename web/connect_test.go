package web

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/flow"
)

func TestConnectingAnAccountStoresTheConnection(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	f := newFixture(t, fixtureOptions{provider: p})
	e := f.newFlow(t, "alice", asConnection)
	b := f.browser(t, "alice")

	consent := b.open(e.ID)
	consent.want(t, http.StatusOK, "Acme", "probe-client", "Self-reported by the client", "profile", "Continue", "Decline")
	if csp := consent.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "form-action 'self' "+p.srv.URL+";") {
		t.Errorf("the consent page's CSP %q does not let its form go on to the provider", csp)
	}
	authURL := b.startConnect(e.ID, consent)
	callback := b.atProvider(authURL)
	done := b.get(callback)

	done.want(t, http.StatusOK, "Acme account connected", providerAccount, "probe-client")
	f.wantState(t, e.ID, flow.Complete)
	issued, _ := p.tokens()
	cred, err := f.creds.Get(t.Context(), f.user("alice"), "acme")
	if err != nil {
		t.Fatal(err)
	}
	if cred.Kind != state.KindOAuth || cred.Account != providerAccount || cred.ElicitationID != e.ID || !slices.Equal(cred.Scopes, []string{"profile"}) {
		t.Errorf("stored %+v, want the Acme connection of this elicitation", cred)
	}
	sealed, err := f.vault.Open(f.user("alice"), "acme", cred.Sealed)
	if err != nil {
		t.Fatal(err)
	}
	var token struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.Unmarshal([]byte(sealed.Reveal()), &token); err != nil || len(issued) != 1 || token.AccessToken != issued[0] {
		t.Errorf("the stored token is not the one Acme issued (%v)", err)
	}
	want := []flow.Event{flow.Created, flow.BrowserOpen, flow.PageContinue, flow.Verified}
	if got := events(f.history(t, e.ID)); !slices.Equal(got, want) {
		t.Errorf("history %v, want %v", got, want)
	}
	if last := f.lastEntry(t, e.ID); last.Reason != "connected to Acme as "+providerAccount {
		t.Errorf("the completion says %q", last.Reason)
	}
	if strings.Contains(f.logs.String(), issued[0]) || strings.Contains(done.Body, issued[0]) {
		t.Error("the access token reached the log or the page")
	}

	b.get("/e/"+e.ID).want(t, http.StatusOK, "Already done", "Your Acme account is connected")
	// A second connection says it replaces the first.
	again := f.newFlow(t, "alice", asConnection)
	b.get("/e/"+again.ID).want(t, http.StatusOK, "Connecting again replaces it")
}

// The provider chooses the account's name, which the page shows, the history records and
// the model reads (connect, list_connections, the history in status): urlflow keeps it
// bounded and cleaned.
func TestAConnectedAccountsNameIsKeptBoundedAndCleaned(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	p.nameAccount("\u202eadmin\a\x1b[31m \t\n" + strings.Repeat("x", 300) + "\u2069")
	want := "admin[31m " + strings.Repeat("x", 89) + "…" // 100 runes
	f := newFixture(t, fixtureOptions{provider: p})
	e := f.newFlow(t, "alice", asConnection)
	b := f.browser(t, "alice")

	done := b.get(b.atProvider(b.startConnect(e.ID, b.open(e.ID))))
	done.want(t, http.StatusOK, "Acme account connected", want)
	if strings.ContainsAny(done.Body, "\u202e\u2069\a\x1b") {
		t.Error("the page shows the control characters of the account's name")
	}
	cred, err := f.creds.Get(t.Context(), f.user("alice"), "acme")
	if err != nil {
		t.Fatal(err)
	}
	if cred.Account != want {
		t.Errorf("stored the account %.200q, want %q", cred.Account, want)
	}
	if last := f.lastEntry(t, e.ID); last.Reason != "connected to Acme as "+want {
		t.Errorf("the completion says %.200q", last.Reason)
	}
}

func TestAProviderAnswerIsSpentOnce(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	f := newFixture(t, fixtureOptions{provider: p})
	e := f.newFlow(t, "alice", asConnection)
	b := f.browser(t, "alice")
	callback := b.atProvider(b.startConnect(e.ID, b.open(e.ID)))
	b.get(callback).want(t, http.StatusOK)
	before := f.snapshot(t, e.ID)

	b.get(callback).want(t, http.StatusBadRequest, "already used", "Nothing was changed")

	f.wantUnchanged(t, e.ID, before)
	if _, exchanges := p.tokens(); exchanges != 1 {
		t.Errorf("the code was exchanged %d times, want once", exchanges)
	}
	b.get("/oauth/callback?state=never-issued&code=x").want(t, http.StatusBadRequest, "already used")
}

// A provider answer that arrives in another browser session is refused and spent; the
// history records who brought it: the elicitation's user in another session, another
// user, or a browser nobody is signed in to (urlflow's refusal, since nobody can be named).
func TestAProviderAnswerInAnotherBrowserIsRefusedAndSpent(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	f := newFixture(t, fixtureOptions{provider: p})
	for _, tc := range []struct {
		name   string
		other  func(t *testing.T) *testBrowser
		actor  state.Actor
		reason string
	}{
		{"signed out", func(t *testing.T) *testBrowser { return f.browser(t, "nobody") },
			state.ActorSystem, "in a browser that was not signed in"},
		{"another user", func(t *testing.T) *testBrowser {
			b := f.browser(t, "bob")
			b.signIn("/")
			return b
		}, state.ActorOther, "signed in as " + f.user("bob").String()},
		{"the same user elsewhere", func(t *testing.T) *testBrowser {
			b := f.browser(t, "alice")
			b.signIn("/")
			return b
		}, state.ActorUser, "in another browser session of the user"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := f.newFlow(t, "alice", asConnection)
			alice := f.browser(t, "alice")
			callback := alice.atProvider(alice.startConnect(e.ID, alice.open(e.ID)))
			before := f.snapshot(t, e.ID)

			tc.other(t).get(callback).want(t, http.StatusForbidden, "belongs to another browser", "Nothing was changed")

			f.wantState(t, e.ID, flow.InProgress)
			h := f.history(t, e.ID)
			last := h[len(h)-1]
			if recorded(h) != before.History+1 || last.Event != flow.LatePost || last.Actor != tc.actor || last.To != flow.InProgress ||
				!strings.Contains(last.Reason, tc.reason) {
				t.Errorf("history %v ends with %+v, want one late_post by %s saying %q", events(h), last, tc.actor, tc.reason)
			}
			f.wantNoCredential(t, "alice", "acme")
			alice.get(callback).want(t, http.StatusBadRequest, "already used")
			f.wantState(t, e.ID, flow.InProgress)
		})
	}
	if _, exchanges := p.tokens(); exchanges != 0 {
		t.Errorf("a refused answer's code was exchanged %d times", exchanges)
	}
}

func TestAFailedConnectionCanBeTriedAgain(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	f := newFixture(t, fixtureOptions{provider: p})
	for _, tc := range []struct {
		name    string
		refusal string
		tamper  func(callback url.Values)
		says    string
	}{
		{"access denied", "access_denied", nil, "the access was declined at Acme"},
		{"a provider error", "server_error", nil, "Acme answered server_error"},
		{"another issuer", "", func(q url.Values) { q.Set("iss", "https://evil.example") }, "the answer did not come from Acme"},
		{"a code Acme does not know", "", func(q url.Values) { q.Set("code", "forged") }, "the provider answered 400 (invalid_grant)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			user := strings.ToLower(strings.ReplaceAll(tc.name, " ", "-")) // each case connects once
			e := f.newFlow(t, user, asConnection)
			b := f.browser(t, user)
			p.refuse(tc.refusal)
			callback := b.atProvider(b.startConnect(e.ID, b.open(e.ID)))
			if tc.tamper != nil {
				u, _ := url.Parse(callback)
				q := u.Query()
				tc.tamper(q)
				u.RawQuery = q.Encode()
				callback = u.String()
			}

			failed := b.get(callback)

			failed.want(t, http.StatusUnprocessableEntity, "Your Acme account was not connected", tc.says, "Try again", "Decline")
			if !strings.Contains(failed.Body, `href="/e/`+e.ID+`"`) {
				t.Error("the page offers no way to try again")
			}
			f.wantState(t, e.ID, flow.Failed)
			f.wantNoCredential(t, user, "acme")

			p.refuse("")
			consent := b.get("/e/" + e.ID)
			consent.want(t, http.StatusOK, "Acme")
			f.wantState(t, e.ID, flow.InProgress)
			b.get(b.atProvider(b.startConnect(e.ID, consent))).want(t, http.StatusOK, "Acme account connected")
			f.wantState(t, e.ID, flow.Complete)
		})
	}
}

// A provider configured with explicit endpoints and its issuer (it has no discovery
// document) whose authorization responses carry iss (RFC 9207) connects. An answer that
// names another issuer is refused, the mix-up defence; one without iss connects, since the
// provider never said that it always sends one.
func TestAProviderWithExplicitEndpointsAndAnIssuerConnects(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	p.issuer = p.srv.URL
	f := newFixture(t, fixtureOptions{provider: p})
	for _, tc := range []struct {
		name  string
		user  string // each case connects once
		sends string // the iss of the provider's answer
		says  string // what the failure page says; "" for a connection
	}{
		{"its own iss", "own", p.srv.URL, ""},
		{"no iss", "none", "", ""},
		{"another issuer's iss", "another", "https://evil.example", "the answer did not come from Acme"},
		{"its iss with a trailing slash", "slash", p.srv.URL + "/", "the answer did not come from Acme"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			user := tc.user
			e := f.newFlow(t, user, asConnection)
			b := f.browser(t, user)
			p.sendIss(tc.sends)
			callback := b.atProvider(b.startConnect(e.ID, b.open(e.ID)))
			if got, _ := url.Parse(callback); got.Query().Get("iss") != tc.sends {
				t.Fatalf("the provider's answer %q does not carry iss %q", callback, tc.sends)
			}

			got := b.get(callback)

			if tc.says == "" {
				got.want(t, http.StatusOK, "Acme account connected", providerAccount)
				f.wantState(t, e.ID, flow.Complete)
				if _, err := f.creds.Get(t.Context(), f.user(user), "acme"); err != nil {
					t.Errorf("no connection stored: %v", err)
				}
				return
			}
			got.want(t, http.StatusUnprocessableEntity, "Your Acme account was not connected", tc.says, "Try again")
			f.wantState(t, e.ID, flow.Failed)
			f.wantNoCredential(t, user, "acme")
			if last := f.lastEntry(t, e.ID); last.Event != flow.VerifyFailed || !strings.Contains(last.Reason, tc.sends) {
				t.Errorf("last history entry %+v, want verify_failed naming the issuer %q", last, tc.sends)
			}
		})
	}
	if _, exchanges := p.tokens(); exchanges != 2 {
		t.Errorf("codes were exchanged %d times, want only for the two answers that were accepted", exchanges)
	}
}

// An iss from a provider configured without an issuer cannot be told from another
// provider's: it is refused, and the page says why.
func TestAnIssFromAProviderConfiguredWithoutIssuerIsRefused(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	p.sendIss(p.srv.URL)
	f := newFixture(t, fixtureOptions{provider: p})
	e := f.newFlow(t, "alice", asConnection)
	b := f.browser(t, "alice")

	b.get(b.atProvider(b.startConnect(e.ID, b.open(e.ID)))).want(t, http.StatusUnprocessableEntity,
		"Your Acme account was not connected", "the answer did not come from Acme", "no issuer is configured for this provider")

	f.wantState(t, e.ID, flow.Failed)
	f.wantNoCredential(t, "alice", "acme")
	if _, exchanges := p.tokens(); exchanges != 0 {
		t.Errorf("the refused answer's code was exchanged %d times", exchanges)
	}
}

func TestAProviderAnswerAfterTheFlowEndedChangesNothing(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	f := newFixture(t, fixtureOptions{provider: p})
	e := f.newFlow(t, "alice", asConnection)
	b := f.browser(t, "alice")
	callback := b.atProvider(b.startConnect(e.ID, b.open(e.ID)))
	f.apply(t, e.ID, flow.CancelRequested, state.ActorUser)

	b.get(callback).want(t, http.StatusConflict, "This request was cancelled", "Nothing was changed")

	f.wantState(t, e.ID, flow.Cancelled)
	f.wantNoCredential(t, "alice", "acme")
	if last := f.lastEntry(t, e.ID); last.Event != flow.LatePost {
		t.Errorf("last history entry %+v, want late_post", last)
	}
	if _, exchanges := p.tokens(); exchanges != 0 {
		t.Errorf("the code of an ended flow was exchanged %d times", exchanges)
	}
}

func TestAFormOfTheOtherKindGoesBackToTheConsentPage(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{provider: newProvider(t)})
	secret := f.newFlow(t, "alice")
	connection := f.newFlow(t, "alice", asConnection)
	b := f.browser(t, "alice")
	b.open(secret.ID).want(t, http.StatusOK)
	b.get("/e/"+connection.ID).want(t, http.StatusOK)
	csrf := b.csrf()
	for _, tc := range []struct {
		id, method, action string
	}{
		{secret.ID, http.MethodPost, "authorize"},
		{connection.ID, http.MethodPost, "continue"},
		{connection.ID, http.MethodGet, "secret"},
		{connection.ID, http.MethodPost, "secret"},
	} {
		before := f.snapshot(t, tc.id)
		got := b.send(request{method: tc.method, path: "/e/" + tc.id + "/" + tc.action,
			form: url.Values{"csrf": {csrf}, "secret": {validKey}}})
		if got.Status != http.StatusSeeOther || got.Location() != "/e/"+tc.id {
			t.Errorf("%s %s: %d to %q, want 303 to the consent page", tc.method, tc.action, got.Status, got.Location())
		}
		f.wantUnchanged(t, tc.id, before)
	}
	f.wantNoCredential(t, "alice", demoSlot)
	f.wantNoCredential(t, "alice", "acme")
}
