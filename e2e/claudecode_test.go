package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/urlflow/urlflow/internal/redistest"
)

// Claude Code as a real MCP client: the pinned binary of e2e/claude, driven without a model.
// Its MCP client takes stream-json control requests on stdin (initialize, then mcp_call for a
// tool) and answers each with a control_response, going through the protocol by itself: it
// speaks 2026-07-28, declares URL-mode elicitation, sends a progress token on every call,
// and runs its Elicitation hook on every URL-mode input request, whose answer the test sets.

// claudeCodeBinary returns the Linux binary of the pinned Claude Code (e2e/claude).
func claudeCodeBinary(t *testing.T) string {
	t.Helper()
	dir, err := npmPackage("claude", "@anthropic-ai/claude-code-linux-x64")
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "claude")
}

// claudeCode is one Claude Code process with urlflow as its MCP server "urlflow".
type claudeCode struct {
	t       *testing.T
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	hookLog string
	stderr  *syncBuffer

	writeMu   sync.Mutex
	mu        sync.Mutex
	responses map[string]chan claudeAnswer
	next      int
	// dialogs are the elicitations Claude Code asked its host to show the user.
	dialogs     []map[string]any
	formContent map[string]any
}

// claudeAnswer is Claude Code's answer to a control request: the tool's result or an error.
type claudeAnswer struct {
	Subtype  string          `json:"subtype"`
	ID       string          `json:"request_id"`
	Error    string          `json:"error"`
	Response json.RawMessage `json:"response"`
}

// startClaudeCode starts Claude Code in a home of its own, with urlflow s as its MCP server
// "urlflow" (the token as a header, as the banner's `claude mcp add` line configures it) and
// an Elicitation hook that records what it is given and answers action. It returns once
// Claude Code has answered its initialize.
func startClaudeCode(t *testing.T, s *server, token, action string) *claudeCode {
	t.Helper()
	return startClaudeCodeWith(t, claudeSetup{
		servers: map[string]any{"urlflow": map[string]any{"type": "http", "url": s.MCPURL, "headers": map[string]string{"Authorization": "Bearer " + token}}},
		action:  action,
	})
}

// claudeSetup is what a test gives a Claude Code process.
type claudeSetup struct {
	// servers are its MCP servers, by name, as --mcp-config takes them.
	servers map[string]any
	// action is the answer of the test's Elicitation hook to a URL-mode request: it stands
	// for the user. A form, or a URL-mode request when action is empty, goes to the user's
	// dialog instead, which Claude Code asks its host (the test) for; the test answers
	// accept, with formContent for a form.
	action      string
	formContent map[string]any
	// prepare runs before Claude Code starts, with its home and the environment it will
	// have (its configuration directory is home/.claude).
	prepare func(home string, env []string)
	// env is added to its environment.
	env []string
}

