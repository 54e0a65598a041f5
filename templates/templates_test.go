package templates_test

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/urlflow/urlflow/templates"
)

// parse parses a rendered page.
func parse(t *testing.T, page string) *html.Node {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(page))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return doc
}

// elements returns every element of the document, in document order.
func elements(doc *html.Node) []*html.Node {
	var out []*html.Node
	for n := range doc.Descendants() {
		if n.Type == html.ElementNode {
			out = append(out, n)
		}
	}
	return out
}

func attr(n *html.Node, name string) (string, bool) {
	for _, a := range n.Attr {
		if a.Key == name {
			return a.Val, true
		}
	}
	return "", false
}

// text is the text content of n, with runs of white space collapsed.
func text(n *html.Node) string {
	var b strings.Builder
	for d := range n.Descendants() {
		if d.Type == html.TextNode {
			b.WriteString(d.Data)
		}
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// visibleText is the page's body text with white space collapsed, for "says X" checks.
func visibleText(t *testing.T, page string) string {
	t.Helper()
	for _, n := range elements(parse(t, page)) {
		if n.Data == "body" {
			return text(n)
		}
	}
	t.Fatal("no body")
	return ""
}

// TestPagesKeepTheCSPAndAccessibilityRules checks every sample page for what the CSP and
// the accessibility rules require: no inline style or script, lang set, one h1 and no
// skipped heading level, every field labelled, buttons as <button>, and a CSRF token in
// every form.
func TestPagesKeepTheCSPAndAccessibilityRules(t *testing.T) {
	for _, s := range samples() {
		t.Run(s.name, func(t *testing.T) {
			page := render(t, s.page)
			doc := parse(t, page)
			els := elements(doc)
			ids := map[string]bool{}
			labelFor := map[string]bool{}
			for _, n := range els {
				if id, ok := attr(n, "id"); ok {
					if ids[id] {
						t.Errorf("duplicate id %q", id)
					}
					ids[id] = true
				}
				if f, ok := attr(n, "for"); ok && n.Data == "label" {
					labelFor[f] = true
				}
			}
			h1s, lastLevel := 0, 0
			sawStylesheet := false
			for _, n := range els {
				switch n.Data {
				case "script", "style", "iframe", "object", "embed":
					t.Errorf("<%s> element: the CSP forbids it", n.Data)
				case "html":
					if lang, _ := attr(n, "lang"); lang != "en" {
						t.Errorf(`<html lang=%q>, want "en"`, lang)
					}
				case "link":
					if href, _ := attr(n, "href"); href == "/static/urlflow.css" {
						sawStylesheet = true
					}
				case "h1", "h2", "h3", "h4", "h5", "h6":
					level := int(n.Data[1] - '0')
					if level == 1 {
						h1s++
					}
					if level > lastLevel+1 {
						t.Errorf("<%s> %q follows h%d: heading levels skip", n.Data, text(n), lastLevel)
					}
					lastLevel = level
				case "input":
					typ, _ := attr(n, "type")
					if typ == "submit" || typ == "button" || typ == "image" {
						t.Errorf("<input type=%s>: use <button>", typ)
					}
					if typ == "hidden" {
						continue
					}
					id, _ := attr(n, "id")
					if !labelFor[id] && !insideLabel(n) {
						t.Errorf("input %v has no <label>", n.Attr)
					}
				case "button":
					if typ, _ := attr(n, "type"); typ != "submit" {
						t.Errorf("button %q has type %q, want submit (there is no script)", text(n), typ)
					}
				case "form":
					// A form that changes something posts with a CSRF token; only a search
					// (the operators' filters) may use GET, which changes nothing.
					switch method, _ := attr(n, "method"); {
					case method == "get" && !hasCSRF(n):
					case method != "post":
						t.Errorf("form method %q, want post (or get for a search, without a token)", method)
					case !hasCSRF(n):
						t.Errorf("form to %q posts no csrf token", mustAttr(n, "action"))
					}
				}
				for _, a := range n.Attr {
					if a.Key == "style" || strings.HasPrefix(a.Key, "on") {
						t.Errorf("<%s %s=...>: the CSP forbids inline style and script", n.Data, a.Key)
					}
					if a.Key == "href" || a.Key == "src" || a.Key == "action" {
						if strings.Contains(a.Val, "://") || strings.HasPrefix(a.Val, "//") {
							t.Errorf("<%s %s=%q> points off the site", n.Data, a.Key, a.Val)
						}
					}
					if a.Key == "aria-describedby" {
						for _, id := range strings.Fields(a.Val) {
							if !ids[id] {
								t.Errorf("aria-describedby names %q, which is not on the page", id)
							}
						}
					}
				}
			}
			if h1s != 1 {
				t.Errorf("%d <h1> elements, want 1", h1s)
			}
			if !sawStylesheet {
				t.Error("no link to /static/urlflow.css")
			}
			if title := titleOf(els); !strings.HasSuffix(title, " · urlflow") {
				t.Errorf("title %q, want it to end with ' · urlflow'", title)
			}
		})
	}
}

func insideLabel(n *html.Node) bool {
	for p := n.Parent; p != nil; p = p.Parent {
		if p.Type == html.ElementNode && p.Data == "label" {
			return true
		}
	}
	return false
}

func hasCSRF(form *html.Node) bool {
	for n := range form.Descendants() {
		if n.Type == html.ElementNode && n.Data == "input" {
			name, _ := attr(n, "name")
			typ, _ := attr(n, "type")
			value, _ := attr(n, "value")
			if name == "csrf" && typ == "hidden" && value != "" {
				return true
			}
		}
	}
	return false
}

func mustAttr(n *html.Node, name string) string {
	v, _ := attr(n, name)
	return v
}

func titleOf(els []*html.Node) string {
	for _, n := range els {
		if n.Data == "title" {
			return text(n)
		}
	}
	return ""
}

// secretInput returns the secret field of a rendered page.
func secretInput(t *testing.T, page string) *html.Node {
	t.Helper()
	for _, n := range elements(parse(t, page)) {
		if name, _ := attr(n, "name"); n.Data == "input" && name == "secret" {
			return n
		}
	}
	t.Fatal("no input named secret")
	return nil
}

func secretForm() templates.SecretForm {
	return templates.SecretForm{
		SlotLabel: "Demo API key", Rules: []string{"start with demo_"},
		CSRF: "tok", Action: "/e/x/secret", DeclineAction: "/e/x/decline",
		ExpiresAt: time.Now().Add(5 * time.Minute),
	}
}

func TestSecretFieldIsAnEmptyPasswordFieldEvenAfterAnError(t *testing.T) {
	for _, withError := range []bool{false, true} {
		v := secretForm()
		if withError {
			v.Error = "Too short."
		}
		page := render(t, templates.SecretFormPage(templates.Page{}, v))
		in := secretInput(t, page)
		if value, ok := attr(in, "value"); ok {
			t.Errorf("error=%v: the secret field has value=%q; a value must never be rendered", withError, value)
		}
		if typ, _ := attr(in, "type"); typ != "password" {
			t.Errorf("error=%v: type=%q, want password", withError, typ)
		}
		if ac, _ := attr(in, "autocomplete"); ac != "off" {
			t.Errorf("error=%v: autocomplete=%q, want off", withError, ac)
		}
		describedBy, _ := attr(in, "aria-describedby")
		invalid, hasInvalid := attr(in, "aria-invalid")
		if withError {
			if invalid != "true" {
				t.Errorf("aria-invalid=%q with an error, want true", invalid)
			}
			if describedBy != "secret-error secret-rules" {
				t.Errorf("aria-describedby=%q, want the error and the rules", describedBy)
			}
			if !strings.Contains(visibleText(t, page), "Too short.") {
				t.Error("the error message is not shown")
			}
		} else {
			if hasInvalid {
				t.Errorf("aria-invalid=%q without an error", invalid)
			}
			if describedBy != "secret-rules" {
				t.Errorf("aria-describedby=%q, want the rules", describedBy)
			}
		}
	}
}

func TestSecretFormDeclinesInAFormOfItsOwn(t *testing.T) {
	page := render(t, templates.SecretFormPage(templates.Page{}, secretForm()))
	var actions []string
	for _, n := range elements(parse(t, page)) {
		if n.Data == "form" && mustAttr(n, "method") == "post" { // not the language switcher
			actions = append(actions, mustAttr(n, "action"))
		}
	}
	if strings.Join(actions, " ") != "/e/x/secret /e/x/decline" {
		t.Errorf("form actions %q, want the secret form and then the decline form", actions)
	}
}

func TestConsentLabelsTheClientNameAsSelfReported(t *testing.T) {
	v := templates.Consent{
		ClientName: "Claude Code", ClientVersion: "2.1.4", Purpose: "To call the forecast API.",
		SlotLabel: "Demo API key", SlotDescription: "From your Demo settings.", SlotName: "demo_api_key",
		ExpiresAt: time.Now().Add(10 * time.Minute), CSRF: "tok",
		ContinueAction: "/e/x/continue", DeclineAction: "/e/x/decline",
	}
	got := visibleText(t, render(t, templates.ConsentPage(templates.Page{}, v)))
	for _, want := range []string{
		"Claude Code", "2.1.4", "Self-reported by the client", "To call the forecast API.",
		"Demo API key", "From your Demo settings.", "demo_api_key", "In about 10 minutes",
		"never shown to the client or the AI model", "Continue", "Decline",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("consent page does not say %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "already stored") {
		t.Error("consent page talks about replacing, but Replace is not set")
	}
	v.Replace = true
	if got := visibleText(t, render(t, templates.ConsentPage(templates.Page{}, v))); !strings.Contains(got, "already stored") {
		t.Error("consent page with Replace does not say that a value is already stored")
	}
}

func TestConsentEscapesWhatTheClientSaysAboutItself(t *testing.T) {
	v := templates.Consent{ClientName: `<script>alert("x")</script>`, Purpose: `<img src=x onerror=alert(1)>`, ContinueAction: "/c", DeclineAction: "/d", CSRF: "tok"}
	page := render(t, templates.ConsentPage(templates.Page{}, v))
	if strings.Contains(page, "<script>") || strings.Contains(page, "<img") {
		t.Errorf("client-supplied text reached the page unescaped:\n%s", page)
	}
}

// TestTextOthersChooseIsIsolatedForDirection renders, with right-to-left text from the
// client, the user and the provider, the pages that show it, and checks that each such text
// sits in an element that isolates its direction (<bdi>, or dir="auto"), so that an Arabic
// or Hebrew name does not reorder the sentence around it.
func TestTextOthersChooseIsIsolatedForDirection(t *testing.T) {
	const client, purpose, user, account = "مساعد البرمجة", "כדי לקרוא את התחזית", "سارة", "חשבון-שלי"
	page := templates.Page{SignedInAs: user, CSRF: "tok"}
	pages := map[string]string{
		"consent": render(t, templates.ConsentPage(page, templates.Consent{ClientName: client, ClientVersion: "1.0", Purpose: purpose,
			ContinueAction: "/c", DeclineAction: "/d", CSRF: "tok"})),
		"connect": render(t, templates.ConnectPage(page, templates.Connect{ClientName: client, Purpose: purpose, ProviderLabel: "GitHub",
			ContinueAction: "/c", DeclineAction: "/d", CSRF: "tok"})),
		"done": render(t, templates.DonePage(page, templates.Done{ClientName: client, Account: account, SlotLabel: "GitHub account"})),
		"admin": render(t, templates.AdminPage(page, templates.Admin{Rows: []templates.AdminRow{{ID: "X", State: "pending",
			User: user, Client: client, CreatedAt: time.Now(), UpdatedAt: time.Now()}}})),
	}
	isolated := regexp.MustCompile(`<bdi>([^<]*)</bdi>|dir="auto"[^>]*>([^<]*)<`)
	for name, html := range pages {
		var found []string
		for _, m := range isolated.FindAllStringSubmatch(html, -1) {
			found = append(found, m[1]+m[2])
		}
		for _, text := range []string{client, purpose, user, account} {
			if strings.Contains(html, text) && !slices.ContainsFunc(found, func(f string) bool { return strings.Contains(f, text) }) {
				t.Errorf("%s shows %q without isolating its direction", name, text)
			}
		}
	}
}

func TestEndedSaysNothingWasChangedOnlyWhenNothingChanged(t *testing.T) {
	for _, nothingChanged := range []bool{false, true} {
		v := templates.Ended{State: "expired", Heading: "This request has expired", Message: "Start again.", NothingChanged: nothingChanged}
		got := visibleText(t, render(t, templates.EndedPage(templates.Page{}, v)))
		if strings.Contains(got, "Nothing was changed.") != nothingChanged {
			t.Errorf("NothingChanged=%v, page: %s", nothingChanged, got)
		}
		for _, want := range []string{"This request has expired", "Expired", "Start again."} {
			if !strings.Contains(got, want) {
				t.Errorf("ended page does not say %q: %s", want, got)
			}
		}
	}
}

func TestEndedShowsTheStateInWords(t *testing.T) {
	for state, words := range map[string]string{
		"complete": "Completed", "declined": "Declined", "cancelled": "Cancelled", "expired": "Expired",
		"in_progress": "In progress", "unknown": "Unknown", "failed": "Not accepted",
	} {
		got := visibleText(t, render(t, templates.EndedPage(templates.Page{}, templates.Ended{State: state})))
		if !strings.Contains(got, "Status "+words) {
			t.Errorf("state %s: page does not say %q: %s", state, "Status "+words, got)
		}
	}
}

func TestRefusedExplainsPhishingCalmlyAndOffersSignOut(t *testing.T) {
	v := templates.Refused{SignedInAs: "bob", SignOutAction: "/auth/logout?next=%2Fe%2Fx", CSRF: "tok"}
	page := render(t, templates.RefusedPage(templates.Page{}, v))
	got := visibleText(t, page)
	for _, want := range []string{"another account", "bob", "phishing", "Nothing was changed.", "recorded this attempt", "Sign out"} {
		if !strings.Contains(got, want) {
			t.Errorf("refused page does not say %q: %s", want, got)
		}
	}
	found := false
	for _, n := range elements(parse(t, page)) {
		if n.Data == "form" && mustAttr(n, "action") == v.SignOutAction && hasCSRF(n) {
			found = true
		}
	}
	if !found {
		t.Errorf("no sign-out form posting to %q with a csrf token", v.SignOutAction)
	}
}

func TestDoneSendsTheUserBackToTheirClient(t *testing.T) {
	got := visibleText(t, render(t, templates.DonePage(templates.Page{}, templates.Done{SlotLabel: "Demo API key", ClientName: "Claude Code"})))
	for _, want := range []string{"Demo API key saved", "Return to Claude Code", "close this tab"} {
		if !strings.Contains(got, want) {
			t.Errorf("done page does not say %q: %s", want, got)
		}
	}
	got = visibleText(t, render(t, templates.DonePage(templates.Page{}, templates.Done{SlotLabel: "Demo API key"})))
	if !strings.Contains(got, "Return to your MCP client") {
		t.Errorf("done page without a client name: %s", got)
	}
}

// The done page says who can use what the user provided, and who can see it: the client
// through urlflow's tools; a delegating service (by its verified label) through urlflow,
// never given it; or a service with release, which may receive it itself.
func TestDoneSaysWhoCanUseTheCredentialAndWhoCanSeeIt(t *testing.T) {
	const (
		ownTools = "The client can use it now through urlflow's tools, without ever seeing"
		never    = "never given"
		receive  = "allowed to receive"
	)
	for _, tc := range []struct {
		name      string
		done      templates.Done
		says, not []string
	}{
		{"urlflow's own tools, a secret", templates.Done{SlotLabel: "Demo API key", ClientName: "Claude Code"},
			[]string{"urlflow checked and stored your Demo API key.", ownTools + " it."}, []string{never, receive}},
		{"urlflow's own tools, an account", templates.Done{SlotLabel: "Acme account", ClientName: "Claude Code", Account: "octocat"},
			[]string{"connected your Acme account as octocat.", ownTools + " its tokens."}, []string{never, receive}},
		{"a service, a secret", templates.Done{SlotLabel: "Demo API key", ClientName: "Claude Code", ServiceLabel: "Weather MCP"},
			[]string{"stored your Demo API key for Weather MCP.", "Weather MCP can use it now through urlflow, which adds it to the service's requests: the service is never given it."},
			[]string{ownTools, receive}},
		{"a service, an account", templates.Done{SlotLabel: "Acme account", Account: "octocat", ServiceLabel: "Weather MCP"},
			[]string{"connected your Acme account as octocat for Weather MCP.", "Weather MCP can use it now through urlflow, which adds its tokens to the service's requests: the service is never given them."},
			[]string{ownTools, receive}},
		{"a service with release, a secret", templates.Done{SlotLabel: "Demo API key", ServiceLabel: "Keyholder MCP", ServiceReceives: true},
			[]string{"stored your Demo API key for Keyholder MCP.", "Keyholder MCP can use it now, and is allowed to receive it itself: once it does, it holds it too."},
			[]string{ownTools, never, "without ever seeing"}},
		{"a service with release, an account", templates.Done{SlotLabel: "Acme account", Account: "octocat", ServiceLabel: "Keyholder MCP", ServiceReceives: true},
			[]string{"connected your Acme account as octocat for Keyholder MCP.", "Keyholder MCP can use it now, and is allowed to receive its access tokens itself: once it does, it holds them too."},
			[]string{ownTools, never, "without ever seeing"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := visibleText(t, render(t, templates.DonePage(templates.Page{}, tc.done)))
			if !strings.Contains(got, ". "+tc.says[1]) {
				t.Errorf("the done page does not say %q as a sentence of its own: %s", tc.says[1], got)
			}
			for _, want := range tc.says {
				if !strings.Contains(got, want) {
					t.Errorf("the done page does not say %q: %s", want, got)
				}
			}
			for _, not := range tc.not {
				if strings.Contains(got, not) {
					t.Errorf("the done page says %q: %s", not, got)
				}
			}
		})
	}
}

func TestDevSignInPostsNameNextAndCSRF(t *testing.T) {
	page := render(t, templates.DevSignInPage(templates.Page{Dev: true}, templates.DevSignIn{Next: "/e/x", CSRF: "tok", Name: "al ice", Error: "No spaces."}))
	fields := map[string]string{}
	for _, n := range elements(parse(t, page)) {
		if n.Data == "form" && mustAttr(n, "method") == "post" && mustAttr(n, "action") != "/auth/login" {
			t.Errorf("form to %q on the sign-in page", mustAttr(n, "action"))
		}
		if n.Data == "input" {
			fields[mustAttr(n, "name")] = mustAttr(n, "value")
		}
	}
	if fields["next"] != "/e/x" || fields["csrf"] != "tok" || fields["name"] != "al ice" {
		t.Errorf("sign-in fields %q", fields)
	}
	if got := visibleText(t, page); !strings.Contains(got, "No spaces.") || !strings.Contains(got, "development") {
		t.Errorf("sign-in page: %s", got)
	}
}

func TestLayoutShowsTheDevelopmentBannerOnlyInDevelopment(t *testing.T) {
	const banner = "Development server"
	for _, dev := range []bool{false, true} {
		got := visibleText(t, render(t, templates.SignedOutPage(templates.Page{Dev: dev}, templates.SignedOut{})))
		if strings.Contains(got, banner) != dev {
			t.Errorf("Dev=%v: banner shown=%v", dev, !dev)
		}
	}
}

func TestLayoutOffersSignOutOnlyWhenSignedIn(t *testing.T) {
	signedOut := render(t, templates.ProblemPage(templates.Page{}, templates.Problem{Status: 404}))
	if strings.Contains(signedOut, "/auth/logout") {
		t.Error("signed-out page has a sign-out form")
	}
	signedIn := render(t, templates.ProblemPage(templates.Page{SignedInAs: "alice", CSRF: "tok"}, templates.Problem{Status: 404}))
	found := false
	for _, n := range elements(parse(t, signedIn)) {
		if n.Data == "form" && mustAttr(n, "action") == "/auth/logout" && hasCSRF(n) {
			found = true
		}
	}
	if !found || !strings.Contains(visibleText(t, signedIn), "Signed in as alice") {
		t.Error("signed-in page has no sign-out form with the csrf token and the user's name")
	}
}

func TestTitleDefaultsAndOverrides(t *testing.T) {
	for _, tc := range []struct {
		page string
		want string
	}{
		{render(t, templates.SignedOutPage(templates.Page{}, templates.SignedOut{})), "You are signed out · urlflow"},
		{render(t, templates.SignedOutPage(templates.Page{Title: "Bye"}, templates.SignedOut{})), "Bye · urlflow"},
		{render(t, templates.ProblemPage(templates.Page{}, templates.Problem{Heading: "Not found"})), "Not found · urlflow"},
	} {
		if got := titleOf(elements(parse(t, tc.page))); got != tc.want {
			t.Errorf("title %q, want %q", got, tc.want)
		}
	}
}

func TestStaticHoldsTheStylesheetWithNothingFromTheNetwork(t *testing.T) {
	css, err := fs.ReadFile(templates.Static, "static/urlflow.css")
	if err != nil {
		t.Fatal(err)
	}
	if len(css) < 1000 {
		t.Errorf("urlflow.css is only %d bytes", len(css))
	}
	if m := regexp.MustCompile(`@import|url\(\s*["']?(https?:)?//`).Find(css); m != nil {
		t.Errorf("urlflow.css loads from the network: %q", m)
	}
	if _, err := fs.Stat(templates.Static, "static/favicon.svg"); err != nil {
		t.Errorf("the layout links /static/favicon.svg: %v", err)
	}
}

// The parameters of the API's address come before the secret, labelled, described, and
// kept after an error, which is announced on its own field, not the secret's.
func TestParameterFieldsComeBeforeTheSecretAndCarryTheirError(t *testing.T) {
	v := secretForm()
	v.Address = "https://{subdomain}.demo.example/api"
	v.Parameters = []templates.ParameterField{{Name: "subdomain", Label: "Demo subdomain", Hint: "Lower-case letters.", Value: "acme"}}
	v.Error, v.ErrorField = "That is not a valid Demo subdomain.", "subdomain"
	page := render(t, templates.SecretFormPage(templates.Page{}, v))
	var order []string
	var field *html.Node
	ids := map[string]bool{}
	for _, n := range elements(parse(t, page)) {
		if id, ok := attr(n, "id"); ok {
			ids[id] = true
		}
		if n.Data != "input" {
			continue
		}
		name, _ := attr(n, "name")
		order = append(order, name)
		if name == "param.subdomain" {
			field = n
		}
	}
	if field == nil || strings.Join(order, " ") != "csrf param.subdomain secret csrf" { // the last: Decline
		t.Fatalf("inputs %q, want the parameter before the secret", order)
	}
	if mustAttr(field, "value") != "acme" || mustAttr(field, "aria-invalid") != "true" || mustAttr(field, "type") != "text" {
		t.Errorf("the parameter's field: %v", field.Attr)
	}
	for id := range strings.FieldsSeq(mustAttr(field, "aria-describedby")) {
		if !ids[id] {
			t.Errorf("aria-describedby names %q, which is not on the page", id)
		}
	}
	if described := mustAttr(field, "aria-describedby"); described != "param-subdomain-error param-subdomain-help" {
		t.Errorf("aria-describedby=%q, want the error and the help", described)
	}
	secret := secretInput(t, page)
	if _, invalid := attr(secret, "aria-invalid"); invalid {
		t.Error("the secret's field is marked invalid for an error of the parameter")
	}
	text := visibleText(t, page)
	for _, want := range []string{"https://{subdomain}.demo.example/api", "Demo subdomain", "Lower-case letters.", "That is not a valid Demo subdomain."} {
		if !strings.Contains(text, want) {
			t.Errorf("the page does not show %q", want)
		}
	}
}

// TestOperatorPagesAnswerAtAGlance checks what the operators' pages say for people and for
// assistive technology: times to the second with how long ago, so that two events of one
// minute are told apart; flow links whose accessible name holds their visible text (axe's
// label-content-name-mismatch); scrolling tables that a keyboard can reach; a heading that
// starts with a capital.
func TestOperatorPagesAnswerAtAGlance(t *testing.T) {
	now := time.Now().UTC()
	first := now.Add(-2 * time.Minute).Truncate(time.Minute).Add(7 * time.Second)
	flowPage := render(t, templates.AdminFlowPage(templates.Page{}, templates.AdminFlow{ID: "KIO7XZSIA5X6PFKS", State: "complete",
		CreatedAt: first, UpdatedAt: first, ExpiresAt: now.Add(8 * time.Minute), History: []templates.AdminEntry{
			{At: first, Event: "created", Actor: "client"}, {At: first.Add(20 * time.Second), Event: "client_accept", Actor: "client"}}}))
	text := visibleText(t, flowPage)
	for _, want := range []string{first.Format("15:04:05 UTC"), first.Add(20 * time.Second).Format("15:04:05 UTC"), "ago)", "(in 7m"} {
		if !strings.Contains(text, want) {
			t.Errorf("the flow page does not say %q:\n%s", want, text)
		}
	}
	if !strings.Contains(flowPage, `title="`+first.Format(time.RFC3339Nano)+`"`) {
		t.Error("a time of the flow page does not carry its full timestamp")
	}
	list := render(t, templates.AdminPage(templates.Page{}, templates.Admin{Rows: []templates.AdminRow{{ID: "KIO7XZSIA5X6PFKSXKPXIK7OX44RAPSV",
		State: "pending", CreatedAt: now, UpdatedAt: now}}}))
	for _, m := range regexp.MustCompile(`<a class="flow-id"[^>]*aria-label="([^"]*)"[^>]*>([^<]*)</a>`).FindAllStringSubmatch(list, -1) {
		if !strings.Contains(m[1], m[2]) {
			t.Errorf("a flow link is named %q, which does not hold its visible text %q", m[1], m[2])
		}
	}
	for name, html := range map[string]string{"list": list, "flow": flowPage} {
		for _, box := range regexp.MustCompile(`<div class="table-scroll"[^>]*>`).FindAllString(html, -1) {
			if !strings.Contains(box, `tabindex="0"`) || !strings.Contains(box, `aria-label="`) {
				t.Errorf("the %s page has a scrolling table a keyboard cannot reach: %s", name, box)
			}
		}
	}
	confirm := visibleText(t, render(t, templates.AdminConfirmPage(templates.Page{}, templates.AdminConfirm{ID: "X", Action: "cancel", Question: "Cancel this flow?", Yes: "Yes, cancel this flow"})))
	if !strings.Contains(confirm, "Cancel this flow?") {
		t.Errorf("the confirmation's heading: %s", confirm)
	}
}

func TestTheLapseStylesheetTakesOnlyTwoDelaysInOrder(t *testing.T) {
	for query, want := range map[string]int{
		"soon=0&end=2":              http.StatusOK,
		"soon=480&end=600":          http.StatusOK,
		"soon=600&end=480":          http.StatusBadRequest,
		"soon=-1&end=5":             http.StatusBadRequest,
		"soon=1&end=604801":         http.StatusBadRequest,
		"soon=1":                    http.StatusBadRequest,
		"soon=1s&end=5":             http.StatusBadRequest,
		"soon=1&end=5;}body{x:y":    http.StatusBadRequest,
		"soon=1&end=5%0a.x{color:x": http.StatusBadRequest,
	} {
		rec := httptest.NewRecorder()
		templates.ServeLapseStylesheet(rec, httptest.NewRequest(http.MethodGet, templates.LapseStylesheetPath+"?"+query, nil))
		if rec.Code != want {
			t.Errorf("%s: %d, want %d", query, rec.Code, want)
		}
	}
	rec := httptest.NewRecorder()
	templates.ServeLapseStylesheet(rec, httptest.NewRequest(http.MethodGet, templates.LapseStylesheetPath+"?soon=480&end=600", nil))
	if body := rec.Body.String(); !strings.Contains(body, ".lapse-soon { animation: lapse-reveal 120s 480s; }") ||
		!strings.Contains(body, ".lapse-over { animation: lapse-reveal 0s 600s forwards; }") || rec.Header().Get("Content-Type") != "text/css; charset=utf-8" {
		t.Errorf("soon=480&end=600 answered %q (%s)", body, rec.Header().Get("Content-Type"))
	}
}

func TestAPageWithADeadlineLinksItsLapseStylesheet(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		left time.Duration
		want string
	}{
		{10 * time.Minute, "/lapse.css?soon=479&end=600"},
		{90 * time.Second, "/lapse.css?soon=0&end=90"},
		{-time.Second, ""},
	} {
		page := render(t, templates.SecretFormPage(templates.Page{}, templates.SecretForm{ExpiresAt: now.Add(tc.left), Action: "/e/x/secret"}))
		got := ""
		if m := regexp.MustCompile(`<link rel="stylesheet" href="(/lapse\.css[^"]*)"`).FindStringSubmatch(page); m != nil {
			got = html.UnescapeString(m[1])
		}
		// Rendered a moment after now: a whole second less before the warning, the deadline
		// rounded up.
		if got != tc.want {
			t.Errorf("%s left: links %q, want %q", tc.left, got, tc.want)
		}
		if hasNotices := strings.Contains(page, "lapse-soon"); hasNotices != (tc.want != "") {
			t.Errorf("%s left: the page has the lapse notices: %v", tc.left, hasNotices)
		}
	}
}
