package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/urlflow/urlflow/internal/redistest"
)

// The TypeScript package (clients/typescript) against urlflow dev: its live program
// creates an elicitation for the demo service, the user enters the demo key in Chromium,
// and the program waits for it, calls the demo API through the proxy (text and bytes),
// reads the status and the listing, cancels and deletes, and checks that its event stream
// told of each (clients/typescript/live/flow.mjs). The test command builds the package
// (npm test in clients/typescript) before the end-to-end tests.
func TestTheTypeScriptPackageDelegatesAgainstUrlflowDev(t *testing.T) {
	t.Parallel()
	requireTypeScriptBuild(t)
	resource := "https://typescript-demo.example/mcp"
	s := startServer(t, serverConfig{Redis: redistest.Start(t), Env: []string{"URLFLOW_DEV_DEMO_RESOURCE=" + resource}})
	cmd := exec.Command("node", "../clients/typescript/live/flow.mjs")
	cmd.Env = append(os.Environ(), "URLFLOW_URL="+s.BaseURL, "URLFLOW_RESOURCE="+resource, "URLFLOW_USER=tsuser")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start node: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	key := demoKey()
	var output strings.Builder
	deadline := time.After(3 * time.Minute)
	for {
		select {
		case <-deadline:
			t.Fatalf("the TypeScript program did not finish:\n%s\n%s", output.String(), stderr.String())
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("the TypeScript program ended without done:\n%s\n%s", output.String(), stderr.String())
			}
			output.WriteString(line + "\n")
			var ev struct {
				Event, URL, Message string
			}
			if err := json.Unmarshal([]byte(line), &ev); err != nil {
				continue
			}
			switch ev.Event {
			case "open":
				if !strings.HasPrefix(ev.URL, s.BaseURL+"/e/") {
					t.Fatalf("the elicitation's URL %q is not urlflow's", ev.URL)
				}
				newPerson(t, sharedBrowser(t), "tsuser").completeSecret(t, ev.URL, key)
			case "error":
				t.Fatalf("the TypeScript program failed: %s", ev.Message)
			case "done":
				requireNoKey(t, key, output.String(), stderr.String())
				return
			}
		}
	}
}

// requireTypeScriptBuild fails t unless the TypeScript package is built.
func requireTypeScriptBuild(t *testing.T) {
	t.Helper()
	dist, err := filepath.Abs("../clients/typescript/dist/index.js")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dist); err != nil {
		t.Fatalf("the TypeScript package is not built (scripts/test builds it; by hand: npm --prefix clients/typescript ci && npm --prefix clients/typescript run build): %v", err)
	}
}

// The TypeScript example server (clients/typescript/example/weather.mjs: McpServer of the
// TypeScript SDK v1 with the package's Delegation) next to urlflow dev, in the cells of
// protocol 2025-11-25 that the Go example runs: the go-sdk client in push, error and
// without URL mode, and the TypeScript SDK v1 client in push and error, each finishing in
// Chromium with the tool's call to the demo API through urlflow's proxy.
func TestTheTypeScriptExampleServerDelegatesFor2025Clients(t *testing.T) {
	t.Parallel()
	requireTypeScriptBuild(t)
	start := func(style string) *example {
		return startExampleCommand(t, func(addr string) *exec.Cmd {
			cmd := exec.Command("node", "../clients/typescript/example/weather.mjs", "--addr", addr, "--style", style)
			cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
			return cmd
		})
	}
	push, errStyle := start("push"), start("error")
	sessionCells(t, push, errStyle)
	typeScriptClientCells(t, push, errStyle, false)
}