// startClaudeCodeWith starts Claude Code as setup says, in a home of its own. It returns
// once Claude Code has answered its initialize.
func startClaudeCodeWith(t *testing.T, setup claudeSetup) *claudeCode {
	t.Helper()
	binary := claudeCodeBinary(t)
	dir := t.TempDir()
	c := &claudeCode{t: t, hookLog: filepath.Join(dir, "hook.log"), stderr: &syncBuffer{}, responses: map[string]chan claudeAnswer{}}
	hook := filepath.Join(dir, "hook.sh")
	c.formContent = setup.formContent
	answer := fmt.Sprintf(`{"hookSpecificOutput":{"hookEventName":"Elicitation","action":%q}}`, setup.action)
	script := "#!/bin/sh\ninput=$(cat)\nprintf '%s\\n' \"$input\" >> '" + c.hookLog + "'\n"
	if setup.action != "" { // else the hook stays silent, and Claude Code asks its host
		script += "case \"$input\" in *'\"mode\":\"url\"'*) echo '" + answer + "' ;; esac\n"
	}
	if err := os.WriteFile(hook, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	mcpConfig, _ := json.Marshal(map[string]any{"mcpServers": setup.servers})
	settings, _ := json.Marshal(map[string]any{"hooks": map[string]any{"Elicitation": []any{map[string]any{
		"hooks": []any{map[string]any{"type": "command", "command": hook}}}}}})
	c.cmd = exec.Command(binary, "-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose",
		"--mcp-config", string(mcpConfig), "--strict-mcp-config", "--settings", string(settings))
	c.cmd.Dir = dir
	c.cmd.Env = append(os.Environ(),
		"HOME="+dir, "CLAUDE_CONFIG_DIR="+filepath.Join(dir, ".claude"), "XDG_CONFIG_HOME="+filepath.Join(dir, ".config"),
		"DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1",
		// No model is asked anything; a dummy key, and a model API that refuses at once
		// instead of a network that does not answer (startup would wait on it).
		"ANTHROPIC_API_KEY=sk-ant-e2e-dummy", "ANTHROPIC_BASE_URL=http://127.0.0.1:9")
	c.cmd.Env = append(c.cmd.Env, setup.env...)
	if setup.prepare != nil {
		setup.prepare(dir, c.cmd.Env)
	}
	c.cmd.Stderr = c.stderr
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := c.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.stdin = stdin
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("start Claude Code: %v", err)
	}
	t.Cleanup(func() {
		c.stdin.Close()
		c.cmd.Process.Kill()
		c.cmd.Wait()
	})
	go c.read(stdout)
	c.request(map[string]any{"subtype": "initialize"})
	return c
}

// read routes each control_response on stdout to the request that waits for it.
func (c *claudeCode) read(stdout io.Reader) {
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var msg struct {
			Type      string         `json:"type"`
			Response  claudeAnswer   `json:"response"`
			RequestID string         `json:"request_id"`
			Request   map[string]any `json:"request"`
		}
		if json.Unmarshal(sc.Bytes(), &msg) != nil {
			continue
		}
		if msg.Type == "control_request" && msg.Request["subtype"] == "elicitation" {
			c.answerDialog(msg.RequestID, msg.Request)
			continue
		}
		if msg.Type != "control_response" {
			continue
		}
		c.mu.Lock()
		ch := c.responses[msg.Response.ID]
		c.mu.Unlock()
		if ch != nil {
			ch <- msg.Response
		}
	}
}

// answerDialog is the user at Claude Code's elicitation dialog: it accepts, with the
// setup's formContent for the fields the form has.
func (c *claudeCode) answerDialog(id string, req map[string]any) {
	c.mu.Lock()
	c.dialogs = append(c.dialogs, req)
	c.mu.Unlock()
	content := map[string]any{}
	schema, _ := req["requested_schema"].(map[string]any)
	properties, _ := schema["properties"].(map[string]any)
	for name := range properties {
		if v, ok := c.formContent[name]; ok {
			content[name] = v
		}
	}
	line, _ := json.Marshal(map[string]any{"type": "control_response", "response": map[string]any{
		"subtype": "success", "request_id": id, "response": map[string]any{"action": "accept", "content": content}}})
	c.write(line) // a Claude Code that is gone asks for nothing more; its request's wait says so
}

// shownDialogs returns the elicitations Claude Code showed the user in a dialog.
func (c *claudeCode) shownDialogs() []map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]map[string]any(nil), c.dialogs...)
}

// write sends one line to Claude Code's standard input.
func (c *claudeCode) write(line []byte) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	_, err := c.stdin.Write(append(line, '\n'))
	return err
}

// claudeCodeWait bounds one control request: a tool call waits for the browser step.
const claudeCodeWait = 2 * time.Minute

