// Package deploy holds the tests of what deploy/ ships for running urlflow: the systemd
// unit and its environment file, and the settings every file of deploy/ names. (The
// Prometheus rules and the dashboard are checked by the web tests and scripts/test; the
// Helm chart and the compose file by the module deploy/check.)
package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestTheSystemdUnitVerifies runs systemd-analyze verify on deploy/systemd/urlflow.service
// with a real urlflow binary where the unit expects it (and its environment file beside),
// the only two changes, and asks urlflow to accept the command line the unit runs.
func TestTheSystemdUnitVerifies(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatal("systemd-analyze is needed (Debian's systemd package)")
	}
	dir := t.TempDir()
	binary := filepath.Join(dir, "urlflow")
	if out, err := exec.Command("go", "build", "-o", binary, "../cmd/urlflow").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	unit, err := os.ReadFile("systemd/urlflow.service")
	if err != nil {
		t.Fatal(err)
	}
	text := string(unit)
	for _, want := range []string{"ExecStart=/usr/local/bin/urlflow serve\n", "EnvironmentFile=/etc/urlflow/urlflow.env\n"} {
		if !strings.Contains(text, want) {
			t.Fatalf("the unit has no line %q", strings.TrimSpace(want))
		}
	}
	text = strings.NewReplacer("/usr/local/bin/urlflow", binary, "/etc/urlflow/urlflow.env", filepath.Join(dir, "urlflow.env")).Replace(text)
	env, err := os.ReadFile("systemd/urlflow.env")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "urlflow.service"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "urlflow.env"), env, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(analyze, "verify", filepath.Join(dir, "urlflow.service")).CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	if out, err := exec.Command(binary, "serve", "--help").CombinedOutput(); err != nil {
		t.Errorf("urlflow serve --help: %v\n%s", err, out)
	}
}

// TestWhatDeployShipsNamesOnlySettings: every URLFLOW_ variable that a file of deploy/
// sets or mentions (the systemd environment file, the compose quickstart, the Helm chart's
// templates and values) is a setting of docs/configuration.md, so that a renamed or
// misspelled one fails here rather than being ignored by urlflow in someone's deployment.
func TestWhatDeployShipsNamesOnlySettings(t *testing.T) {
	reference, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("helm/urlflow/templates/*")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "systemd/urlflow.env", "compose/compose.yaml", "helm/urlflow/values.yaml")
	var names int
	for _, file := range files {
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range settingName.FindAllString(string(text), -1) {
			names++
			if !strings.Contains(string(reference), "`"+name+"`") {
				t.Errorf("%s names %s, which docs/configuration.md does not", file, name)
			}
		}
	}
	if names < 20 {
		t.Fatalf("deploy/ names %d settings; the test would prove nothing", names)
	}
}

// settingName matches the name of a setting of urlflow's environment.
var settingName = regexp.MustCompile(`\bURLFLOW_[A-Z0-9_]*[A-Z0-9]\b`)
