package web

import (
	"crypto/rand"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/flow"
)

func TestASignedOutVisitorIsSentToSignInAndNothingChanges(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	e := f.newFlow(t, "alice")
	before := f.snapshot(t, e.ID)

	for _, path := range []string{"/e/" + e.ID, "/e/" + e.ID + "/secret"} {
		page := f.browser(t, "alice").get(path)
		if page.Status != http.StatusSeeOther || page.Location() != "/auth/login?next="+url.QueryEscape("/e/"+e.ID) {
			t.Errorf("GET %s answered %d to %q, want 303 to sign-in and back to the link", path, page.Status, page.Location())
		}
	}
	form := url.Values{"csrf": {"x"}, "secret": {validKey}}
	for _, path := range []string{"/e/" + e.ID + "/continue", "/e/" + e.ID + "/secret", "/e/" + e.ID + "/decline"} {
		page := f.browser(t, "alice").post(path, form)
		if page.Status != http.StatusSeeOther || !strings.HasPrefix(page.Location(), "/auth/login?next=") {
			t.Errorf("POST %s answered %d to %q, want 303 to sign-in", path, page.Status, page.Location())
		}
	}
	f.wantUnchanged(t, e.ID, before)
	f.wantNoCredential(t, "alice", demoSlot)
}

func TestTheOwnerOpeningTheLinkSeesTheConsentPageAndTheFlowIsInProgress(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	for _, tc := range []struct {
		name  string
		setup []flow.Event // applied after creation, to reach the state opened
		from  flow.State
	}{
		{"pending", nil, flow.Pending},
		{"consented", []flow.Event{flow.ClientAccept}, flow.Consented},
		{"unknown", []flow.Event{flow.NoAnswer}, flow.Unknown},
		{"failed", []flow.Event{flow.BrowserOpen, flow.VerifyFailed}, flow.Failed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := f.newFlow(t, "alice")
			for _, ev := range tc.setup {
				f.apply(t, e.ID, ev, state.ActorSystem)
			}
			page := f.browser(t, "alice").open(e.ID)
			page.want(t, http.StatusOK, "Provide your Demo API key?", "probe-client", "1.2.3",
				"Self-reported by the client", "to list your demo projects", "demo_api_key", "Continue", "Decline")
			f.wantState(t, e.ID, flow.InProgress)
			last := f.lastEntry(t, e.ID)
			if last.Event != flow.BrowserOpen || last.Actor != state.ActorUser || last.From != tc.from || last.To != flow.InProgress {
				t.Errorf("last history entry %+v, want browser_open by the user from %s to in_progress", last, tc.from)
			}
		})
	}
}

func TestContinueOnTheConsentPageLeadsToTheSecretForm(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	e := f.newFlow(t, "alice")

	form := f.browser(t, "alice").continueToForm(e.ID)

	form.want(t, http.StatusOK, "Enter your Demo API key", "Between 21 and 128 characters.",
		"It starts with demo_ followed by 16 or more letters or digits.", "Save", "Decline")
	if v, ok := form.field("secret"); !ok || v != "" {
		t.Errorf("the secret field is %q (present %v), want present and empty", v, ok)
	}
	f.wantState(t, e.ID, flow.InProgress)
	if got, want := events(f.history(t, e.ID)), []flow.Event{flow.Created, flow.BrowserOpen, flow.PageContinue}; !slices.Equal(got, want) {
		t.Errorf("history %v, want %v", got, want)
	}
}