// request sends a control request and returns Claude Code's answer.
func (c *claudeCode) request(req map[string]any) claudeAnswer {
	c.t.Helper()
	c.mu.Lock()
	c.next++
	id := fmt.Sprintf("r%d", c.next)
	ch := make(chan claudeAnswer, 1)
	c.responses[id] = ch
	c.mu.Unlock()
	line, _ := json.Marshal(map[string]any{"type": "control_request", "request_id": id, "request": req})
	if err := c.write(line); err != nil {
		c.t.Fatalf("write to Claude Code: %v", err)
	}
	select {
	case a := <-ch:
		return a
	case <-time.After(claudeCodeWait):
		c.t.Fatalf("Claude Code did not answer %s within %s:\n%s", req["subtype"], claudeCodeWait, c.stderr.String())
		return claudeAnswer{}
	}
}

// call makes Claude Code call urlflow's tool with args and returns the tool result's
// structuredContent.
func (c *claudeCode) call(tool string, args map[string]any) map[string]any {
	c.t.Helper()
	return c.callOn("urlflow", tool, args)
}

// callOn makes Claude Code call the tool of its MCP server with args and returns the tool
// result's structuredContent.
func (c *claudeCode) callOn(server, tool string, args map[string]any) map[string]any {
	c.t.Helper()
	a := c.request(map[string]any{"subtype": "mcp_call", "tool": "mcp__" + server + "__" + tool, "arguments": args})
	var res struct {
		StructuredContent map[string]any `json:"structuredContent"`
		IsError           bool           `json:"isError"`
	}
	if a.Subtype != "success" || json.Unmarshal(a.Response, &res) != nil || res.IsError || res.StructuredContent == nil {
		c.t.Fatalf("Claude Code's call of %s on %s: %s %s %s", tool, server, a.Subtype, a.Error, a.Response)
	}
	return res.StructuredContent
}

// hookInputs returns what the Elicitation hook was given, one entry per time it ran.
func (c *claudeCode) hookInputs() []map[string]any {
	c.t.Helper()
	data, err := os.ReadFile(c.hookLog)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		c.t.Fatal(err)
	}
	var inputs []map[string]any
	for line := range strings.Lines(string(data)) {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var in map[string]any
		if err := json.Unmarshal([]byte(line), &in); err != nil {
			c.t.Fatalf("the hook's input is not JSON: %q", line)
		}
		inputs = append(inputs, in)
	}
	return inputs
}

// waitHook waits until the hook has run n times and returns what it was given.
func (c *claudeCode) waitHook(n int) []map[string]any {
	c.t.Helper()
	var inputs []map[string]any
	eventually(c.t, 30*time.Second, fmt.Sprintf("Claude Code's Elicitation hook to run %d times", n), func() bool {
		inputs = c.hookInputs()
		return len(inputs) >= n
	})
	return inputs
}

// TestClaudeCodeAsksOnceThenStoresAndUsesASecret: Claude Code asks the user once (its
// Elicitation hook runs once) although the browser step outlasts three bounded waits: it
// sends a progress token, so its retry waits until the flow ends. The same call then answers
// stored, and call_api uses the key.
func TestClaudeCodeAsksOnceThenStoresAndUsesASecret(t *testing.T) {
	t.Parallel()
	const boundedWait = time.Second
	rs := redistest.Start(t)
	s := startServer(t, serverConfig{Redis: rs, Env: []string{"URLFLOW_TEST_RETRY_WAIT=" + boundedWait.String(),
		"URLFLOW_TEST_PROGRESS_INTERVAL=500ms"}})
	cc := startClaudeCode(t, s, s.Token, "accept")
	dev := newPerson(t, sharedBrowser(t), "dev")

	done := make(chan map[string]any, 1)
	go func() { done <- cc.call("set_secret", map[string]any{"name": "demo_api_key"}) }()
	asked := cc.waitHook(1)[0]
	url, _ := asked["url"].(string)
	if asked["mode"] != "url" || !strings.HasPrefix(url, s.BaseURL+"/e/") || asked["mcp_server_name"] != "urlflow" {
		t.Fatalf("the hook was given %v", asked)
	}
	time.Sleep(3*boundedWait + boundedWait/2) // the user takes longer than three bounded waits
	dev.completeSecret(t, url, canary)
	var stored map[string]any
	select {
	case stored = <-done:
	case <-time.After(claudeCodeWait):
		t.Fatal("the call did not end after the browser step")
	}
	if str(stored, "status") != "stored" {
		t.Fatalf("set_secret through Claude Code: %v", stored)
	}
	if n := len(cc.hookInputs()); n != 1 {
		t.Fatalf("the user was asked %d times, want once", n)
	}
	requireEvents(t, s.status(idFromURL(url), s.Token), "created", "client_accept", "browser_open", "verified")

	if whoami := cc.call("call_api", whoamiArgs); whoami["status"] != float64(200) {
		t.Fatalf("call_api through Claude Code: %v", whoami)
	}
	if n := len(cc.hookInputs()); n != 1 {
		t.Fatalf("call_api with a stored key asked the user (%d hook runs)", n)
	}
}

