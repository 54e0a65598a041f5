package browsertest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// axeSource is axe-core, from the end-to-end tests' npm workspace (e2e/axe), relative to
// the repository root: the test command installs it (npm ci --prefix e2e) before the tests
// run.
const axeSource = "e2e/node_modules/axe-core/axe.min.js"

// AxeViolation is what axe-core says of one rule a page breaks: the rule, its impact, and
// the elements (their selectors) that break it.
type AxeViolation struct {
	ID     string   `json:"id"`
	Impact string   `json:"impact"`
	Help   string   `json:"help"`
	Nodes  []string `json:"nodes"`
}

func (v AxeViolation) String() string {
	return fmt.Sprintf("%s (%s): %s: %s", v.ID, v.Impact, v.Help, strings.Join(v.Nodes, ", "))
}

// axeRun runs axe-core over the page with the rules of WCAG 2.0, 2.1 and 2.2 at levels A
// and AA, and best practice, and returns what it found.
const axeRun = `axe.run(document, {runOnly: {type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22a", "wcag22aa", "best-practice"]}, resultTypes: ["violations"]})
	.then(r => r.violations.map(v => ({id: v.id, impact: v.impact || "", help: v.help, nodes: v.nodes.map(n => n.target.join(" "))})))`

// Axe runs axe-core over the page in u's tab and returns the violations of WCAG 2.2 AA and
// best practice that it finds. The page's CSP does not apply to what the DevTools protocol
// evaluates, so pages need no change to be checked. It fails the test when axe-core is not
// installed.
func (u *User) Axe(t testing.TB) []AxeViolation {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	source, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(axeSource)))
	if err != nil {
		t.Fatalf("axe-core is not installed (%v): run npm ci --prefix e2e --ignore-scripts, as the test command does", err)
	}
	if !Evaluate[bool](t, u, `typeof axe === "object"`) {
		Evaluate[bool](t, u, string(source)+";true")
	}
	return Await[[]AxeViolation](t, u, axeRun)
}