func TestAValueThatBreaksTheSlotsRulesIsRefusedNeverEchoedAndStoresNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	e := f.newFlow(t, "alice")
	b := f.browser(t, "alice")
	form := b.continueToForm(e.ID)

	for _, tc := range []struct {
		name, value, rule string
	}{
		{"empty", "", "Enter your Demo API key."},
		{"too short", "demo_1", "That is too short: it needs at least 21 characters."},
		{"too long", "demo_" + strings.Repeat("CANARY", 25), "That is too long: it can have at most 128 characters."},
		{"wrong shape", invalidKey, "That does not look like a Demo API key. It starts with demo_ followed by 16 or more letters or digits."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			page := b.submit(e.ID, form, tc.value)

			page.want(t, http.StatusUnprocessableEntity, tc.rule, "Enter your Demo API key")
			if tc.value != "" && strings.Contains(page.Body, tc.value) {
				t.Error("the refused value is in the page")
			}
			if v, _ := page.field("secret"); v != "" {
				t.Errorf("the secret field is filled in again with %q", v)
			}
			f.wantState(t, e.ID, flow.InProgress)
			f.wantNoCredential(t, "alice", demoSlot)
			last := f.lastEntry(t, e.ID)
			if last.Event != flow.InputRejected || last.Reason != tc.rule || last.From != flow.InProgress || last.To != flow.InProgress {
				t.Errorf("last history entry %+v, want input_rejected with the rule, changing nothing", last)
			}
		})
	}
	if strings.Contains(f.logs.String(), "CANARY") {
		t.Error("a refused value reached the log")
	}
}

func TestAValidValueCompletesTheFlowAndIsStoredInTheSameStep(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	e := f.newFlow(t, "alice")
	b := f.browser(t, "alice")
	form := b.continueToForm(e.ID)

	page := b.submit(e.ID, form, validKey)

	page.want(t, http.StatusOK, "Demo API key", "probe-client")
	if strings.Contains(page.Body, validKey) {
		t.Error("the stored value is in the page")
	}
	f.wantState(t, e.ID, flow.Complete)
	cred, value := f.storedSecret(t, "alice", demoSlot)
	if value != validKey || cred.ElicitationID != e.ID || cred.Kind != state.KindSecret || cred.VerifiedAt == nil {
		t.Errorf("stored %+v (value matches: %v), want the key of this elicitation, verified", cred, value == validKey)
	}
	last := f.lastEntry(t, e.ID)
	if last.Event != flow.Verified || last.Actor != state.ActorUser || last.To != flow.Complete ||
		last.Reason != "secret received and verified with the API" {
		t.Errorf("last history entry %+v, want verified by the user, to complete", last)
	}
	if strings.Contains(f.logs.String(), validKey) {
		t.Error("the secret reached the log")
	}
}

func TestASecretTheAPIRefusesFailsTheFlowAndTheUserCanTryAgain(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	e := f.newFlow(t, "alice")
	b := f.browser(t, "alice")
	form := b.continueToForm(e.ID)

	page := b.submit(e.ID, form, unverifiable)

	page.want(t, http.StatusUnprocessableEntity, "Your Demo API key was not accepted", "Nothing was stored",
		"the API answered 401 Unauthorized", "Try again")
	if strings.Contains(page.Body, unverifiable) {
		t.Error("the refused value is in the page")
	}
	if !strings.Contains(page.Body, `href="/e/`+e.ID+`/secret"`) {
		t.Error("the page offers no way to try again with the form")
	}
	f.wantState(t, e.ID, flow.Failed)
	f.wantNoCredential(t, "alice", demoSlot)
	if last := f.lastEntry(t, e.ID); last.Event != flow.VerifyFailed || last.To != flow.Failed {
		t.Errorf("last history entry %+v, want verify_failed to failed", last)
	}

	again := b.get("/e/" + e.ID + "/secret")
	again.want(t, http.StatusOK, "Enter your Demo API key")
	f.wantState(t, e.ID, flow.InProgress)
	b.submit(e.ID, again, validKey).want(t, http.StatusOK)
	f.wantState(t, e.ID, flow.Complete)
	if _, value := f.storedSecret(t, "alice", demoSlot); value != validKey {
		t.Error("the stored value is not the one entered on the second try")
	}
	if strings.Contains(f.logs.String(), "CANARY") {
		t.Error("a refused value reached the log")
	}
}

func TestDeclineOnThePageEndsTheFlowDeclined(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	for _, tc := range []struct {
		name string
		from flow.State
	}{
		{"from the form", flow.InProgress},
		{"after a failed check", flow.Failed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := f.newFlow(t, "alice")
			b := f.browser(t, "alice")
			form := b.continueToForm(e.ID)
			if tc.from == flow.Failed {
				form = b.submit(e.ID, form, unverifiable)
				form.want(t, http.StatusUnprocessableEntity)
			}

			page := b.post("/e/"+e.ID+"/decline", url.Values{"csrf": {form.csrf(t)}})

			page.want(t, http.StatusOK, "You declined this request", "Nothing was stored")
			f.wantState(t, e.ID, flow.Declined)
			f.wantNoCredential(t, "alice", demoSlot)
			last := f.lastEntry(t, e.ID)
			if last.Event != flow.PageDecline || last.Actor != state.ActorUser || last.From != tc.from || last.To != flow.Declined {
				t.Errorf("last history entry %+v, want page_decline by the user from %s", last, tc.from)
			}
		})
	}
}

func TestPostsAfterTheFlowEndedChangeNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	e := f.newFlow(t, "alice")
	b := f.browser(t, "alice")
	form := b.continueToForm(e.ID)
	b.submit(e.ID, form, validKey).want(t, http.StatusOK)
	stored, _ := f.storedSecret(t, "alice", demoSlot)

	for _, action := range []string{"continue", "secret", "decline"} {
		t.Run(action, func(t *testing.T) {
			before := f.snapshot(t, e.ID)
			page := b.post("/e/"+e.ID+"/"+action, url.Values{"csrf": {form.csrf(t)}, "secret": {otherKey}})

			page.want(t, http.StatusConflict, "Already done", "Nothing was changed")
			f.wantState(t, e.ID, flow.Complete)
			h := f.history(t, e.ID)
			last := h[len(h)-1]
			if recorded(h) != before.History+1 || last.Event != flow.LatePost || last.From != flow.Complete || last.To != flow.Complete ||
				!strings.HasSuffix(last.Reason, "/e/"+e.ID+"/"+action) {
				t.Errorf("history %v ends with %+v, want one late_post naming the form", events(h), last)
			}
		})
	}
	after, value := f.storedSecret(t, "alice", demoSlot)
	if value != validKey || !after.StoredAt.Equal(stored.StoredAt) {
		t.Error("a post after the end replaced the stored secret")
	}
}

func TestAnEndedLinkSaysHowItEnded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		end   func(t *testing.T, f *fixture, id string)
		state flow.State
		says  string
	}{
		{"declined in the client", func(t *testing.T, f *fixture, id string) { f.apply(t, id, flow.ClientDecline, state.ActorClient) },
			flow.Declined, "You declined this request"},
		{"cancelled", func(t *testing.T, f *fixture, id string) { f.apply(t, id, flow.CancelRequested, state.ActorUser) },
			flow.Cancelled, "This request was cancelled"},
		{"expired", func(t *testing.T, f *fixture, id string) { f.clock.Advance(11 * time.Minute) },
			flow.Expired, "This link has expired"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, fixtureOptions{})
			e := f.newFlow(t, "alice")
			tc.end(t, f, e.ID)
			b := f.browser(t, "alice")

			b.open(e.ID).want(t, http.StatusOK, tc.says, "Nothing was stored")
			b.get("/e/"+e.ID+"/secret").want(t, http.StatusOK, tc.says)
			f.wantState(t, e.ID, tc.state)
		})
		t.Run(tc.name+", a connection", func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, fixtureOptions{})
			e := f.newFlow(t, "alice", asConnection)
			tc.end(t, f, e.ID)
			page := f.browser(t, "alice").open(e.ID)
			page.want(t, http.StatusOK, tc.says, "Nothing was connected")
			if strings.Contains(page.Text(), "Nothing was stored") {
				t.Errorf("the page of a connection says nothing was stored: %s", page.Text())
			}
		})
	}
}