// TestClaudeCodeAnswersOfTheHookEndTheFlow: a decline or a cancel given by the hook ends
// the flow as that answer, and the tool says so.
func TestClaudeCodeAnswersOfTheHookEndTheFlow(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ action, status, event string }{
		{"decline", "declined", "client_decline"},
		{"cancel", "cancelled", "client_cancel"},
	} {
		t.Run(tt.action, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, serverConfig{Redis: redistest.Start(t)})
			cc := startClaudeCode(t, s, s.Token, tt.action)
			res := cc.call("set_secret", map[string]any{"name": "demo_api_key"})
			if str(res, "status") != tt.status {
				t.Fatalf("after the hook's %s: %v", tt.action, res)
			}
			requireEvents(t, s.status(str(res, "elicitationId"), s.Token), "created", tt.event)
		})
	}
}

// TestClaudeCodeWaitsUntilTheDeadlineOfAFlowNobodyFinishes: with a progress token the call
// waits until the flow's deadline, then answers that it expired.
func TestClaudeCodeWaitsUntilTheDeadlineOfAFlowNobodyFinishes(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverConfig{Redis: redistest.Start(t), TTL: "5s",
		Env: []string{"URLFLOW_TEST_RETRY_WAIT=1s", "URLFLOW_TEST_PROGRESS_INTERVAL=500ms"}})
	cc := startClaudeCode(t, s, s.Token, "accept")
	start := time.Now()
	res := cc.call("set_secret", map[string]any{"name": "demo_api_key"})
	if str(res, "status") != "expired" {
		t.Fatalf("a flow nobody finished: %v", res)
	}
	if took := time.Since(start); took < 4*time.Second {
		t.Fatalf("the call answered after %s, before the deadline", took)
	}
	if n := len(cc.hookInputs()); n != 1 {
		t.Fatalf("the user was asked %d times, want once", n)
	}
}

// TestClaudeCodeConnectsAThirdPartyAccount: connect through Claude Code, the user at the
// provider in the browser, then call_api with the connection.
func TestClaudeCodeConnectsAThirdPartyAccount(t *testing.T) {
	t.Parallel()
	cs := startConnect(t, "push", 3600)
	cc := startClaudeCode(t, cs.s, cs.s.devToken("alice"), "accept")
	done := make(chan map[string]any, 1)
	go func() { done <- cc.call("connect", map[string]any{"provider": "acme"}) }()
	url, _ := cc.waitHook(1)[0]["url"].(string)
	cs.connectInBrowser(t, cs.alice, url, "alice", "alice-acme-pw", false)
	var res map[string]any
	select {
	case res = <-done:
	case <-time.After(claudeCodeWait):
		t.Fatal("connect did not end after the browser step")
	}
	if str(res, "status") != "connected" || str(res, "account") != "alice@acme.test" {
		t.Fatalf("connect through Claude Code: %v", res)
	}
	if api := cc.call("call_api", map[string]any{"name": "acme", "method": "GET", "path": "/me"}); api["status"] != float64(200) {
		t.Fatalf("call_api against Acme through Claude Code: %v", api)
	}
}

