// Package deploy holds the tests of what deploy/ ships for running urlflow: the systemd
// unit and its environment file. (The Prometheus rules and the dashboard are checked by
// the web tests and scripts/test.)
package deploy

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
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

// TestTheEnvironmentFileNamesOnlySettings: every variable of deploy/systemd/urlflow.env,
// set or commented out, is a setting of docs/configuration.md.
func TestTheEnvironmentFileNamesOnlySettings(t *testing.T) {
	reference, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open("systemd/urlflow.env")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var names int
	for s := bufio.NewScanner(f); s.Scan(); {
		line := strings.TrimPrefix(strings.TrimSpace(s.Text()), "# ")
		name, _, ok := strings.Cut(line, "=")
		if !ok || !strings.HasPrefix(name, "URLFLOW_") || strings.ContainsAny(name, " `") {
			continue
		}
		names++
		if !strings.Contains(string(reference), "`"+name+"`") {
			t.Errorf("urlflow.env sets %s, which docs/configuration.md does not name", name)
		}
	}
	if names < 5 {
		t.Fatalf("urlflow.env names %d settings; the test would prove nothing", names)
	}
}