func TestOtherUserOpeningALinkIsRefusedAndChangesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	e := f.newFlow(t, "alice")
	before := f.snapshot(t, e.ID)
	bob := f.browser(t, "bob")

	page := bob.open(e.ID)

	page.want(t, http.StatusForbidden, "This link belongs to another account", "You are signed in as bob",
		"phishing", "Nothing was changed", "Sign out")
	if strings.Contains(page.Text(), "to list your demo projects") {
		t.Error("the refusal shows the other user's request")
	}
	f.wantState(t, e.ID, before.State)
	h := f.history(t, e.ID)
	last := h[len(h)-1]
	if recorded(h) != before.History+1 || last.Event != flow.OtherUserOpened || last.Actor != state.ActorOther ||
		last.From != flow.Pending || last.To != flow.Pending || !strings.Contains(last.Reason, "bob") {
		t.Errorf("history %v ends with %+v, want one other_user_opened by bob changing nothing", events(h), last)
	}
	if got := f.counter(t, "urlflow_phishing_refusals_total"); got != 1 {
		t.Errorf("urlflow_phishing_refusals_total = %d, want 1", got)
	}
	if !strings.Contains(f.logs.String(), "possible phishing") {
		t.Error("the refusal was not logged")
	}

	// Alice's own flow goes on; Bob's forms on it are refused as well.
	f.browser(t, "alice").continueToForm(e.ID)
	for _, action := range []string{"continue", "secret", "decline"} {
		before := f.snapshot(t, e.ID)
		bob.post("/e/"+e.ID+"/"+action, url.Values{"csrf": {bob.csrf()}, "secret": {otherKey}}).
			want(t, http.StatusForbidden, "This link belongs to another account")
		if after := f.snapshot(t, e.ID); after.State != flow.InProgress || after.History != before.History+1 ||
			f.lastEntry(t, e.ID).Event != flow.OtherUserOpened {
			t.Errorf("Bob's %s: %+v, want in_progress with one more other_user_opened", action, after)
		}
	}
	if last := f.lastEntry(t, e.ID); last.Count != 3 {
		t.Errorf("Bob's three refusals in a row are counted %d times on the newest entry, want one entry counted 3 times", last.Count)
	}
	f.wantNoCredential(t, "alice", demoSlot)
	f.wantNoCredential(t, "bob", demoSlot)
	if got := f.counter(t, "urlflow_phishing_refusals_total"); got != 4 {
		t.Errorf("urlflow_phishing_refusals_total = %d, want 4", got)
	}
}

// A link loaded again and again by other users (issue 10: 1,500 page loads made a 285 KiB
// status answer) keeps a short history: refusals in a row by the same user are one entry
// with a count, and the entries between the first and the newest are dropped and counted.
func TestALinkLoadedByOthersAgainAndAgainKeepsItsStatusAnswerSmall(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	e := f.newFlow(t, "alice")
	bob, carol := f.browser(t, "bob"), f.browser(t, "carol")
	bob.signIn("/")
	carol.signIn("/")
	// Bob loads the link twice, then Carol once, and again: 200 entries without the cap.
	const loads = 300
	for i := range loads {
		b := bob
		if i%3 == 2 {
			b = carol
		}
		b.get("/e/"+e.ID).want(t, http.StatusForbidden, "This link belongs to another account")
	}

	got := f.api(t, http.MethodGet, "/api/v1/elicitations/"+e.ID, f.token(t, "alice"), "")

	var v flow.View
	got.decode(t, &v)
	if len(got.Body) > 32<<10 {
		t.Errorf("the status answer is %d bytes, want at most 32 KiB", len(got.Body))
	}
	if len(v.History) != flow.HistoryFirst+1+flow.HistoryNewest {
		t.Fatalf("the history has %d entries, want %d", len(v.History), flow.HistoryFirst+1+flow.HistoryNewest)
	}
	if first := v.History[0]; first.Event != flow.Created {
		t.Errorf("the first entry is %+v, want created", first)
	}
	for i, en := range v.History[1:flow.HistoryFirst] {
		who, count := "bob", 2
		if i%2 == 1 {
			who, count = "carol", 0
		}
		if en.Event != flow.OtherUserOpened || !strings.Contains(en.Reason, "opened by "+who+" ") || en.Count != count {
			t.Errorf("entry %d is %+v, want %s's refusal counted %d", i+1, en, who, max(count, 1))
		}
	}
	if dropped := v.History[flow.HistoryFirst]; dropped.Event != flow.HistoryDropped || dropped.Count == 0 {
		t.Errorf("entry %d is %+v, want the dropped entries", flow.HistoryFirst, dropped)
	}
	if n := recorded(v.History); n != 1+loads {
		t.Errorf("the history records %d events, want created and %d page loads", n, loads)
	}
	if got := f.counter(t, "urlflow_phishing_refusals_total"); got != loads {
		t.Errorf("urlflow_phishing_refusals_total = %d, want %d", got, loads)
	}
}