// TestTheBannersClaudeCodeLineConnects runs the `claude mcp add` line that `urlflow dev`
// prints, as printed, with the pinned Claude Code, and checks that Claude Code then reaches
// urlflow, from another directory than the one the line ran in (the line adds urlflow for
// the user, not for one project).
func TestTheBannersClaudeCodeLineConnects(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverConfig{Redis: redistest.Start(t)})
	var line string
	// From stdout alone: a log line (stderr) can land in the middle of a banner line in
	// Output.
	for l := range strings.Lines(s.Stdout()) {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "claude mcp add ") {
			line = l
			break
		}
	}
	if line == "" {
		t.Fatalf("the banner has no `claude mcp add` line:\n%s", s.Output())
	}
	binary := claudeCodeBinary(t)
	home := t.TempDir()
	elsewhere := filepath.Join(home, "another-project")
	if err := os.Mkdir(elsewhere, 0o700); err != nil {
		t.Fatal(err)
	}
	run := func(dir, command string) string {
		cmd := exec.Command("sh", "-c", command)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(binary)+":"+os.Getenv("PATH"),
			"HOME="+home, "CLAUDE_CONFIG_DIR="+filepath.Join(home, ".claude"), "DISABLE_AUTOUPDATER=1",
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "ANTHROPIC_API_KEY=sk-ant-e2e-dummy", "ANTHROPIC_BASE_URL=http://127.0.0.1:9")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", strings.Fields(command)[:3], err, out)
		}
		return string(out)
	}
	run(home, line)
	if out := run(elsewhere, "claude mcp list"); !strings.Contains(out, "urlflow: "+s.MCPURL) || !strings.Contains(out, "Connected") {
		t.Fatalf("claude mcp list after the banner's line:\n%s", out)
	}
}

// TestAHeadlessHostIsAskedToShowTheLink: Claude Code run headless (stream-json), whose
// Elicitation hooks leave a URL-mode request alone, asks its host with a control_request
// of subtype elicitation that carries the link; the host shows it and answers accept, which
// is consent only: the call ends once the user has entered the secret in the browser.
func TestAHeadlessHostIsAskedToShowTheLink(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverConfig{Redis: redistest.Start(t)})
	cc := startClaudeCodeWith(t, claudeSetup{servers: map[string]any{"urlflow": map[string]any{"type": "http", "url": s.MCPURL,
		"headers": map[string]string{"Authorization": "Bearer " + s.Token}}}})
	done := make(chan map[string]any, 1)
	go func() { done <- cc.call("set_secret", map[string]any{"name": "demo_api_key"}) }()
	var asked map[string]any
	for deadline := time.Now().Add(claudeCodeWait); asked == nil; time.Sleep(50 * time.Millisecond) {
		if dialogs := cc.shownDialogs(); len(dialogs) > 0 {
			asked = dialogs[0]
		} else if time.Now().After(deadline) {
			t.Fatalf("Claude Code asked its host nothing:\n%s", cc.stderr.String())
		}
	}
	link, _ := asked["url"].(string)
	if asked["mode"] != "url" || !strings.HasPrefix(link, s.BaseURL+"/e/") || asked["mcp_server_name"] != "urlflow" {
		t.Fatalf("the host was asked %v", asked)
	}
	t.Logf("the control request's fields: %v", slices.Sorted(maps.Keys(asked)))
	newPerson(t, sharedBrowser(t), "dev").completeSecret(t, link, canary)
	select {
	case stored := <-done:
		if str(stored, "status") != "stored" {
			t.Fatalf("set_secret: %v", stored)
		}
	case <-time.After(claudeCodeWait):
		t.Fatal("the call did not end after the browser step")
	}
}
