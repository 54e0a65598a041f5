package e2e

import (
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/urlflow/urlflow/internal/redistest"
)

// A replica stopped with SIGTERM while a push-style tool call waits for its user drains:
// /readyz turns 503 at once, a new MCP session is refused with 503, the pages still serve
// the user, who completes the flow, the waiting call returns "stored", and only then does
// the process exit, by itself and with status 0. No flow is ended by the stop.
func TestAStoppingReplicaDrainsAndEndsNoFlowWrongly(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	s := startServer(t, serverConfig{Redis: rs, Style: "push", Env: []string{"URLFLOW_SHUTDOWN_GRACE=60s"}})
	c := connect(t, s, clientConfig{Token: s.Token, URLMode: true})
	call := c.callAsync("set_secret", map[string]any{"name": "demo_api_key"})
	params := c.nextElicitation(30 * time.Second)

	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "/readyz answering 503 while the replica drains", func() bool {
		resp, err := http.Get(s.BaseURL + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusServiceUnavailable
	})
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"late","version":"1"}}}`
	req, _ := http.NewRequest(http.MethodPost, s.BaseURL+"/mcp", strings.NewReader(init))
	req.Header.Set("Authorization", "Bearer "+s.Token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a new session while draining: %v %v, want 503", resp, err)
	}
	select {
	case <-s.exited:
		t.Fatal("the process exited with a tool call in progress")
	default:
	}

	newFormBrowser(t, s, "dev").completeSecret(params.URL, canary)
	if res := await(t, call, time.Minute); str(structured(t, res), "status") != "stored" {
		t.Fatalf("the waiting set_secret answered %s, want stored", text(res))
	}
	select {
	case <-s.exited:
	case <-time.After(20 * time.Second):
		t.Fatal("the process did not exit once its tool call had finished")
	}
	if code := s.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit status %d, want 0", code)
	}
	if !strings.Contains(s.output.String(), "stopping: /readyz answers 503") {
		t.Error("the log does not say the replica drains")
	}
}
