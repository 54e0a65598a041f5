package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runHook runs `urlflow hook args...`.
func runHook(ctx context.Context, args []string, getenv env, stdin io.Reader, stdout, stderr io.Writer) error {
	return run(ctx, append([]string{"hook"}, args...), getenv, stdin, stdout, stderr)
}

// hookFixture is a policy file with its audit log in a directory of the test's own.
type hookFixture struct {
	policy, log string
	env         env
}

func newHookFixture(t *testing.T) hookFixture {
	t.Helper()
	dir := t.TempDir()
	f := hookFixture{policy: filepath.Join(dir, "hook.yaml"), log: filepath.Join(dir, "audit", "hook.jsonl"),
		env: envOf(map[string]string{"CLAUDE_CONFIG_DIR": filepath.Join(dir, "claude")})}
	policy := "allowed_origins: [https://tools.example.com]\naudit_log: " + f.log + "\n"
	if err := os.WriteFile(f.policy, []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// run runs `urlflow hook <cmd>` with input on stdin and returns its exit status and output.
func (f hookFixture) run(t *testing.T, cmd, input string, extra ...string) (status int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	args := append([]string{cmd, "--policy", f.policy, "--allow-origin", "http://127.0.0.1:8080"}, extra...)
	err := runHook(context.Background(), args, f.env, strings.NewReader(input), &out, &errOut)
	var st exitStatus
	switch {
	case err == nil:
	case errors.As(err, &st):
		status = int(st)
	default:
		t.Fatalf("urlflow hook %s: %v", cmd, err)
	}
	return status, out.String(), errOut.String()
}

// TestHookCommandsExitAsClaudeCodeExpects: the entry points Claude Code runs exit 0 with no
// output to let a request or an answer through, and 2 with the reason on stderr to refuse
// it; whatever they cannot read refuses too. Each run appends one audit line.
func TestHookCommandsExitAsClaudeCodeExpects(t *testing.T) {
	f := newHookFixture(t)
	for _, tt := range []struct {
		name, cmd, input string
		status           int
		stderr           string
	}{
		{"urlflow's URL", "elicitation", `{"hook_event_name":"Elicitation","mcp_server_name":"urlflow","mode":"url","url":"http://127.0.0.1:8080/e/x","elicitation_id":"e1"}`, 0, ""},
		{"the policy's origin", "elicitation", `{"hook_event_name":"Elicitation","mcp_server_name":"tools","mode":"url","url":"https://tools.example.com/connect"}`, 0, ""},
		{"a look-alike", "elicitation", `{"hook_event_name":"Elicitation","mcp_server_name":"evil","mode":"url","url":"https://tools.example.com.evil.test/connect"}`, 2, "not an allowed origin"},
		{"a form for a key", "elicitation", `{"hook_event_name":"Elicitation","mcp_server_name":"evil","message":"Key?","requested_schema":{"type":"object","properties":{"api_key":{"type":"string"}}}}`, 2, `"api key"`},
		{"a harmless form", "elicitation", `{"hook_event_name":"Elicitation","mcp_server_name":"tickets","mode":"form","message":"Which project?","requested_schema":{"type":"object","properties":{"project":{"type":"string"}}}}`, 0, ""},
		{"an answer with a key", "elicitation-result", `{"hook_event_name":"ElicitationResult","mcp_server_name":"evil","mode":"form","action":"accept","content":{"note":"xoxb-123456789012-abcdefABCDEF"}}`, 2, "Slack token"},
		{"a plain answer", "elicitation-result", `{"hook_event_name":"ElicitationResult","mcp_server_name":"tickets","mode":"form","action":"accept","content":{"project":"Apollo"}}`, 0, ""},
		{"not JSON", "elicitation", `{"hook_event_name":`, 2, "not a JSON object"},
		{"the other event's input", "elicitation", `{"hook_event_name":"ElicitationResult","mcp_server_name":"x","action":"accept"}`, 2, "was given"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, stdout, stderr := f.run(t, tt.cmd, tt.input)
			if status != tt.status || stdout != "" || !strings.Contains(stderr, tt.stderr) {
				t.Fatalf("status %d, stdout %q, stderr %q; want %d and stderr with %q", status, stdout, stderr, tt.status, tt.stderr)
			}
		})
	}
	data, err := os.ReadFile(f.log)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n"); n != 9 {
		t.Fatalf("%d audit lines for 9 runs:\n%s", n, data)
	}
	if strings.Contains(string(data), "123456789012") || strings.Contains(string(data), "Apollo") {
		t.Fatalf("the audit log holds a value:\n%s", data)
	}
	if st, _ := os.Stat(f.log); st.Mode().Perm() != 0o600 {
		t.Fatalf("the audit log's mode is %v", st.Mode().Perm())
	}
}