func TestUnknownOrMalformedLinksGetTheNotFoundPage(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	b := f.browser(t, "alice")
	b.signIn("/")
	csrf := b.csrf()
	for _, tc := range []struct{ name, id string }{
		{"well formed, never created", rand.Text()},
		{"malformed", "not-an-id"},
		{"lower case", strings.ToLower(rand.Text())},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b.get("/e/"+tc.id).want(t, http.StatusNotFound, "This link is not valid", "Nothing was changed")
			b.get("/e/"+tc.id+"/secret").want(t, http.StatusNotFound, "This link is not valid")
			b.post("/e/"+tc.id+"/continue", url.Values{"csrf": {csrf}}).want(t, http.StatusNotFound, "This link is not valid")
		})
	}
}

func TestAFormForAFlowNotYetOpenedGoesBackToTheConsentPage(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	e := f.newFlow(t, "alice")
	b := f.browser(t, "alice")
	b.signIn("/")
	before := f.snapshot(t, e.ID)

	form := b.get("/e/" + e.ID + "/secret")
	post := b.post("/e/"+e.ID+"/secret", url.Values{"csrf": {b.csrf()}, "secret": {validKey}})

	for _, page := range []answer{form, post} {
		if page.Status != http.StatusSeeOther || page.Location() != "/e/"+e.ID {
			t.Errorf("answered %d to %q, want 303 to the consent page", page.Status, page.Location())
		}
	}
	f.wantUnchanged(t, e.ID, before)
	f.wantNoCredential(t, "alice", demoSlot)
}

func TestTheHomePageSaysWhatThisServerIs(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	page := f.browser(t, "alice").get("/")
	page.want(t, http.StatusOK, "Secrets, entered where they belong")
	if _, ok := page.field("csrf"); ok {
		t.Error("the home page of a signed-out visitor has a form")
	}
}

func TestAFlowThatEndsWhileTheSecretIsCheckedStoresNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	for _, tc := range []struct {
		name, value string
		checked     flow.Event // what the check records, changing nothing
	}{
		{"the API accepts it", validKey, flow.Verified},
		{"the API refuses it", unverifiable, flow.VerifyFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			user := strings.ToLower(strings.ReplaceAll(tc.name, " ", "-"))
			e := f.newFlow(t, user)
			b := f.browser(t, user)
			form := b.continueToForm(e.ID)
			// The user cancels in the client while urlflow asks the API.
			f.whileVerifying(func(*http.Request) {
				if _, err := f.store.Apply(t.Context(), e.ID, flow.CancelRequested, state.ActorClient, "cancelled meanwhile"); err != nil {
					t.Errorf("cancel during the check: %v", err)
				}
			})
			defer f.whileVerifying(func(*http.Request) {})

			page := b.submit(e.ID, form, tc.value)

			page.want(t, http.StatusConflict, "This request was cancelled", "Nothing was changed")
			f.wantState(t, e.ID, flow.Cancelled)
			f.wantNoCredential(t, user, demoSlot)
			if last := f.lastEntry(t, e.ID); last.Event != tc.checked || last.From != flow.Cancelled || last.To != flow.Cancelled {
				t.Errorf("last history entry %+v, want %s changing nothing", last, tc.checked)
			}
		})
	}
}

func TestTheConsentPageNamesTheClientByTheTitleItGave(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	e := f.newFlow(t, "alice", func(n *flow.NewElicitation) {
		n.Client = state.ClientInfo{Name: "probe-client", Title: "Probe Client Deluxe", Version: "2.0"}
	})
	page := f.browser(t, "alice").open(e.ID)
	page.want(t, http.StatusOK, "Probe Client Deluxe", "2.0")
	if strings.Contains(page.Text(), "probe-client") {
		t.Error("the page shows the client's name instead of its title")
	}
}

