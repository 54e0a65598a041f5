package templates_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/a-h/templ"

	"github.com/urlflow/urlflow/internal/brand"
	"github.com/urlflow/urlflow/internal/browsertest"
	"github.com/urlflow/urlflow/internal/locale"
	"github.com/urlflow/urlflow/templates"
)

// csp is the Content-Security-Policy urlflow serves its pages with.
const csp = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// sample is one page of the gallery: a component with realistic data.
type sample struct {
	name string
	page templ.Component
}

// samples returns every page component, in the variants worth looking at. Times are
// relative to now so that expiry texts read naturally.
func samples() []sample {
	now := time.Now()
	signedIn := templates.Page{SignedInAs: "alice", CSRF: "csrf-token-1"}
	dev := signedIn
	dev.Dev = true
	longUser := templates.Page{SignedInAs: "alexandra.konstantinopoulou@research-infrastructure.example.org", CSRF: "csrf-token-2"}

	consent := templates.Consent{
		ElicitationID:   "el_7Hq2mXc9",
		ClientName:      "Claude Code",
		ClientVersion:   "2.1.4",
		Purpose:         "The weather tool needs your Demo API key to call the forecast service for you.",
		SlotLabel:       "Demo API key",
		SlotDescription: "The key from your Demo account settings, under Developer → API keys.",
		SlotName:        "demo_api_key",
		ExpiresAt:       now.Add(9*time.Minute + 40*time.Second),
		CSRF:            "csrf-token-1",
		ContinueAction:  "/e/el_7Hq2mXc9/continue",
		DeclineAction:   "/e/el_7Hq2mXc9/decline",
		MoreTime:        templates.MoreTime{Action: "/e/el_7Hq2mXc9/more-time", Amount: 10 * time.Minute},
	}
	longConsent := consent
	longConsent.ClientName = "Visual Studio Code — Insiders Edition with the Model Context Protocol Extension Pack for Remote Development"
	longConsent.ClientVersion = "1.107.0-insider+20251128.a3f9c2e7b1d04f6a"
	longConsent.Purpose = "To synchronise the invoices of the last quarter between the billing system and the accounting workspace, the sync_invoices tool needs an API key for the production billing API with read access to invoices, customers and payment records in all regions."
	longConsent.SlotLabel = "Acme production billing API key (EU West)"
	longConsent.SlotName = "acme_production_billing_api_key_eu_west_read_only"
	longConsent.SlotDescription = "A read-only key for the EU West region, created in the Acme console under Settings → API access → Keys. Keys for other regions do not work here."
	longConsent.Replace = true
	unnamed := consent
	locked := consent
	locked.Replace, locked.LockReason = true, "a call_api request carried it in its body"
	weak := consent
	weak.Replace, weak.Weak = true, true
	unnamed.ClientName, unnamed.ClientVersion, unnamed.Purpose = "", "", ""
	delegated := consent
	delegated.ServiceLabel = "Weather MCP"
	receives := delegated
	receives.ServiceReceives = true

	form := templates.SecretForm{
		ElicitationID:   "el_7Hq2mXc9",
		SlotLabel:       "Demo API key",
		SlotDescription: "The key from your Demo account settings, under Developer → API keys.",
		Rules:           []string{"be 32 to 64 characters long", "start with demo_", "contain only letters, digits and underscores"},
		ExpiresAt:       now.Add(8*time.Minute + 10*time.Second),
		CSRF:            "csrf-token-1",
		Action:          "/e/el_7Hq2mXc9/secret",
		DeclineAction:   "/e/el_7Hq2mXc9/decline",
		MoreTime:        templates.MoreTime{Action: "/e/el_7Hq2mXc9/more-time?from=form", Amount: 10 * time.Minute},
	}
	formParameters := form
	formParameters.Address = "https://{subdomain}.demo.example/api/v2"
	formParameters.Parameters = []templates.ParameterField{{Name: "subdomain", Label: "Demo subdomain",
		Description: "The first part of your Demo address, before .demo.example.", Hint: "Lower-case letters, digits and hyphens.", Value: "Acme Corp"}}
	formParameters.Error, formParameters.ErrorField = "Your Demo subdomain must be one part of a host name: letters, digits and inner hyphens, at most 63.", "subdomain"
	// A form whose link lapses in 90 s: the warning shows at once.
	formLapsing := form
	formLapsing.ExpiresAt = now.Add(90 * time.Second)
	formError := form
	formError.MoreTime = templates.MoreTime{Why: "the client holds this request with its deadline, which cannot move; if the link lapses, ask the client again for a new one"}
	formError.Error = "The Demo service did not accept this key (it answered 401 Unauthorized). Check that you copied the whole key."

	used := now.Add(-2 * time.Hour)
	connections := templates.Connections{Groups: []templates.ConnectionGroup{
		{Holder: "urlflow's own tools", Items: []templates.ConnectionItem{
			{Name: "demo_api_key", Label: "Demo API key", StoredAt: now.Add(-72 * time.Hour), LastUsedAt: &used},
			{Name: "github", Label: "GitHub account", Account: "alice-smith", StoredAt: now.Add(-24 * time.Hour), Problem: "The provider no longer honours it: connect again"},
		}},
		{Holder: "Weather MCP", Service: "weather", Items: []templates.ConnectionItem{
			{Name: "weather/helpdesk_token", Label: "Helpdesk API token", StoredAt: now.Add(-3 * time.Hour), Address: "https://acme-europe.helpdesk.example/api/v2"},
			{Name: "weather/demo_api_key", Label: "Demo API key", StoredAt: now.Add(-time.Hour), Problem: "Locked until you enter it again: a proxy request of the service weather carried it in its query"},
		}},
	}}

	operator := templates.Page{SignedInAs: "operator", CSRF: "csrf-token-4", Dev: true}
	stuckRow := templates.AdminRow{ID: "KIO7XZSIA5X6PFKSXKPXIK7OX44RAPSV6DK47QOEVEPZVZCFHY347YHNZNJL2I3E", State: "pending", Stuck: "pending",
		User: "alice", Target: "demo_api_key", Client: "Claude Code", CreatedAt: now.Add(-3*time.Minute - 12*time.Second), UpdatedAt: now.Add(-3*time.Minute - 12*time.Second)}
	doneRow := templates.AdminRow{ID: "UJQMYQWJ4PLDBJXXZCZVSF7I6HPLBHG5SJUNJXSJZJK2LSOROFPRIU7HPGGURHTU", State: "complete",
		User: "alexandra.konstantinopoulou@research-infrastructure.example.org", Target: "demo_api_key", Service: "weather",
		Client: "Visual Studio Code — Insiders", CreatedAt: now.Add(-time.Hour), UpdatedAt: now.Add(-55 * time.Minute)}
	admin := templates.Admin{
		Counts: []templates.AdminCount{{Label: "pending", List: "state=pending", StuckList: "stuck=true&state=pending", Running: 2, Stuck: 1, After: "2m"},
			{Label: "consented", List: "state=consented", Running: 0, After: "5m"}, {Label: "notification owed", List: "owed=true", After: "1m"}},
		Stuck: []templates.AdminRow{stuckRow}, Rows: []templates.AdminRow{doneRow, stuckRow},
		States: []string{"pending", "consented", "in_progress", "failed", "unknown", "complete", "declined", "cancelled", "expired"},
		Filter: templates.AdminFilter{User: "alice"}, NextURL: "/admin?cursor=abc",
	}
	stuckTotal := 27
	adminStuckPage := templates.Admin{Counts: admin.Counts, Stuck: admin.Stuck, StuckTotal: 14, Rows: []templates.AdminRow{stuckRow},
		States: admin.States, Filter: templates.AdminFilter{Stuck: true}, Total: &stuckTotal,
		NextURL: "/admin?stuck=true&cursor=def#flows", PrevURL: "/admin?stuck=true&cursor=abc#flows", FirstURL: "/admin?stuck=true#flows"}
	adminFlow := templates.AdminFlow{ID: stuckRow.ID, State: "pending", Stuck: "pending", Kind: "secret", Target: "demo_api_key",
		User: "alice at urn:urlflow:dev", Client: "Claude Code", Era: "2025-11-25", Replica: "host-1234",
		CreatedAt: stuckRow.CreatedAt, UpdatedAt: stuckRow.UpdatedAt, ExpiresAt: now.Add(7 * time.Minute),
		Delivery: "none owed (the flow is running, or had no MCP session)", CSRF: "csrf-token-4",
		History: []templates.AdminEntry{{At: stuckRow.CreatedAt, Event: "created", Actor: "client", To: "pending", Reason: "to list your demo projects"},
			{At: now.Add(-time.Minute), Event: "other_user_opened", Actor: "other_user", From: "pending", To: "pending", Reason: "refused: opened by bob", Count: 3}},
		Actions: []templates.AdminAction{{Name: "cancel", Label: "Cancel this flow", Explain: "Ends it as cancelled: the client is told, and the link stops working."}},
	}

	return []sample{
		{"admin", templates.AdminPage(operator, admin)},
		{"admin-stuck-second-page", templates.AdminPage(operator, adminStuckPage)},
		{"admin-empty", templates.AdminPage(operator, templates.Admin{Error: "olderThan: want a duration such as 10m or 2h"})},
		{"admin-flow", templates.AdminFlowPage(operator, adminFlow)},
		{"admin-confirm", templates.AdminConfirmPage(operator, templates.AdminConfirm{ID: stuckRow.ID, Action: "cancel", Question: "Cancel this flow?", Yes: "Yes, cancel this flow",
			Explain: "Ends it as cancelled: the client is told, and the link stops working.", Reason: "the user asked on the helpdesk", CSRF: "csrf-token-4"})},
		{"dev-sign-in", templates.DevSignInPage(templates.Page{Dev: true}, templates.DevSignIn{Next: "/e/el_7Hq2mXc9", CSRF: "csrf-token-0", Operator: "operator"})},
		{"dev-sign-in-error", templates.DevSignInPage(templates.Page{Dev: true}, templates.DevSignIn{Next: "/e/el_7Hq2mXc9", CSRF: "csrf-token-0", Name: "Alice Smith!", Error: "Use letters, digits, dots, dashes or underscores only.", Operator: "operator"})},
		{"consent", templates.ConsentPage(signedIn, consent)},
		{"consent-dev", templates.ConsentPage(dev, consent)},
		{"consent-long-client", templates.ConsentPage(longUser, longConsent)},
		{"consent-unnamed-client", templates.ConsentPage(signedIn, unnamed)},
		{"consent-locked", templates.ConsentPage(signedIn, locked)},
		{"consent-weak", templates.ConsentPage(dev, weak)},
		{"consent-service", templates.ConsentPage(signedIn, delegated)},
		{"consent-service-receives", templates.ConsentPage(signedIn, receives)},
		{"secret-form", templates.SecretFormPage(signedIn, form)},
		{"secret-form-lapsing", templates.SecretFormPage(signedIn, formLapsing)},
		{"secret-form-error", templates.SecretFormPage(dev, formError)},
		{"secret-form-parameters", templates.SecretFormPage(signedIn, formParameters)},
		{"done", templates.DonePage(signedIn, templates.Done{SlotLabel: "Demo API key", ClientName: "Claude Code"})},
		{"done-unknown-client", templates.DonePage(signedIn, templates.Done{SlotLabel: "Demo API key"})},
		{"done-service", templates.DonePage(signedIn, templates.Done{SlotLabel: "Demo API key", ClientName: "Claude Code", ServiceLabel: "Weather MCP"})},
		{"done-service-receives", templates.DonePage(signedIn, templates.Done{SlotLabel: "Demo API key", ClientName: "Claude Code", ServiceLabel: "Keyholder MCP", ServiceReceives: true})},
		{"ended-declined", templates.EndedPage(signedIn, templates.Ended{State: "declined", Heading: "You declined this request", Message: "urlflow told the client that you said no. No secret was stored."})},
		{"ended-nothing-changed", templates.EndedPage(dev, templates.Ended{State: "expired", Heading: "This request has expired", Message: "The link was valid for 10 minutes. Ask your client to start again if you still want to provide the secret.", NothingChanged: true})},
		{"ended-complete", templates.EndedPage(signedIn, templates.Ended{State: "complete", Heading: "This request is already complete", Message: "Your Demo API key was saved earlier. There is nothing more to do here.", NothingChanged: true})},
		{"refused", templates.RefusedPage(templates.Page{SignedInAs: "bob", CSRF: "csrf-token-3"}, templates.Refused{SignedInAs: "bob", SignOutAction: "/auth/logout?next=%2Fe%2Fel_7Hq2mXc9", CSRF: "csrf-token-3"})},
		{"refused-long-name", templates.RefusedPage(longUser, templates.Refused{SignedInAs: longUser.SignedInAs, SignOutAction: "/auth/logout", CSRF: "csrf-token-2"})},
		{"problem", templates.ProblemPage(templates.Page{}, templates.Problem{Status: http.StatusNotFound, Heading: "This link does not work", Message: "There is no request at this address. Check that you copied the whole link from your client."})},
		{"problem-dev", templates.ProblemPage(dev, templates.Problem{Status: http.StatusInternalServerError, Heading: "Something went wrong on our side", Message: "urlflow could not reach its storage. Nothing was saved; try again in a minute."})},
		{"signed-out", templates.SignedOutPage(templates.Page{}, templates.SignedOut{})},
		{"home", templates.HomePage(templates.Page{})},
		{"home-signed-in", templates.HomePage(signedIn)},
		{"connections", templates.ConnectionsPage(signedIn, connections)},
		{"connections-none", templates.ConnectionsPage(dev, templates.Connections{Notice: "Your Demo API key is deleted: Weather MCP can no longer use it."})},
		{"connect", templates.ConnectPage(signedIn, templates.Connect{ElicitationID: "el_7Hq2mXc9", ClientName: "Claude Code", ClientVersion: "2.1.0",
			Purpose: "Connect your GitHub account so that urlflow can use it for you.", ProviderLabel: "GitHub", ProviderName: "github",
			Scopes: []string{"read:user", "repo"}, ExpiresAt: now.Add(9 * time.Minute), CSRF: "csrf-token-1",
			ContinueAction: "/e/el_7Hq2mXc9/authorize", DeclineAction: "/e/el_7Hq2mXc9/decline"})},
		{"connect-service", templates.ConnectPage(signedIn, templates.Connect{ElicitationID: "el_7Hq2mXc9", ServiceLabel: "Issue Tracker MCP",
			ClientName: "Claude Code", ClientVersion: "2.1.0", ProviderLabel: "GitHub", ProviderName: "github",
			Scopes: []string{"repo"}, ExpiresAt: now.Add(9 * time.Minute), CSRF: "csrf-token-1",
			ContinueAction: "/e/el_7Hq2mXc9/authorize", DeclineAction: "/e/el_7Hq2mXc9/decline"})},
		{"connect-reconnect-no-scopes", templates.ConnectPage(dev, templates.Connect{ProviderLabel: "Notion", ProviderName: "notion",
			Reconnect: true, ExpiresAt: now.Add(9 * time.Minute), CSRF: "csrf-token-1",
			ContinueAction: "/e/el_7Hq2mXc9/authorize", DeclineAction: "/e/el_7Hq2mXc9/decline"})},
		{"done-connected", templates.DonePage(signedIn, templates.Done{SlotLabel: "GitHub account", ClientName: "Claude Code", Account: "octocat"})},
		{"failed-connection", templates.FailedPage(signedIn, templates.Failed{SlotLabel: "GitHub account", Connection: true,
			Reason: "the access was declined at GitHub", TryAgainURL: "/e/el_7Hq2mXc9", DeclineAction: "/e/el_7Hq2mXc9/decline",
			CSRF: "csrf-token-1", ExpiresAt: time.Now().Add(8 * time.Minute)})},
		{"failed", templates.FailedPage(signedIn, templates.Failed{SlotLabel: "Demo API key", Reason: "the API answered 401 Unauthorized",
			TryAgainURL: "/e/el_7Hq2mXc9/secret", DeclineAction: "/e/el_7Hq2mXc9/decline", CSRF: "csrf-token-1", ExpiresAt: time.Now().Add(8 * time.Minute)})},
	}
}

