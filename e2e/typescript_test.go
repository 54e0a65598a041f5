package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
	typeScriptClientCells(t, push, errStyle, nil)
}

// The TypeScript example server on the SDK's v2 server package (weather-v2.mjs:
// createMcpHandler with the package's requireV2) next to urlflow dev: the go-sdk client,
// the TypeScript SDK v2 client and Claude Code in protocol 2026-07-28, each finishing in
// Chromium with the tool's call to the demo API through urlflow's proxy; and a 2025-11-25
// client with URL mode, which the handler serves statelessly, told to open the link and
// call again.
func TestTheTypeScriptV2ExampleServerDelegates(t *testing.T) {
	t.Parallel()
	requireTypeScriptBuild(t)
	start := func(flags ...string) *example {
		return startExampleCommand(t, func(addr string) *exec.Cmd {
			cmd := exec.Command("node", append([]string{"../clients/typescript/example/weather-v2.mjs", "--addr", addr}, flags...)...)
			cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
			return cmd
		})
	}
	x := start()
	modernCell(t, x)
	typeScriptClientCells(t, nil, nil, x)
	claudeCodeCell(t, start)

	t.Run("2025, stateless", func(t *testing.T) {
		t.Parallel()
		key := demoKey()
		args := map[string]any{"city": "Paris"}
		c := x.connect(t, "ivan", clientConfig{URLMode: true})
		first := c.CallOK("forecast", args)
		link := str(structured(t, first), "url")
		if str(structured(t, first), "status") != "user_action_required" || !strings.HasPrefix(link, x.urlflow.BaseURL+"/e/") || !strings.Contains(text(first), link) {
			t.Fatalf("a stateless 2025 call: %q %v", text(first), structured(t, first))
		}
		newPerson(t, sharedBrowser(t), "ivan").completeSecret(t, link, key)
		wantForecast(t, c.CallOK("forecast", args), key)
		requireNoKey(t, key, c.Traffic.String(), x.proc.Output())
	})
}

// The TypeScript examples' default address is the resource of urlflow dev's demo service,
// so that the two commands of the guide (docs/delegating-from-typescript.md) give tokens
// that the example's users can use (it was another port, whose tokens urlflow dev refused);
// started elsewhere, an example says how to start urlflow dev for it.
func TestTheTypeScriptExamplesDefaultAddressIsUrlflowDevsDemoResource(t *testing.T) {
	t.Parallel()
	requireTypeScriptBuild(t)
	s := startServer(t, serverConfig{Redis: redistest.Start(t)})
	var demo struct {
		Resource string `json:"resource"`
	}
	if status := s.getJSON("/dev/service-key?service=demo", "", &demo); status != 200 || demo.Resource == "" {
		t.Fatalf("dev service key: %d %+v", status, demo)
	}
	common, err := os.ReadFile("../clients/typescript/example/common.mjs")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`addr: \{ type: "string", default: "([^"]+)" \}`).FindSubmatch(common)
	if m == nil || "http://"+string(m[1])+"/mcp" != demo.Resource {
		t.Fatalf("the examples' default address %q is not urlflow dev's demo resource %s", m, demo.Resource)
	}

	addr := fmt.Sprintf("127.0.0.1:%d", redistest.FreePort(t))
	cmd := exec.Command("node", "../clients/typescript/example/weather-v2.mjs", "--addr", addr)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "URLFLOW_URL=" + s.BaseURL}
	proc, _, err := launch(t, cmd, "weather: MCP on")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the hint to start urlflow dev for the example's resource", func() bool {
		return strings.Contains(proc.Output(), "start urlflow dev with URLFLOW_DEV_DEMO_RESOURCE=http://"+addr+"/mcp")
	})
}
