package settings

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
)

// oddHooks are urlflow's hooks for a binary whose path holds what an HTML-escaping encoder
// would rewrite.
var oddHooks = []Hook{
	{Event: "Elicitation", Command: Quote("/opt/R&D <tools>/urlflow") + " hook elicitation --allow-origin https://auth.example.com"},
	{Event: "ElicitationResult", Command: Quote("/opt/R&D <tools>/urlflow") + " hook elicitation-result --allow-origin https://auth.example.com"},
}

// crlf turns a file's line ends into CR LF.
func crlf(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }

// originals are settings files as people write them. Each must come back byte for byte
// after install and uninstall.
var originals = []struct {
	name, content string
}{
	{"two spaces, no hooks", "{\n  \"model\": \"opus\",\n  \"env\": {\"FOO\": \"1\"}\n}\n"},
	{"other hooks with <, > and &", `{
  "hooks": {
    "PostToolUse": [
      {
        "matcher": "Write|Edit",
        "hooks": [
          {
            "type": "command",
            "command": "jq -r '.tool_input.file_path' >> ~/.claude/edits.log && exit 0"
          }
        ]
      }
    ],
    "Elicitation": [
      {
        "matcher": "github",
        "hooks": [{"type": "command", "command": "notify-me '<b>form</b>' 2>&1"}]
      }
    ]
  }
}
`},
	{"unicode, escaped and not", "{\n  \"statusLine\": {\"type\": \"command\", \"command\": \"echo ✓ café 日本\"},\n  \"note\": \"caf\\u00e9 \\u2713 \\ud83d\\ude00\"\n}\n"},
	{"empty objects and arrays elsewhere", "{\n  \"permissions\": {\"allow\": [], \"deny\": [ ]},\n  \"env\": {},\n  \"hooks\": {\"PreToolUse\": []}\n}\n"},
	{"an empty hooks object", "{\n  \"model\": \"opus\",\n  \"hooks\": {}\n}\n"},
	{"an empty hooks object on lines of its own", "{\n  \"hooks\": {\n  }\n}\n"},
	{"empty event lists", "{\n  \"hooks\": {\n    \"Elicitation\": [],\n    \"ElicitationResult\": [ ]\n  }\n}\n"},
	{"CRLF", crlf("{\n  \"model\": \"opus\",\n  \"hooks\": {\n    \"Stop\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"say done\"}]}]\n  }\n}\n")},
	{"tabs", "{\n\t\"model\": \"opus\",\n\t\"permissions\": {\n\t\t\"allow\": [\"Bash(go test:*)\"]\n\t}\n}\n"},
	{"four spaces", "{\n    \"model\": \"opus\",\n    \"hooks\": {\n        \"Elicitation\": [\n            {\n                \"hooks\": [\n                    {\n                        \"type\": \"command\",\n                        \"command\": \"log-it\"\n                    }\n                ]\n            }\n        ]\n    }\n}\n"},
	{"no final newline", "{\n  \"model\": \"opus\"\n}"},
	{"minified", `{"model":"opus","permissions":{"allow":[],"deny":["Read(.env)"]},"hooks":{"Stop":[{"hooks":[{"type":"command","command":"a && b > c"}]}]}}`},
	{"one line with spaces", `{"model": "opus", "hooks": {"Elicitation": [{"hooks": [{"type": "command", "command": "x"}]}]}}` + "\n"},
	{"an empty object", "{}"},
	{"an empty object and a newline", "{}\n"},
	{"an empty file", ""},
	{"whitespace only", "\r\n"},
	{"the README's example", existing},
}

// snapshot returns the files of dir and their contents.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		files[e.Name()] = read(t, filepath.Join(dir, e.Name()))
	}
	return files
}

// TestUninstallAfterInstallGivesTheFileBack: whatever the file's layout, install adds
// urlflow's entries and nothing else (every other byte stays where it was, and Claude Code
// reads the hooks), installing twice is once, and uninstall gives back the very bytes.
func TestUninstallAfterInstallGivesTheFileBack(t *testing.T) {
	for _, tc := range originals {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "settings.json")
			if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			before := snapshot(t, dir)
			if err := Install(path, "", oddHooks); err != nil {
				t.Fatal(err)
			}
			installed := read(t, path)
			checkOnlyOursAdded(t, tc.content, installed, oddHooks)
			once := snapshot(t, dir)
			if err := Install(path, "", oddHooks); err != nil {
				t.Fatal(err)
			}
			if twice := snapshot(t, dir); !reflect.DeepEqual(twice, once) {
				t.Errorf("installing twice is not installing once:\n%q\n%q", once, twice)
			}
			if err := Uninstall(path); err != nil {
				t.Fatal(err)
			}
			if after := snapshot(t, dir); !reflect.DeepEqual(after, before) {
				t.Errorf("after install and uninstall:\n%q\nwant\n%q", after, before)
			}
		})
	}
}