// render renders a component to a string.
func render(t *testing.T, c templ.Component) string {
	t.Helper()
	var buf bytes.Buffer
	if err := c.Render(context.Background(), &buf); err != nil {
		t.Fatalf("render: %v", err)
	}
	return buf.String()
}

// acme is a deployment's brand: its name, logo, a green accent and a support link. The
// gallery renders a sample with it under /gallery/NAME?brand=acme.
var acme = func() *brand.Brand {
	var c brand.Config
	c.ProductName, c.Logo, c.Colors.Accent = "Acme Keys", "acme.svg", "#0b6e4f"
	c.Support.URL, c.Support.Label = "mailto:help@acme.example", "Write to the help desk"
	logo := []byte(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 40 28"><rect width="40" height="28" rx="6" fill="#0b6e4f"/><path d="M8 22 20 6l12 16z" fill="#fff"/></svg>`)
	b, problems := brand.Load(c, func(string) ([]byte, error) { return logo, nil })
	if problems != nil {
		panic(fmt.Sprint(problems))
	}
	return b
}()

// gallery serves every sample under /gallery/NAME (?lang=de: in German; ?brand=acme: in
// acme's look), the stylesheet under /static/ from
// templates.Static, and everything with urlflow's CSP. A post of the secret form answers,
// as urlflow does, with the form again and an error, never with the value.
func gallery(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("GET /static/", http.FileServerFS(templates.Static))
	mux.HandleFunc("GET "+templates.LapseStylesheetPath, templates.ServeLapseStylesheet)
	mux.HandleFunc("GET /gallery/{name}", func(w http.ResponseWriter, r *http.Request) {
		// The samples of each request, so that their times are as far from now as they say.
		i := slices.IndexFunc(samples(), func(s sample) bool { return s.name == r.PathValue("name") })
		if i < 0 {
			http.NotFound(w, r)
			return
		}
		if r.URL.Query().Get("brand") == "acme" {
			r = r.WithContext(templates.WithBrand(r.Context(), acme))
		}
		if lang := r.URL.Query().Get("lang"); lang != "" {
			r = r.WithContext(locale.With(r.Context(), locale.Default().Negotiate(lang, "")))
		}
		templ.Handler(samples()[i].page).ServeHTTP(w, r)
	})
	mux.HandleFunc("GET "+brand.LogoPath, acme.ServeLogo)
	mux.HandleFunc("GET "+brand.StylesheetPath, acme.ServeStylesheet)
	// The secret form whose link lapses in the given number of seconds.
	mux.HandleFunc("GET /lapsing/{seconds}", func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(r.PathValue("seconds"))
		if err != nil {
			http.NotFound(w, r)
			return
		}
		v := templates.SecretForm{SlotLabel: "Demo API key", CSRF: "csrf-token-1", Action: "/e/el_7Hq2mXc9/secret",
			ExpiresAt: time.Now().Add(time.Duration(n) * time.Second), MoreTime: templates.MoreTime{Action: "/e/el_7Hq2mXc9/more-time", Amount: 10 * time.Minute}}
		templ.Handler(templates.SecretFormPage(templates.Page{SignedInAs: "alice", CSRF: "csrf-token-1"}, v)).ServeHTTP(w, r)
	})
	mux.HandleFunc("POST /e/el_7Hq2mXc9/secret", func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		v := templates.SecretForm{
			SlotLabel: "Demo API key", Rules: []string{"start with demo_"},
			Error: "This does not look like a Demo API key.", CSRF: "csrf-token-1",
			Action: "/e/el_7Hq2mXc9/secret", DeclineAction: "/e/el_7Hq2mXc9/decline",
		}
		w.WriteHeader(http.StatusUnprocessableEntity)
		templ.Handler(templates.SecretFormPage(templates.Page{SignedInAs: "alice", CSRF: "csrf-token-1"}, v)).ServeHTTP(w, r)
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", csp)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestGallery opens every page in headless Chromium under urlflow's CSP, saves desktop and
// phone screenshots, and checks what a browser can check best: the stylesheet applies, no
// CSP violation or console error, every field has a label.
func TestGallery(t *testing.T) {
	srv := gallery(t)
	// One user for all pages: no page here sets a cookie, and a browser context costs
	// about a second to open.
	u := browsertest.Start(t).NewUser(t, "gallery")
	for _, s := range samples() {
		t.Run(s.name, func(t *testing.T) {
			u.ClearConsole(t)
			if status := u.Navigate(t, srv.URL+"/gallery/"+s.name); status != http.StatusOK {
				t.Fatalf("status %d, want 200", status)
			}
			u.Screenshot(t, s.name)
			u.AssertNoCSPViolations(t)
			u.AssertNoConsoleErrors(t)
			if !browsertest.Evaluate[bool](t, u, `getComputedStyle(document.body).display === "flex"`) {
				t.Error("the stylesheet did not apply")
			}
			if title := browsertest.Evaluate[string](t, u, `document.title`); !strings.HasSuffix(title, " · urlflow") && title != "urlflow" {
				t.Errorf("title %q, want it to end with ' · urlflow'", title)
			}
			unlabelled := browsertest.Evaluate[[]string](t, u, `Array.from(document.querySelectorAll("input:not([type=hidden]), select, textarea")).filter(e => e.labels.length === 0).map(e => e.name || e.id || e.outerHTML)`)
			if len(unlabelled) > 0 {
				t.Errorf("inputs without a label: %q", unlabelled)
			}
			// Everything but the skip link sits in a landmark, so that a screen reader's list of
			// landmarks reaches all of it (axe's "region").
			outside := browsertest.Evaluate[[]string](t, u, `Array.from(document.body.children).filter(e => !e.matches("header, main, footer, aside[aria-label], a.skip-link")).map(e => e.outerHTML.slice(0, 80))`)
			if len(outside) > 0 {
				t.Errorf("content outside any landmark: %q", outside)
			}
			dangling := browsertest.Evaluate[[]string](t, u, `Array.from(document.querySelectorAll("[aria-describedby]")).flatMap(e => e.getAttribute("aria-describedby").split(/\s+/)).filter(id => !document.getElementById(id))`)
			if len(dangling) > 0 {
				t.Errorf("aria-describedby names missing ids: %q", dangling)
			}
		})
	}
}

// TestGalleryDarkScheme saves dark-scheme screenshots of the pages with the most colour.
func TestGalleryDarkScheme(t *testing.T) {
	srv := gallery(t)
	u := browsertest.Start(t).NewUser(t, "gallery-dark")
	u.SetColorScheme(t, "dark")
	for _, name := range []string{"consent-dev", "secret-form-error", "refused", "done", "ended-nothing-changed"} {
		t.Run(name, func(t *testing.T) {
			u.ClearConsole(t)
			u.Navigate(t, srv.URL+"/gallery/"+name)
			if !browsertest.Evaluate[bool](t, u, `matchMedia("(prefers-color-scheme: dark)").matches`) {
				t.Fatal("dark scheme not emulated")
			}
			u.Screenshot(t, name+"-dark")
			u.AssertNoCSPViolations(t)
			u.AssertNoConsoleErrors(t)
		})
	}
}

// TestSubmittedSecretIsNeverShownAgain types a secret, submits it, gets the form back with
// an error, and checks that the value appears nowhere in the new page.
func TestSubmittedSecretIsNeverShownAgain(t *testing.T) {
	const secret = "demo_hunter2_must_never_come_back"
	srv := gallery(t)
	u := browsertest.Start(t).NewUser(t, "alice")
	u.Navigate(t, srv.URL+"/gallery/secret-form")
	u.Fill(t, "#secret", secret)
	if status := u.Submit(t, `form[action$="/secret"] button[type=submit]`); status != http.StatusUnprocessableEntity {
		t.Fatalf("status %d after submit, want 422", status)
	}
	if got := u.Text(t, "#secret-error"); !strings.Contains(got, "does not look like a Demo API key") {
		t.Errorf("error text %q", got)
	}
	if got := u.Value(t, "#secret"); got != "" {
		t.Errorf("the secret field holds %q after the error, want it empty", got)
	}
	if html := u.HTML(t); strings.Contains(html, secret) {
		t.Error("the page after the error contains the submitted secret")
	}
	if got := browsertest.Evaluate[string](t, u, `document.getElementById("secret").getAttribute("aria-invalid")`); got != "true" {
		t.Errorf("aria-invalid=%q, want true", got)
	}
	u.Screenshot(t, "secret-form-after-post")
	u.AssertNoCSPViolations(t)
}

// TestTheHeaderKeepsTheNameAndSignOutAtLargeText opens signed-in pages on a phone with the
// text at 200 % and checks that the signed-in name is shown whole and "Sign out" is on the
// screen (WCAG 1.4.4), at a long name too.
func TestTheHeaderKeepsTheNameAndSignOutAtLargeText(t *testing.T) {
	srv := gallery(t)
	u := browsertest.Start(t).NewUser(t, "large-text")
	u.AsPhone(t)
	for _, name := range []string{"consent", "consent-long-client", "secret-form-error", "admin", "refused-long-name"} {
		t.Run(name, func(t *testing.T) {
			u.Navigate(t, srv.URL+"/gallery/"+name)
			browsertest.Evaluate[string](t, u, `document.documentElement.style.fontSize = "200%"`)
			problems := browsertest.Evaluate[[]string](t, u, `(() => {
				const out = [], width = document.documentElement.clientWidth;
				const name = document.querySelector(".signout-name"), button = document.querySelector(".signout button");
				if (!name || !button) return ["no signed-in name or sign-out button"];
				if (name.scrollWidth > name.clientWidth + 1) out.push("the name is cut: " + name.scrollWidth + " > " + name.clientWidth);
				for (const [what, e] of [["the name", name], ["Sign out", button]]) {
					const r = e.getBoundingClientRect();
					if (r.left < 0 || r.right > width + 1 || r.width === 0) out.push(what + " is off the screen: " + r.left + " to " + r.right + " of " + width);
				}
				return out;
			})()`)
			if len(problems) > 0 {
				t.Errorf("at 200%% text on a phone: %q", problems)
			}
		})
	}
}

// TestARefusedFormIsAnnounced posts each form that can be refused and checks, in Chromium,
// what tells a person using a screen reader that it was: the title starts with "Error:",
// the field in error has the focus (no script: autofocus), and an error summary at the top
// links to that field, whose link moves the focus there.
func TestARefusedFormIsAnnounced(t *testing.T) {
	srv := gallery(t)
	u := browsertest.Start(t).NewUser(t, "announced")
	u.Navigate(t, srv.URL+"/gallery/secret-form")
	u.Fill(t, "#secret", "not-a-demo-key")
	if status := u.Submit(t, `form[action$="/secret"] button[type=submit]`); status != http.StatusUnprocessableEntity {
		t.Fatalf("status %d after submit, want 422", status)
	}
	checkAnnounced(t, u, "secret", "This does not look like a Demo API key.")
	for page, field := range map[string]string{"dev-sign-in-error": "name", "secret-form-parameters": "param-subdomain"} {
		u.Navigate(t, srv.URL+"/gallery/"+page)
		checkAnnounced(t, u, field, "")
	}
}

// checkAnnounced checks that the page u shows announces an error about field (with the
// message, when given).
func checkAnnounced(t *testing.T, u *browsertest.User, field, message string) {
	t.Helper()
	if title := browsertest.Evaluate[string](t, u, `document.title`); !strings.HasPrefix(title, "Error: ") {
		t.Errorf("title %q, want it to start with 'Error: '", title)
	}
	if got := browsertest.Evaluate[string](t, u, `document.activeElement.id`); got != field {
		t.Errorf("the focus is on %q, want the field in error, %q", got, field)
	}
	links := browsertest.Evaluate[[]string](t, u, `Array.from(document.querySelectorAll(".error-summary[role=alert] a")).map(a => a.getAttribute("href") + " " + a.textContent)`)
	if len(links) != 1 || !strings.HasPrefix(links[0], "#"+field+" ") || !strings.Contains(links[0], message) {
		t.Errorf("error summary links %q, want one to #%s saying %q", links, field, message)
	}
	u.Click(t, "body") // away from the field
	u.Click(t, ".error-summary a")
	if got := browsertest.Evaluate[string](t, u, `document.activeElement.id`); got != field {
		t.Errorf("after the summary's link the focus is on %q, want %q", got, field)
	}
}

// TestTheWarningShowsBeforeTheLinkLapsesAndTheNoticeAfter opens forms whose links lapse
// soon, without script, and watches the warning and the notice appear as the time passes.
func TestTheWarningShowsBeforeTheLinkLapsesAndTheNoticeAfter(t *testing.T) {
	srv := gallery(t)
	u := browsertest.Start(t).NewUser(t, "lapsing")
	shown := func(class string) bool {
		return browsertest.Evaluate[bool](t, u, `(() => { const e = document.querySelector(".`+class+`");
			return getComputedStyle(e).visibility === "visible" && e.getBoundingClientRect().height > 0 })()`)
	}
	// Two minutes and four seconds left: no warning yet; four seconds later, the warning.
	u.Navigate(t, srv.URL+"/lapsing/124")
	if shown("lapse-soon") || shown("lapse-over") {
		t.Fatal("a warning shows with more than two minutes left")
	}
	waitFor(t, "the warning, two minutes before", func() bool { return shown("lapse-soon") && !shown("lapse-over") })
	if !browsertest.Evaluate[bool](t, u, `!!document.querySelector(".lapse-soon form[action='/e/el_7Hq2mXc9/more-time'] button")`) {
		t.Error("the warning does not offer more time")
	}
	u.AssertNoCSPViolations(t)

	// Two seconds left: the warning at once, then the notice in its place.
	u.Navigate(t, srv.URL+"/lapsing/2")
	if !shown("lapse-soon") {
		t.Error("no warning with two seconds left")
	}
	waitFor(t, "the notice that the link lapsed", func() bool { return shown("lapse-over") && !shown("lapse-soon") })
	u.AssertNoCSPViolations(t)
	u.AssertNoConsoleErrors(t)
}

// waitFor polls cond for up to 10 s, failing the test with what if it never holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("%s: not within 10 s", what)
}

// overflowScript lists what sticks out of the page's width sideways, outside the tables
// that scroll in their own focusable region: the document's own scrolling, and each
// element whose box passes the edge.
const overflowScript = `(() => {
	const width = document.documentElement.clientWidth, out = [];
	if (document.documentElement.scrollWidth > width + 1) out.push("the page scrolls sideways: " + document.documentElement.scrollWidth + " > " + width);
	for (const e of document.body.querySelectorAll("*")) {
		if (e.closest(".table-scroll, .skip-link") || getComputedStyle(e).visibility === "hidden") continue;
		const r = e.getBoundingClientRect();
		if (r.width > 0 && (r.right > width + 1 || r.left < -1)) out.push(e.tagName.toLowerCase() + "." + e.className + " spans " + Math.round(r.left) + " to " + Math.round(r.right));
	}
	return out.slice(0, 5);
})()`

// TestEveryPageReflowsAt320PxAndAt200PercentText opens every page 320 CSS pixels wide (a
// 1280 px window at 400 % zoom, WCAG 1.4.10), in every language, and on a phone with text
// at 200 % (1.4.4), and finds nothing that needs scrolling sideways outside the tables'
// own regions.
func TestEveryPageReflowsAt320PxAndAt200PercentText(t *testing.T) {
	srv := gallery(t)
	u := browsertest.Start(t).NewUser(t, "reflow")
	type view struct {
		name      string
		setUp     func()
		query     string
		largeText bool // text at 200 %
	}
	views := []view{
		{"320px", func() { u.AsNarrowDesktop(t, 320) }, "", false},
		{"phone-200%-text", func() { u.AsPhone(t) }, "", true},
	}
	// Every other language too, where its longest words meet the narrowest page.
	for _, l := range locale.Default().Localizers()[1:] {
		views = append(views, view{"320px-" + l.Lang(), func() { u.AsNarrowDesktop(t, 320) }, "?lang=" + l.Lang(), false},
			view{"phone-200%-text-" + l.Lang(), func() { u.AsPhone(t) }, "?lang=" + l.Lang(), true})
	}
	for _, view := range views {
		view.setUp()
		for _, s := range samples() {
			t.Run(view.name+"/"+s.name, func(t *testing.T) {
				u.Navigate(t, srv.URL+"/gallery/"+s.name+view.query)
				if view.largeText {
					browsertest.Evaluate[string](t, u, `document.documentElement.style.fontSize = "200%"`)
				}
				if problems := browsertest.Evaluate[[]string](t, u, overflowScript); len(problems) > 0 {
					t.Errorf("sticks out sideways: %q", problems)
				}
			})
		}
	}
}
