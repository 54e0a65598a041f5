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
// (deploy/grafana/urlflow.json) are checked by promtool, the alert rules pass promtool's
// unit tests beside them (deploy/prometheus/*_test.yml), and every metric they name is one
// that urlflow serves (TestServeSignsInRealUsersAndRefusesTheWrongOne scrapes them).

const (
	alertsFile    = "../deploy/prometheus/alerts.yml"
	dashboardFile = "../deploy/grafana/urlflow.json"
)

// promtool runs promtool with args ("check rules" or "test rules" and a file), and fails
// the test with its output if promtool fails.
func promtool(t *testing.T, args ...string) {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is not installed: apt-get install prometheus (the test command does)")
	}
	if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
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
	promtool(t, "check", "rules", alertsFile)

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
	promtool(t, "check", "rules", path)
}

// TestAlertRulesPassTheirUnitTests runs promtool's unit tests of the alert rules, every
// *_test.yml beside alerts.yml: each alert fires when it should, and stays quiet when it
// should, also when a series it names does not exist yet.
func TestAlertRulesPassTheirUnitTests(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join(filepath.Dir(alertsFile), "*_test.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no unit tests of the alert rules (*_test.yml) beside %s", alertsFile)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			promtool(t, "test", "rules", file)
		})
	}
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
// servedOnlyAfterAnEvent are the counters that the rules name but /metrics serves only
// once what they count happened (their alerts say so): no run of the tests above makes it
// happen. The webhook package's tests count them.
var servedOnlyAfterAnEvent = map[string]bool{"urlflow_webhook_given_up_total": true}

func requireServedMetrics(t *testing.T, scrape func() string) {
	t.Helper()
	var missing []string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		page := scrape()
		missing = missing[:0]
		for _, name := range referencedMetrics(t) {
			if servedOnlyAfterAnEvent[name] {
				continue
			}
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
