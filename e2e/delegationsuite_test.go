package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/urlflow/urlflow/internal/redistest"
)

// The delegation conformance suite (clients/conformance): the cases of cases.json, run by
// each client package's runner against a urlflow dev of its own, the user's steps done in
// Chromium, and every outcome compared here with the case's expectation, so that one
// matcher judges every package and a behaviour cannot drift in one language.

// suiteCase is one case of cases.json.
type suiteCase struct {
	Name  string           `json:"name"`
	Steps []map[string]any `json:"steps"`
}

// suiteResource is the resource the suite's users' tokens are for.
const suiteResource = "http://127.0.0.1:9/mcp"

func TestEveryClientPackagePassesTheDelegationSuite(t *testing.T) {
	t.Parallel()
	requireTypeScriptBuild(t)
	cases := readSuite(t)
	for _, r := range []struct {
		name string
		argv []string
	}{
		{"Go", []string{goRunnerBinary, "../clients/conformance/cases.json"}},
		{"TypeScript", []string{"node", "../clients/conformance/typescript.mjs", "../clients/conformance/cases.json"}},
		{"Python", []string{"python3", "../clients/conformance/python.py", "../clients/conformance/cases.json"}},
	} {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			runSuite(t, cases, r.argv)
		})
	}
}

func readSuite(t *testing.T) []suiteCase {
	t.Helper()
	raw, err := os.ReadFile("../clients/conformance/cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Cases []suiteCase `json:"cases"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("cases.json: %v", err)
	}
	if len(s.Cases) == 0 {
		t.Fatal("cases.json has no cases")
	}
	return s.Cases
}

// runSuite runs the runner argv against a urlflow dev of its own and checks each outcome
// it reports, in order, against cases.
func runSuite(t *testing.T, cases []suiteCase, argv []string) {
	s := startServer(t, serverConfig{Redis: redistest.Start(t), Env: []string{"URLFLOW_DEV_DEMO_RESOURCE=" + suiteResource}})
	var key struct {
		Key string `json:"key"`
	}
	if status := s.getJSON("/dev/service-key?service=demo", "", &key); status != 200 {
		t.Fatalf("dev service key: %d", status)
	}
	tokens := map[string]string{}
	for _, c := range cases {
		for _, step := range c.Steps {
			if name, ok := step["user"].(string); ok && tokens[name] == "" {
				var tok struct {
					Token string `json:"token"`
				}
				if status := s.getJSON("/dev/token?user="+name+"&resource="+url.QueryEscape(suiteResource), "", &tok); status != 200 {
					t.Fatalf("dev token of %s: %d", name, status)
				}
				tokens[name] = tok.Token
			}
		}
	}

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "URLFLOW_URL=" + s.BaseURL, "URLFLOW_SERVICE_KEY=" + key.Key}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("the runner's standard error:\n%s", stderr.String())
		}
	})
	lines := readLines(stdout)
	hello, _ := json.Marshal(map[string]any{"tokens": tokens})
	fmt.Fprintf(stdin, "%s\n", hello)

	for i, c := range cases {
		saved := map[string]string{}
		for j, step := range c.Steps {
			line := nextLine(t, lines, c.Name, j)
			if line.Case != i || line.Step != j {
				t.Fatalf("the runner reported case %d step %d, want case %d (%q) step %d", line.Case, line.Step, i, c.Name, j)
			}
			if step["op"] == "user" {
				name, _ := step["user"].(string)
				if line.User == nil || !strings.HasPrefix(line.User.URL, s.BaseURL+"/e/") {
					t.Fatalf("case %q step %d: the runner did not hand over the user's link: %+v", c.Name, j, line)
				}
				newPerson(t, sharedBrowser(t), name).completeSecret(t, line.User.URL, demoKey())
				fmt.Fprintln(stdin, "{}")
				continue
			}
			var got any
			if err := json.Unmarshal(line.Outcome, &got); err != nil {
				t.Fatalf("case %q step %d: outcome %s: %v", c.Name, j, line.Outcome, err)
			}
			if err := matchOutcome(step["expect"], got, saved); err != nil {
				t.Errorf("case %q step %d (%s): %v\n  got %s", c.Name, j, step["op"], err, line.Outcome)
			}
			if name, _ := step["save"].(string); name != "" {
				saved[name] = savedOf(got)
			}
		}
	}
	end := nextLine(t, lines, "the end", 0)
	if !end.End || end.Cases != len(cases) {
		t.Fatalf("the runner did not end after %d cases: %+v", len(cases), end)
	}
}