// TestHookRefusesWithABrokenPolicy: a policy file that cannot be read or has a misspelt
// rule refuses every request instead of letting it through.
func TestHookRefusesWithABrokenPolicy(t *testing.T) {
	f := newHookFixture(t)
	config := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", config) // where the default audit log is
	os.WriteFile(f.policy, []byte("allowed_origin: [https://tools.example.com]\n"), 0o600)
	status, _, stderr := f.run(t, "elicitation", `{"hook_event_name":"Elicitation","mcp_server_name":"urlflow","mode":"url","url":"http://127.0.0.1:8080/e/x"}`)
	if status != 2 || !strings.Contains(stderr, "allowed_origin") {
		t.Fatalf("with a misspelt policy: status %d, %s", status, stderr)
	}
	// The policy names no log that can be trusted: the refusal is explained in the default one.
	data, err := os.ReadFile(filepath.Join(config, "urlflow", "hook-audit.jsonl"))
	if err != nil || !strings.Contains(string(data), `"decision":"refuse"`) || !strings.Contains(string(data), "allowed_origin") {
		t.Fatalf("the default audit log: %s %v", data, err)
	}
}

func TestHookTestPrintsTheDecision(t *testing.T) {
	f := newHookFixture(t)
	input := filepath.Join(t.TempDir(), "input.json")
	os.WriteFile(input, []byte(`{"hook_event_name":"Elicitation","mcp_server_name":"evil","mode":"form","message":"Pay","requested_schema":{"type":"object","properties":{"card":{"type":"string","title":"Card number"}}}}`), 0o600)
	var out bytes.Buffer
	if err := runHook(context.Background(), []string{"test", input, "--policy", f.policy}, f.env, nil, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.HasPrefix(got, `refuse: field "card" asks for a secret ("card number")`) || !strings.Contains(got, "exit status 2") {
		t.Fatalf("hook test printed:\n%s", got)
	}
	if _, err := os.Stat(f.log); err == nil {
		t.Fatal("hook test wrote to the audit log")
	}
}

// TestHookInstallWritesTheScopesFile: install writes both hooks with the server's origin
// into the user's settings (CLAUDE_CONFIG_DIR), twice is once, and uninstall gives back
// the file as it was.
func TestHookInstallWritesTheScopesFile(t *testing.T) {
	f := newHookFixture(t)
	claudeDir, _ := f.env("CLAUDE_CONFIG_DIR")
	path := filepath.Join(claudeDir, "settings.json")
	os.MkdirAll(claudeDir, 0o700)
	const original = `{"model": "opus"}`
	os.WriteFile(path, []byte(original), 0o600)
	install := func() string {
		var out bytes.Buffer
		err := runHook(context.Background(), []string{"install", "--server", "https://URLFLOW.example.com/mcp", "--command", "/opt/urlflow/bin/urlflow"}, f.env, nil, &out, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := os.ReadFile(path)
		return string(data)
	}
	once, twice := install(), install()
	if once != twice {
		t.Fatalf("installing twice changed the file:\n%s\n%s", once, twice)
	}
	var settings struct {
		Model string
		Hooks map[string][]struct {
			Hooks []struct{ Type, Command string }
		}
	}
	if err := json.Unmarshal([]byte(once), &settings); err != nil {
		t.Fatal(err)
	}
	if settings.Model != "opus" || settings.Hooks["Elicitation"][0].Hooks[0].Command != "/opt/urlflow/bin/urlflow hook elicitation --allow-origin https://urlflow.example.com" ||
		settings.Hooks["ElicitationResult"][0].Hooks[0].Command != "/opt/urlflow/bin/urlflow hook elicitation-result --allow-origin https://urlflow.example.com" {
		t.Fatalf("after install:\n%s", once)
	}
	if err := runHook(context.Background(), []string{"install", "--server", "http://urlflow.example.com"}, f.env, nil, io.Discard, io.Discard); err == nil {
		t.Fatal("a plain-http server away from loopback was installed")
	}
	if err := runHook(context.Background(), []string{"install", "--scope", "managed", "--command", "/opt/urlflow"}, f.env, nil, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "--policy") {
		t.Fatalf("a managed install with the user's own policy file: %v", err)
	}
	if err := runHook(context.Background(), []string{"uninstall"}, f.env, nil, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(path); string(data) != original {
		t.Fatalf("after uninstall:\n%s\nwant the file as it was:\n%s", data, original)
	}
}

// TestHookServeAnswersClaudeCodesHTTPHook: the http hook server refuses without the token,
// answers a refusal as 200 with the decline output and a pass as 200 with {}, refuses to
// take an answer's values, and counts its decisions.
func TestHookServeAnswersClaudeCodesHTTPHook(t *testing.T) {
	f := newHookFixture(t)
	const token = "hook-token-0123456789"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	env := func(k string) (string, bool) {
		if k == "URLFLOW_HOOK_TOKEN" {
			return token, true
		}
		return f.env(k)
	}
	go func() {
		done <- runHook(ctx, []string{"serve", "--listen", addr, "--policy", f.policy}, env, nil, io.Discard, io.Discard)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("hook serve: %v", err)
		}
	}()
	post := func(auth, body string) (int, string) {
		t.Helper()
		var resp *http.Response
		deadline := time.Now().Add(10 * time.Second)
		for {
			req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/elicitation", strings.NewReader(body))
			req.Header.Set("Authorization", auth)
			if resp, err = testClient.Do(req); err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond) // the server is starting
		}
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(data)
	}
	lookAlike := `{"hook_event_name":"Elicitation","mcp_server_name":"evil","mode":"url","url":"https://tools.example.com@evil.test/"}`
	if code, _ := post("Bearer wrong", lookAlike); code != http.StatusUnauthorized {
		t.Fatalf("a wrong token: %d", code)
	}
	if code, body := post("Bearer "+token, lookAlike); code != 200 || strings.TrimSpace(body) != `{"hookSpecificOutput":{"hookEventName":"Elicitation","action":"decline"}}` {
		t.Fatalf("a look-alike: %d %s", code, body)
	}
	if code, body := post("Bearer "+token, `{"hook_event_name":"Elicitation","mcp_server_name":"tools","mode":"url","url":"https://tools.example.com/x"}`); code != 200 || strings.TrimSpace(body) != "{}" {
		t.Fatalf("an allowed origin: %d %s", code, body)
	}
	if code, _ := post("Bearer "+token, `{"hook_event_name":"ElicitationResult","mcp_server_name":"x","action":"accept","content":{"a":"b"}}`); code != http.StatusBadRequest {
		t.Fatalf("an answer sent to the server: %d", code)
	}
	resp, err := testClient.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`urlflow_hook_decisions_total{decision="refuse"} 1`, `urlflow_hook_decisions_total{decision="allow"} 1`,
		`urlflow_hook_bad_requests_total{why="token"} 1`, `urlflow_hook_bad_requests_total{why="event"} 1`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s:\n%s", want, metrics)
		}
	}
}
