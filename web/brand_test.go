package web

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urlflow/urlflow/internal/brand"
)

func TestTheDeploymentsBrandDressesTheUsersPagesAndNotTheOperators(t *testing.T) {
	t.Parallel()
	var c brand.Config
	c.ProductName, c.Logo = "Acme Keys", filepath.Join(t.TempDir(), "acme.svg")
	c.Colors.Accent = "#0b6e4f"
	c.Support.URL, c.Support.Label = "mailto:help@acme.example", "Write to the help desk"
	if err := os.WriteFile(c.Logo, []byte(`<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>`), 0o600); err != nil {
		t.Fatal(err)
	}
	b, problems := brand.Load(c, os.ReadFile)
	if problems != nil {
		t.Fatal(problems)
	}
	f := newFixture(t, fixtureOptions{brand: b})
	e := f.newFlow(t, "alice")
	alice := f.browser(t, "alice")
	alice.signIn("/e/" + e.ID)
	page := alice.get("/e/" + e.ID)
	page.want(t, http.StatusOK, "Acme Keys", "asked Acme Keys to collect a secret", "Need help? Write to the help desk")
	if strings.Contains(strings.ReplaceAll(page.Text(), "A key for urlflow's demo API", ""), "urlflow") { // the slot's own words aside
		t.Errorf("the consent page still says urlflow: %s", page.Text())
	}
	for _, want := range []string{`<title>Provide your Demo API key? · Acme Keys</title>`, `href="` + b.StylesheetURL() + `"`,
		`src="` + b.LogoURL() + `"`, `href="mailto:help@acme.example"`} {
		if !strings.Contains(page.Body, want) {
			t.Errorf("the consent page lacks %s", want)
		}
	}

	theme := alice.get(b.StylesheetURL())
	if theme.Status != http.StatusOK || !strings.Contains(theme.Body, "--accent: #0b6e4f;") || !strings.HasPrefix(theme.Header.Get("Content-Type"), "text/css") {
		t.Errorf("the theme answered %d %s: %s", theme.Status, theme.Header.Get("Content-Type"), theme.Body)
	}
	logo := alice.get(b.LogoURL())
	if logo.Status != http.StatusOK || logo.Header.Get("Content-Type") != "image/svg+xml" ||
		!strings.Contains(logo.Header.Get("Content-Security-Policy"), "default-src 'none'") {
		t.Errorf("the logo answered %d %s, CSP %q", logo.Status, logo.Header.Get("Content-Type"), logo.Header.Get("Content-Security-Policy"))
	}

	op := f.browser(t, "operator")
	op.signIn("/admin")
	admin := op.get("/admin")
	admin.want(t, http.StatusOK, "urlflow operators")
	if !strings.Contains(admin.Body, "· Acme Keys</title>") {
		t.Errorf("the operators' page is not titled for the deployment")
	}
}

func TestWithoutABrandThePagesAreUrlflowsAndItsPathsAreNotFound(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	alice := f.browser(t, "alice")
	alice.get("/").want(t, http.StatusOK, "urlflow")
	for _, path := range []string{brand.LogoPath, brand.StylesheetPath} {
		if got := alice.get(path); got.Status != http.StatusNotFound {
			t.Errorf("%s answered %d without a brand", path, got.Status)
		}
	}
}