// runnerLine is one line a runner writes.
type runnerLine struct {
	Case    int             `json:"case"`
	Step    int             `json:"step"`
	Outcome json.RawMessage `json:"outcome"`
	User    *struct {
		URL string `json:"url"`
	} `json:"user"`
	End   bool `json:"end"`
	Cases int  `json:"cases"`
}

// readLines sends the lines of r, then closes the channel.
func readLines(r io.Reader) <-chan string {
	out := make(chan string)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			out <- sc.Text()
		}
	}()
	return out
}

// nextLine reads the runner's next line, for step of the case named name.
func nextLine(t *testing.T, lines <-chan string, name string, step int) runnerLine {
	t.Helper()
	select {
	case raw, ok := <-lines:
		if !ok {
			t.Fatalf("case %q step %d: the runner ended without reporting it", name, step)
		}
		var line runnerLine
		if err := json.Unmarshal([]byte(raw), &line); err != nil {
			t.Fatalf("case %q step %d: the runner wrote %q: %v", name, step, raw, err)
		}
		return line
	case <-time.After(2 * time.Minute):
		t.Fatalf("case %q step %d: nothing from the runner in 2 minutes", name, step)
	}
	return runnerLine{}
}

// savedOf is what a step's save keeps of its outcome (clients/conformance/README.md): the
// elicitation's ID, the ID, or the position of the last event.
func savedOf(outcome any) string {
	m, _ := outcome.(map[string]any)
	if e, ok := m["elicitation"].(map[string]any); ok {
		if id, ok := e["id"].(string); ok {
			return id
		}
	}
	for _, k := range []string{"id", "last"} {
		if s, ok := m[k].(string); ok {
			return s
		}
	}
	return ""
}

// matchOutcome checks got against the expectation want (clients/conformance/README.md): an
// object's fields are a subset of got's, with the matchers "$string", "$absent", "$name"
// and "$not:name"; an outcome that is an error matches only an expected error.
func matchOutcome(want, got any, saved map[string]string) error {
	if w, ok := want.(map[string]any); ok {
		if g, ok := got.(map[string]any); ok && g["error"] != nil && w["error"] == nil {
			return fmt.Errorf("an error, where the case expects none")
		}
	}
	return match(want, got, saved, "")
}

func match(want, got any, saved map[string]string, path string) error {
	switch w := want.(type) {
	case string:
		return matchString(w, got, saved, path)
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: want an object, got %v", cmpPath(path), got)
		}
		for k, wv := range w {
			if wv == "$absent" {
				if g[k] != nil {
					return fmt.Errorf("%s: want it absent, got %v", cmpPath(path+"."+k), g[k])
				}
				continue
			}
			if err := match(wv, g[k], saved, path+"."+k); err != nil {
				return err
			}
		}
		return nil
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return fmt.Errorf("%s: want %d items, got %v", cmpPath(path), len(w), got)
		}
		for i := range w {
			if err := match(w[i], g[i], saved, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		return nil
	}
	if !reflect.DeepEqual(want, got) {
		return fmt.Errorf("%s: want %v, got %v", cmpPath(path), want, got)
	}
	return nil
}

// matchString checks got against a string of an expectation: a matcher, or the string.
func matchString(w string, got any, saved map[string]string, path string) error {
	g, isString := got.(string)
	switch name, matcher := strings.CutPrefix(w, "$"); {
	case w == "$string":
		if !isString || g == "" {
			return fmt.Errorf("%s: want a string, got %v", cmpPath(path), got)
		}
	case strings.HasPrefix(w, "$not:"):
		if s := saved[strings.TrimPrefix(w, "$not:")]; !isString || g == "" || g == s {
			return fmt.Errorf("%s: want a string other than %q, got %v", cmpPath(path), s, got)
		}
	case matcher:
		s, ok := saved[name]
		if !ok {
			return fmt.Errorf("%s: %s was not saved by an earlier step", cmpPath(path), w)
		}
		if g != s {
			return fmt.Errorf("%s: want %q (%s), got %v", cmpPath(path), s, w, got)
		}
	default:
		if g != w {
			return fmt.Errorf("%s: want %q, got %v", cmpPath(path), w, got)
		}
	}
	return nil
}

func cmpPath(path string) string {
	if path == "" {
		return "the outcome"
	}
	return strings.TrimPrefix(path, ".")
}