// What a client says about itself enters urlflow through state.NewClientInfo, as the MCP
// tools make it: the consent page shows it bounded, without the characters that turn or hide
// text, and labelled as the client's own words.
func TestTheConsentPageShowsTheClientsWordsCleanedAndSelfReported(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	e := f.newFlow(t, "alice", func(n *flow.NewElicitation) {
		n.Client = state.NewClientInfo("evil-client", "\u202eTrusted Client "+strings.Repeat("A", 120_000), "2.0\u2066")
	})
	page := f.browser(t, "alice").open(e.ID)
	page.want(t, http.StatusOK, "Trusted Client "+strings.Repeat("A", 84)+"…", "2.0",
		"Self-reported by the client", "urlflow cannot verify this name: the client chose it.")
	if strings.ContainsAny(page.Body, "\u202e\u2066") {
		t.Error("the page holds the client's bidirectional controls")
	}
	if len(page.Body) > 20_000 {
		t.Errorf("the page is %d bytes long", len(page.Body))
	}
}

// A link whose secret slot or provider was removed from the configuration since it was
// created cannot go on: every page of it says so and nothing changes, so that the flow is
// not moved on nor a value refused by rules the server no longer has.
func TestALinkWhoseTargetIsNoLongerConfiguredIsUnavailableAndChangesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{}) // no provider: "acme" is not configured
	removedSlot := func(n *flow.NewElicitation) { n.Target = "removed_slot" }
	const (
		secretGone   = "This request is for a secret this server no longer has in its configuration"
		providerGone = "This request is for a provider this server no longer has in its configuration"
	)
	for _, tc := range []struct {
		name   string
		kind   func(*flow.NewElicitation)
		setup  []flow.Event // applied after creation, to reach the state the request finds
		method string
		action string // after /e/{id}
		says   string
	}{
		{"a secret's consent page", removedSlot, nil, http.MethodGet, "", secretGone},
		{"a secret's consent page after a failed check", removedSlot, []flow.Event{flow.BrowserOpen, flow.VerifyFailed},
			http.MethodGet, "", secretGone},
		{"a secret's continue", removedSlot, []flow.Event{flow.BrowserOpen}, http.MethodPost, "/continue", secretGone},
		{"a secret's form", removedSlot, []flow.Event{flow.BrowserOpen}, http.MethodGet, "/secret", secretGone},
		{"a secret's form after a failed check", removedSlot, []flow.Event{flow.BrowserOpen, flow.VerifyFailed},
			http.MethodGet, "/secret", secretGone},
		{"a secret's form post", removedSlot, []flow.Event{flow.BrowserOpen}, http.MethodPost, "/secret", secretGone},
		{"a connection's consent page", asConnection, nil, http.MethodGet, "", providerGone},
		{"a connection's consent page after a failed connection", asConnection, []flow.Event{flow.BrowserOpen, flow.VerifyFailed},
			http.MethodGet, "", providerGone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := f.newFlow(t, "alice", tc.kind)
			for _, ev := range tc.setup {
				f.apply(t, e.ID, ev, state.ActorSystem)
			}
			b := f.browser(t, "alice")
			b.signIn("/")
			before := f.snapshot(t, e.ID)

			page := b.send(request{method: tc.method, path: "/e/" + e.ID + tc.action,
				form: url.Values{"csrf": {b.csrf()}, "secret": {validKey}}})

			page.want(t, http.StatusServiceUnavailable, tc.says, "Nothing was changed")
			f.wantUnchanged(t, e.ID, before)
			f.wantNoCredential(t, "alice", e.Target)
		})
	}

	// A flow that has ended still says how.
	e := f.newFlow(t, "alice", removedSlot)
	f.apply(t, e.ID, flow.CancelRequested, state.ActorUser)
	f.browser(t, "alice").open(e.ID).want(t, http.StatusOK, "This request was cancelled")
}

