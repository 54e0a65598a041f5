package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// The alert rules (deploy/prometheus/alerts.yml) and the Grafana dashboard
// (deploy/grafana/urlflow.json) are checked by promtool, and every metric they name is one
// that urlflow serves (TestServeSignsInRealUsersAndRefusesTheWrongOne scrapes them).

const (
	alertsFile    = "../deploy/prometheus/alerts.yml"
	dashboardFile = "../deploy/grafana/urlflow.json"
)

// promtool checks rules file path, and fails the test with its output if they are wrong.
func promtool(t *testing.T, path string) {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is not installed: apt-get install prometheus (the test command does)")
	}
	if out, err := exec.Command(bin, "check", "rules", path).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules %s: %v\n%s", path, err, out)
	}
}

// dashboardExprs returns the PromQL expression of every target of the dashboard.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var exprs []string
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, target := range p.Targets {
			exprs = append(exprs, target.Expr)
		}
	}
	return exprs
}

func TestAlertRulesAndTheDashboardPassPromtool(t *testing.T) {
	t.Parallel()
	promtool(t, alertsFile)

	// Each query of the dashboard becomes a recording rule, which promtool parses.
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, expr := range dashboardExprs(t) {
		quoted, _ := json.Marshal(expr) // a JSON string is a YAML string
		rules.WriteString("      - record: dashboard:query_" + string(rune('a'+i)) + "\n        expr: " + string(quoted) + "\n")
	}
	path := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(path, []byte(rules.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	promtool(t, path)
}

// referencedMetrics returns the urlflow metrics that the alert rules and the dashboard name.
func referencedMetrics(t *testing.T) []string {
	t.Helper()
	alerts, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	text := string(alerts) + strings.Join(dashboardExprs(t), "\n")
	names := regexp.MustCompile(`\burlflow_[a-z_]+`).FindAllString(text, -1)
	slices.Sort(names)
	return slices.Compact(names)
}

// requireServedMetrics fails the test unless /metrics, as scrape reads it, comes to serve a
// series of every metric the rules and the dashboard name. It scrapes again for a few
// seconds: a delivery is measured just after the client has its notification.
func requireServedMetrics(t *testing.T, scrape func() string) {
	t.Helper()
	var missing []string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		page := scrape()
		missing = missing[:0]
		for _, name := range referencedMetrics(t) {
			if !regexp.MustCompile(`(?m)^` + name + `[{ ]`).MatchString(page) {
				missing = append(missing, name)
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
	}
	for _, name := range missing {
		t.Errorf("the rules or the dashboard name %s, which /metrics does not serve", name)
	}
}
