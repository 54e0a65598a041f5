package settings

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var ourHooks = []Hook{
	{Event: "Elicitation", Command: "/usr/local/bin/urlflow hook elicitation --allow-origin https://auth.example.com"},
	{Event: "ElicitationResult", Command: "/usr/local/bin/urlflow hook elicitation-result --allow-origin https://auth.example.com"},
}

// existing is a settings file with other settings and other hooks, including an
// Elicitation hook of someone else's, in an order Install must keep.
const existing = `{
  "model": "opus",
  "permissions": {"allow": ["Bash(go test:*)"], "deny": []},
  "hooks": {
    "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "audit-bash"}]}],
    "Elicitation": [{"matcher": "github", "hooks": [{"type": "command", "command": "notify-me"}]}]
  },
  "env": {"FOO": "1"}
}
`

func read(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// semantic decodes a settings file for comparison, whatever its layout.
func semantic(t *testing.T, data string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(data), &v); err != nil {
		t.Fatalf("%v:\n%s", err, data)
	}
	return v
}

func TestInstallKeepsEverythingElseAndTwiceIsOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "settings.json")
	if err := os.WriteFile(path, []byte(existing), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := Install(path, "", ourHooks); err != nil {
		t.Fatal(err)
	}
	once := read(t, path)
	if err := Install(path, "", ourHooks); err != nil {
		t.Fatal(err)
	}
	if twice := read(t, path); twice != once {
		t.Fatalf("installing twice changed the file:\n%s\nthen\n%s", once, twice)
	}
	got := semantic(t, once).(map[string]any)
	want := semantic(t, existing).(map[string]any)
	hooks := want["hooks"].(map[string]any)
	hooks["Elicitation"] = append(hooks["Elicitation"].([]any), semantic(t,
		`{"hooks":[{"type":"command","command":"/usr/local/bin/urlflow hook elicitation --allow-origin https://auth.example.com"}]}`))
	hooks["ElicitationResult"] = []any{semantic(t,
		`{"hooks":[{"type":"command","command":"/usr/local/bin/urlflow hook elicitation-result --allow-origin https://auth.example.com"}]}`)}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("after install:\n%s", once)
	}
	// The keys keep their order: model, permissions, hooks, env.
	if i, j, k := strings.Index(once, `"permissions"`), strings.Index(once, `"hooks"`), strings.Index(once, `"env"`); !(i < j && j < k) {
		t.Fatalf("the keys moved:\n%s", once)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o640 {
		t.Fatalf("the file's mode is now %v", st.Mode().Perm())
	}

	// A new server URL replaces the hooks instead of adding a second pair.
	moved := []Hook{{Event: "Elicitation", Command: "'/opt/url flow/urlflow' hook elicitation --allow-origin https://new.example.com"}}
	if err := Install(path, "urlflow|github", moved); err != nil {
		t.Fatal(err)
	}
	again := read(t, path)
	if strings.Count(again, "hook elicitation") != 1 || !strings.Contains(again, `"matcher": "urlflow|github"`) || strings.Contains(again, "ElicitationResult") {
		t.Fatalf("after installing other hooks:\n%s", again)
	}

	if err := Uninstall(path); err != nil {
		t.Fatal(err)
	}
	if got, want := semantic(t, read(t, path)), semantic(t, existing); !reflect.DeepEqual(got, want) {
		t.Fatalf("after uninstall the file is not as it was:\n%s", read(t, path))
	}
	if err := Uninstall(path); err != nil {
		t.Fatal(err)
	}
}

func TestInstallIntoNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".claude", "settings.json")
	if err := Install(path, "", ourHooks); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("a new settings file: %v %v", st, err)
	}
	missing := filepath.Join(t.TempDir(), "missing.json")
	if err := Uninstall(missing); err != nil {
		t.Fatalf("uninstall from a missing file: %v", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("uninstall from a missing file made one: %v", err)
	}
}

func TestInstallRefusesAFileThatIsNotAnObject(t *testing.T) {
	for _, content := range []string{`[1]`, `{"hooks": [1]}`, `{"hooks": {"Elicitation": {}}}`, `{"a": 1} {"b": 2}`, `{"a": `} {
		path := filepath.Join(t.TempDir(), "settings.json")
		os.WriteFile(path, []byte(content), 0o600)
		if err := Install(path, "", ourHooks); err == nil {
			t.Errorf("Install into %s succeeded", content)
		}
		if got := read(t, path); got != content {
			t.Errorf("a refused install changed %s into %s", content, got)
		}
	}
}

func TestOurs(t *testing.T) {
	for cmd, want := range map[string]bool{
		"/usr/local/bin/urlflow hook elicitation":                    true,
		"'/opt/url flow/urlflow' hook elicitation-result --policy x": true,
		`"C:\\urlflow.exe" hook elicitation`:                         true,
		"urlflow hook serve":                                         false,
		"notify-me hook":                                             false,
		"echo hook elicitation-results":                              false,
	} {
		if Ours(cmd) != want {
			t.Errorf("Ours(%q) = %v", cmd, !want)
		}
	}
	if got := shellWords(Quote("/opt/it's here/urlflow")); len(got) != 1 || got[0] != "/opt/it's here/urlflow" {
		t.Errorf("Quote does not round-trip: %q", got)
	}
}