// The done page tells the truth about who can use the secret the user provided, and who
// can see it, from the service that asked: the client through urlflow's own tools; a
// delegating service, by its verified label, only through urlflow; a service with release
// may receive it itself.
func TestTheDonePageSaysWhoCanUseWhatTheUserProvided(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	const ownTools = "The client can use it now through urlflow's tools, without ever seeing it."
	for _, tc := range []struct {
		name, service string
		says, not     []string
	}{
		{"urlflow's own tools", "", []string{ownTools}, []string{"never given", "allowed to receive"}},
		{"a service", weather, []string{"stored your Demo API key for Weather MCP",
			"Weather MCP can use it now through urlflow, which adds it to the service's requests: the service is never given it."},
			[]string{ownTools, "allowed to receive"}},
		{"a service with release", keyholder, []string{"stored your Demo API key for Keyholder MCP",
			"Keyholder MCP can use it now, and is allowed to receive it itself: once it does, it holds it too."},
			[]string{ownTools, "never given", "without ever seeing"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := ""
			if tc.service == "" {
				id = f.newFlow(t, "alice").ID
			} else {
				id = created(t, f.asService(t, tc.service, http.MethodPost, "/api/v1/elicitations", f.userTokenFor(t, "alice", tc.service), createDemoKey), http.StatusCreated).ID
			}
			b := f.browser(t, "alice")
			page := b.submit(id, b.continueToForm(id), validKey)
			page.want(t, http.StatusOK, tc.says...)
			for _, not := range tc.not {
				if strings.Contains(page.Text(), not) {
					t.Errorf("the done page says %q: %s", not, page.Text())
				}
			}
			f.wantState(t, id, flow.Complete)
		})
	}
}

// TestAUserAsksForMoreTime: on a 2025-11-25 session's flow the consent page and the form
// offer more time, which moves the deadline, is recorded as the user's, and returns to the
// page; a 2026-07-28 flow's page says why it cannot, and a post for it changes nothing.
func TestAUserAsksForMoreTime(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	e := f.newFlow(t, "alice", inSession(f.liveSession(t, "alice")))
	modern := f.newFlow(t, "alice") // no session: a 2026-07-28 client's
	b := f.browser(t, "alice")
	b.signIn("/")

	consent := b.get("/e/" + e.ID)
	consent.want(t, http.StatusOK, "Give me 10 more minutes")
	more := b.post("/e/"+e.ID+"/more-time", url.Values{})
	more.want(t, http.StatusForbidden) // no CSRF: nothing changes
	if got := f.get(t, e.ID); !got.ExpiresAt.Equal(e.ExpiresAt) {
		t.Fatalf("a post without CSRF moved the deadline to %v", got.ExpiresAt)
	}
	more = b.post("/e/"+e.ID+"/more-time", url.Values{"csrf": {consent.csrf(t)}})
	if more.Status != http.StatusSeeOther || more.Location() != "/e/"+e.ID {
		t.Fatalf("more time answered %d to %q, want 303 back to the consent page", more.Status, more.Location())
	}
	got := f.get(t, e.ID)
	if !got.ExpiresAt.Equal(e.ExpiresAt.Add(10*time.Minute)) || got.State != flow.InProgress {
		t.Errorf("after more time the flow is %s until %v, want in_progress until %v", got.State, got.ExpiresAt, e.ExpiresAt.Add(10*time.Minute))
	}
	if last := f.lastEntry(t, e.ID); last.Event != flow.TimeExtended || last.Actor != state.ActorUser {
		t.Errorf("the history ends with %+v, want the user's extension", last)
	}

	b.post("/e/"+e.ID+"/continue", url.Values{"csrf": {consent.csrf(t)}})
	form := b.get("/e/" + e.ID + "/secret")
	form.want(t, http.StatusOK, "Give me 10 more minutes")
	action, ok := form.formAction("more-time")
	if !ok {
		t.Fatal("the form page has no form for more time")
	}
	more = b.post(action, url.Values{"csrf": {form.csrf(t)}})
	if more.Status != http.StatusSeeOther || more.Location() != "/e/"+e.ID+"/secret" {
		t.Errorf("more time from the form answered %d to %q, want 303 back to the form", more.Status, more.Location())
	}

	page := b.get("/e/" + modern.ID)
	page.want(t, http.StatusOK, "This link cannot be given more time", "ask the client again for a new one")
	before := f.snapshot(t, modern.ID)
	b.post("/e/"+modern.ID+"/more-time", url.Values{"csrf": {page.csrf(t)}}).want(t, http.StatusSeeOther)
	got = f.get(t, modern.ID)
	if !got.ExpiresAt.Equal(modern.ExpiresAt) || got.Extensions != 0 {
		t.Errorf("more time for a 2026-07-28 flow moved its deadline: %+v (snapshot %+v)", got, before)
	}
}