// checkOnlyOursAdded fails unless installed is original with one or two runs of bytes
// inserted, which together hold urlflow's commands and nothing of the user's, and unless
// Claude Code reads urlflow's entries last in their events' lists and the user's as before.
func checkOnlyOursAdded(t *testing.T, original, installed string, hooks []Hook) {
	t.Helper()
	if _, ok := insertions(original, installed); !ok {
		t.Fatalf("install changed more than it added:\n%s", installed)
	}
	// Each command is written as it is (not escaped), once more than before. Which bytes
	// were "inserted" is ambiguous where the file repeats itself (the space of a command
	// can stand for one of the original's), so the count is taken over the whole file.
	for _, h := range hooks {
		if got, before := strings.Count(installed, h.Command), strings.Count(original, h.Command); got != before+1 {
			t.Errorf("the file holds %q as written %d times, %d before install:\n%s", h.Command, got, before, installed)
		}
	}
	got := claudeCodeReads(t, installed)
	want := claudeCodeReads(t, original)
	for _, h := range hooks {
		groups := got[h.Event]
		if n := len(groups); n == 0 || !reflect.DeepEqual(groups[n-1], groupOf(h.Command)) {
			t.Errorf("Claude Code reads %s as %v", h.Event, groups)
			continue
		}
		got[h.Event] = groups[:len(groups)-1]
		if len(got[h.Event]) == 0 && want[h.Event] == nil {
			delete(got, h.Event)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Claude Code reads the other hooks as\n%v\nwant\n%v", got, want)
	}
}

// insertions returns the runs of bytes that, inserted into original, make installed: at
// most two, where install adds an entry to each of two events.
func insertions(original, installed string) ([]string, bool) {
	if run, ok := insertion(original, installed); ok {
		return []string{run}, true
	}
	p := commonPrefix(original, installed)
	for end := p + 1; end < len(installed); end++ {
		if run, ok := insertion(original[p:], installed[end:]); ok {
			return []string{installed[p:end], run}, true
		}
	}
	return nil, false
}

// insertion returns the one run of bytes that, inserted into original, makes installed.
func insertion(original, installed string) (string, bool) {
	k := len(installed) - len(original)
	if k <= 0 {
		return "", false
	}
	p := commonPrefix(original, installed)
	return installed[p : p+k], installed[p+k:] == original[p:]
}

func commonPrefix(a, b string) int {
	p := 0
	for p < len(a) && p < len(b) && a[p] == b[p] {
		p++
	}
	return p
}

type claudeGroup struct {
	Matcher string
	Hooks   []struct{ Type, Command string }
}

func groupOf(command string) claudeGroup {
	return claudeGroup{Hooks: []struct{ Type, Command string }{{"command", command}}}
}

// claudeCodeReads decodes the hooks of a settings file as Claude Code reads them, leaving
// out what is not a list of matcher groups; an empty or missing file has none.
func claudeCodeReads(t *testing.T, content string) map[string][]claudeGroup {
	t.Helper()
	var top map[string]json.RawMessage
	if strings.TrimSpace(content) != "" {
		if err := json.Unmarshal([]byte(content), &top); err != nil {
			t.Fatalf("Claude Code cannot read the file: %v\n%s", err, content)
		}
	}
	var events map[string]json.RawMessage
	json.Unmarshal(top["hooks"], &events)
	hooks := map[string][]claudeGroup{}
	for event, raw := range events {
		var elements []json.RawMessage
		if json.Unmarshal(raw, &elements) != nil {
			continue
		}
		groups := []claudeGroup{}
		for _, e := range elements {
			var g claudeGroup
			if json.Unmarshal(e, &g) == nil {
				groups = append(groups, g)
			}
		}
		hooks[event] = groups
	}
	return hooks
}

// holdsOurs reports whether a settings file holds one of urlflow's entries.
func holdsOurs(t *testing.T, content string) bool {
	for _, groups := range claudeCodeReads(t, content) {
		for _, g := range groups {
			if len(g.Hooks) == 1 && g.Hooks[0].Type == "command" && Ours(g.Hooks[0].Command) {
				return true
			}
		}
	}
	return false
}

// TestInstallWritesInTheFilesLayout: urlflow's entries follow the indentation, line ends,
// spacing and one-line style of the file they are added to.
func TestInstallWritesInTheFilesLayout(t *testing.T) {
	hooks := []Hook{{Event: "Elicitation", Command: "/bin/urlflow hook elicitation"}}
	for _, tc := range []struct{ name, original, want string }{
		{"two spaces", "{\n  \"model\": \"opus\"\n}\n", `{
  "model": "opus",
  "hooks": {
    "Elicitation": [
      {
        "hooks": [
          {
            "type": "command",
            "command": "/bin/urlflow hook elicitation"
          }
        ]
      }
    ]
  }
}
`},
		{"tabs and CRLF", crlf("{\n\t\"model\": \"opus\"\n}"), crlf(`{
	"model": "opus",
	"hooks": {
		"Elicitation": [
			{
				"hooks": [
					{
						"type": "command",
						"command": "/bin/urlflow hook elicitation"
					}
				]
			}
		]
	}
}`)},
		{"minified", `{"model":"opus"}`, `{"model":"opus","hooks":{"Elicitation":[{"hooks":[{"type":"command","command":"/bin/urlflow hook elicitation"}]}]}}`},
		{"groups on one line each", `{
  "hooks": {
    "Elicitation": [
      {"matcher": "github", "hooks": [{"type": "command", "command": "notify-me"}]}
    ]
  }
}
`, `{
  "hooks": {
    "Elicitation": [
      {"matcher": "github", "hooks": [{"type": "command", "command": "notify-me"}]},
      {"hooks": [{"type": "command", "command": "/bin/urlflow hook elicitation"}]}
    ]
  }
}
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "settings.json")
			os.WriteFile(path, []byte(tc.original), 0o600)
			if err := Install(path, "", hooks); err != nil {
				t.Fatal(err)
			}
			if got := read(t, path); got != tc.want {
				t.Errorf("after install:\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

// TestInstallAndUninstallKeepModeAndOwner: the file keeps its permissions and, where the
// test may give it another owner, its owner.
func TestInstallAndUninstallKeepModeAndOwner(t *testing.T) {
	for _, mode := range []fs.FileMode{0o600, 0o644} {
		dir := t.TempDir()
		path := filepath.Join(dir, "settings.json")
		os.WriteFile(path, []byte(existing), mode)
		os.Chmod(path, mode) // whatever the umask
		owner := os.Getuid() == 0
		if owner {
			if err := os.Chown(path, 4242, 4343); err != nil {
				t.Fatal(err)
			}
		}
		for _, step := range []func(string) error{
			func(p string) error { return Install(p, "", ourHooks) },
			Uninstall,
		} {
			if err := step(path); err != nil {
				t.Fatal(err)
			}
			st, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != mode {
				t.Errorf("mode %v became %v", mode, st.Mode().Perm())
			}
			if sys, ok := st.Sys().(*syscall.Stat_t); owner && ok && (sys.Uid != 4242 || sys.Gid != 4343) {
				t.Errorf("owner 4242:4343 became %d:%d", sys.Uid, sys.Gid)
			}
		}
	}
}

// TestUninstallRemovesTheFileInstallCreated: a settings file that install created is gone
// after uninstall, and nothing is left beside it.
func TestUninstallRemovesTheFileInstallCreated(t *testing.T) {
	dir := filepath.Join(t.TempDir(), ".claude")
	path := filepath.Join(dir, "settings.json")
	if err := Install(path, "", ourHooks); err != nil {
		t.Fatal(err)
	}
	checkOnlyOursAdded(t, "", read(t, path), ourHooks)
	if err := Uninstall(path); err != nil {
		t.Fatal(err)
	}
	if files := snapshot(t, dir); len(files) != 0 {
		t.Fatalf("install then uninstall left %q", files)
	}
}

// TestInstallKeepsANoteOnlyWhereTheFileCannotTell: a file with no hooks object, or with
// lists that are not empty, needs no note; an empty hooks object does, and uninstall
// deletes the note with the entries.
func TestInstallKeepsANoteOnlyWhereTheFileCannotTell(t *testing.T) {
	for content, wantNote := range map[string]bool{
		`{"model": "opus"}`: false,
		existing:            false,
		`{"hooks": {}}`:     true,
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, "settings.json")
		os.WriteFile(path, []byte(content), 0o600)
		if err := Install(path, "", ourHooks); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(path + ".urlflow"); (err == nil) != wantNote {
			t.Errorf("install into %s: a note is there: %v, want %v", content, err == nil, wantNote)
		}
		if err := Uninstall(path); err != nil {
			t.Fatal(err)
		}
		if files := snapshot(t, dir); len(files) != 1 || files["settings.json"] != content {
			t.Errorf("after install and uninstall of %s: %q", content, files)
		}
	}
}

// TestUninstallWithoutANoteRemovesWhatItEmpties: entries that came without a note (an
// older urlflow's, or copied by hand) go with the lists and hooks object they leave empty,
// and nothing else.
func TestUninstallWithoutANoteRemovesWhatItEmpties(t *testing.T) {
	path := filepath.Join(t.TempDir(), "settings.json")
	os.WriteFile(path, []byte(`{"hooks": {"Elicitation": [{"hooks": [{"type": "command", "command": "urlflow hook elicitation"}]}]}, "env": {}, "x": []}`), 0o600)
	if err := Uninstall(path); err != nil {
		t.Fatal(err)
	}
	if got, want := read(t, path), `{"env": {}, "x": []}`; got != want {
		t.Fatalf("after uninstall: %s, want %s", got, want)
	}
}

// TestInstallEditsTheFileALinkPointsTo: a settings file kept elsewhere (dotfiles) stays
// there, and the link stays a link.
func TestInstallEditsTheFileALinkPointsTo(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "dotfiles", "settings.json")
	link := filepath.Join(dir, ".claude", "settings.json")
	os.MkdirAll(filepath.Dir(target), 0o700)
	os.MkdirAll(filepath.Dir(link), 0o700)
	os.WriteFile(target, []byte(existing), 0o600)
	if err := os.Symlink(target, link); err != nil {
		t.Skip(err)
	}
	if err := Install(link, "", ourHooks); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&fs.ModeSymlink == 0 {
		t.Fatalf("the link is no longer a link: %v %v", st, err)
	}
	checkOnlyOursAdded(t, existing, read(t, target), ourHooks)
	if err := Uninstall(link); err != nil {
		t.Fatal(err)
	}
	if got := read(t, target); got != existing {
		t.Fatalf("after uninstall through the link:\n%s", got)
	}
}

// FuzzInstallUninstall: whatever the file holds, Install either refuses it and leaves it
// as it was, or adds urlflow's entries so that installing again changes nothing and
// Uninstall gives back what uninstalling the original gives: the original's very bytes
// when it held none of urlflow's entries.
func FuzzInstallUninstall(f *testing.F) {
	for _, tc := range originals {
		f.Add(tc.content)
	}
	f.Add(`{"hooks":{"Elicitation":[{"hooks":[{"type":"command","command":"x hook elicitation"}]}]}}`)
	f.Add(`{"hooks":{},"hooks":{"Stop":[]}}`)
	f.Fuzz(checkInstallUninstall)
}

// checkInstallUninstall checks FuzzInstallUninstall's promises for a file's content.
func checkInstallUninstall(t *testing.T, content string) {
	dir := t.TempDir()
	path := filepath.Join(dir, "settings.json")
	os.WriteFile(path, []byte(content), 0o600)
	uninstalled := filepath.Join(t.TempDir(), "settings.json")
	os.WriteFile(uninstalled, []byte(content), 0o600)
	if err := Install(path, "", oddHooks); err != nil {
		if got := read(t, path); got != content {
			t.Fatalf("a refused install changed the file")
		}
		return
	}
	if err := Uninstall(uninstalled); err != nil {
		t.Fatalf("uninstall refused what install took: %v", err)
	}
	want := read(t, uninstalled)
	if !holdsOurs(t, content) {
		if want != content {
			t.Fatalf("uninstall changed a file without urlflow's entries:\n%q\n%q", content, want)
		}
		checkOnlyOursAdded(t, content, read(t, path), oddHooks)
	}
	once := snapshot(t, dir)
	if err := Install(path, "", oddHooks); err != nil {
		t.Fatal(err)
	}
	if twice := snapshot(t, dir); !reflect.DeepEqual(twice, once) {
		t.Fatalf("installing twice is not installing once:\n%q\n%q", once, twice)
	}
	if got := claudeCodeReads(t, once["settings.json"]); len(got["Elicitation"]) == 0 || len(got["ElicitationResult"]) == 0 {
		t.Fatalf("Claude Code reads no hooks in\n%s", once["settings.json"])
	}
	if err := Uninstall(path); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) || !bytes.Equal(got, []byte(want)) {
		t.Fatalf("install then uninstall gives\n%q\nwant\n%q (%v)", got, want, err)
	}
	if files := snapshot(t, dir); len(files) != 1 {
		t.Fatalf("uninstall left %q", files)
	}
}
