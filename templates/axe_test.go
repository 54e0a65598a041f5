package templates_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urlflow/urlflow/internal/browsertest"
)

// axeSource is axe-core, from the end-to-end tests' npm workspace (e2e/axe): the test
// command installs it (npm ci --prefix e2e) before the tests run.
const axeSource = "../e2e/node_modules/axe-core/axe.min.js"

// axeViolation is what axe-core says of one rule a page breaks: the rule, its impact, and
// the elements (their selectors) that break it.
type axeViolation struct {
	ID     string   `json:"id"`
	Impact string   `json:"impact"`
	Help   string   `json:"help"`
	Nodes  []string `json:"nodes"`
}

// axeRun runs axe-core over the page in u with the rules of WCAG 2.0, 2.1 and 2.2 at levels
// A and AA, and best practice, and returns what it found. The page's CSP does not apply to
// what the DevTools protocol evaluates, so the pages need no change to be checked.
const axeRun = `axe.run(document, {runOnly: {type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22a", "wcag22aa", "best-practice"]}, resultTypes: ["violations"]})
	.then(r => r.violations.map(v => ({id: v.id, impact: v.impact || "", help: v.help, nodes: v.nodes.map(n => n.target.join(" "))})))`

// TestEveryPageHasNoAxeViolations runs axe-core in Chromium over every page of the gallery
// (every page state urlflow renders) in the light and the dark colour scheme on a desktop,
// and on a phone at 390 px, and fails on any violation of WCAG 2.2 AA or best practice.
func TestEveryPageHasNoAxeViolations(t *testing.T) {
	source, err := os.ReadFile(filepath.FromSlash(axeSource))
	if err != nil {
		t.Fatalf("axe-core is not installed (%v): run npm ci --prefix e2e --ignore-scripts, as the test command does", err)
	}
	srv := gallery(t)
	u := browsertest.Start(t).NewUser(t, "axe")
	for _, view := range []struct {
		name  string
		setUp func()
	}{
		{"light", func() { u.SetColorScheme(t, "light") }},
		{"dark", func() { u.SetColorScheme(t, "dark") }},
		{"phone", func() { u.SetColorScheme(t, "light"); u.AsPhone(t) }},
	} {
		view.setUp()
		for _, s := range samples() {
			t.Run(view.name+"/"+s.name, func(t *testing.T) {
				u.Navigate(t, srv.URL+"/gallery/"+s.name)
				browsertest.Evaluate[bool](t, u, string(source)+";true")
				for _, v := range browsertest.Await[[]axeViolation](t, u, axeRun) {
					t.Errorf("%s (%s): %s: %s", v.ID, v.Impact, v.Help, strings.Join(v.Nodes, ", "))
				}
			})
		}
	}
}
