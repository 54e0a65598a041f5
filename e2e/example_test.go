package e2e

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/urlflow/urlflow/internal/redistest"
)

// The example delegating server (examples/weather, package delegate) next to urlflow dev:
// a go-sdk client calls the example's tool, the user enters the demo key on urlflow's
// pages in Chromium, and the tool's call to the demo API goes through urlflow's proxy.
// One cell per kind of client: 2025-11-25 push, 2025-11-25 error (-32042, the
// notification comes from the example's event stream), 2026-07-28 (input_required with
// urlflow's requestState, retried by the client), and a client without URL mode; with the
// go-sdk client, the TypeScript SDK v1 (2025 push and error) and v2 (2026-07-28), and
// Claude Code (2026-07-28).

// example is the example server, and urlflow dev whose demo service it is.
type example struct {
	urlflow *server
	proc    *server // the example's process
	mcpURL  string
}

// startExample starts urlflow dev and the example in style (push or error), with more
// flags of the example.
func startExample(t *testing.T, style string, flags ...string) *example {
	t.Helper()
	return startExampleCommand(t, func(addr string) *exec.Cmd {
		return exec.Command(exampleBinary, append([]string{"--addr", addr, "--style", style}, flags...)...)
	})
}

// startExampleCommand starts urlflow dev and the example server that command makes for
// its address, with URLFLOW_URL set; the example prints "weather: MCP on" when it serves.
func startExampleCommand(t *testing.T, command func(addr string) *exec.Cmd) *example {
	t.Helper()
	port := redistest.FreePort(t)
	mcpURL := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	s := startServer(t, serverConfig{Redis: redistest.Start(t), Env: []string{"URLFLOW_DEV_DEMO_RESOURCE=" + mcpURL}})
	cmd := command(fmt.Sprintf("127.0.0.1:%d", port))
	cmd.Env = append(cmd.Env, "URLFLOW_URL="+s.BaseURL)
	proc, _, err := launch(t, cmd, "weather: MCP on")
	if err != nil {
		t.Fatal(err)
	}
	proc.BaseURL = "http://" + fmt.Sprint("127.0.0.1:", port)
	return &example{urlflow: s, proc: proc, mcpURL: mcpURL}
}

// token returns a token of the development user name for the example's resource.
func (x *example) token(t *testing.T, name string) string {
	t.Helper()
	var tok struct {
		Token string `json:"token"`
	}
	if status := x.urlflow.getJSON("/dev/token?user="+name+"&resource="+x.mcpURL, "", &tok); status != 200 || tok.Token == "" {
		t.Fatalf("dev token for %s: %d", x.mcpURL, status)
	}
	return tok.Token
}

// connect connects a go-sdk client of user name to the example.
func (x *example) connect(t *testing.T, name string, cfg clientConfig) *client {
	t.Helper()
	cfg.Token = x.token(t, name)
	return connect(t, &server{t: t, MCPURL: x.mcpURL}, cfg)
}

// firstAsk bounds the time from starting a client to its first elicitation: the client's
// process starts, connects and calls while the whole suite runs on two cores.
const firstAsk = time.Minute

// demoKey is a new valid key of the demo API: the canary of one test.
func demoKey() string { return "demo_" + strings.ToLower(rand.Text()) }

// wantForecast checks that a result is the tool's success, which needed the demo API to
// accept the key.
func wantForecast(t *testing.T, res *sdk.CallToolResult, key string) {
	t.Helper()
	if res == nil || res.IsError || !strings.Contains(text(res), "Sunny in Paris") || !strings.Contains(text(res), "HTTP 200") {
		t.Fatalf("the tool did not succeed: %+v %q", res, text(res))
	}
	if strings.Contains(text(res), key) {
		t.Fatal("the tool's result carries the key")
	}
}

func TestTheExampleServerDelegatesForEveryKindOfClient(t *testing.T) {
	t.Parallel()
	push, errStyle := startExample(t, "push"), startExample(t, "error")
	sessionCells(t, push, errStyle)

	modernCell(t, push)
	typeScriptClientCells(t, push, errStyle, push)
	claudeCodeCell(t, func(flags ...string) *example { return startExample(t, "push", flags...) })
}

// modernCell runs the go-sdk client's cell of protocol 2026-07-28 against an example
// server, as a parallel subtest of t: input_required with urlflow's requestState, retried
// by the client once the user has finished in Chromium.
func modernCell(t *testing.T, x *example) {
	t.Run("2026-07-28", func(t *testing.T) {
		t.Parallel()
		key := demoKey()
		c := x.connect(t, "carol", clientConfig{URLMode: true, ProtocolVersion: "2026-07-28"})
		call := c.callAsync("forecast", map[string]any{"city": "Paris"})
		params := c.nextElicitation(firstAsk)
		newPerson(t, sharedBrowser(t), "carol").completeSecret(t, params.URL, key)
		res := await(t, call, time.Minute) // the client's retry carried urlflow's requestState
		wantForecast(t, res, key)
		if !strings.Contains(c.Traffic.String(), `"requestState"`) {
			t.Error("no requestState went through the client")
		}
		requireNoKey(t, key, c.Traffic.String(), x.proc.Output())
	})
}

// sessionCells runs the go-sdk client's cells of protocol 2025-11-25 against an example
// server in push style and one in error style, as parallel subtests of t: push, error
// (-32042, the notification from the example's event stream), and a client without URL
// mode.
func sessionCells(t *testing.T, push, errStyle *example) {
	args := map[string]any{"city": "Paris"}
	t.Run("2025 push", func(t *testing.T) {
		t.Parallel()
		key := demoKey()
		c := push.connect(t, "alice", clientConfig{URLMode: true})
		call := c.callAsync("forecast", args)
		params := c.nextElicitation(firstAsk)
		if !strings.HasPrefix(params.URL, push.urlflow.BaseURL+"/e/") || params.ElicitationID == "" {
			t.Fatalf("elicitation %+v, want urlflow's URL", params)
		}
		newPerson(t, sharedBrowser(t), "alice").completeSecret(t, params.URL, key)
		res := await(t, call, time.Minute)
		wantForecast(t, res, key)
		c.waitCompletion(params.ElicitationID, 5*time.Second) // sent before the result
		wantForecast(t, c.CallOK("forecast", args), key)      // stored: no second ask
		requireNoKey(t, key, c.Traffic.String(), push.proc.Output())
	})

	t.Run("2025 error", func(t *testing.T) {
		t.Parallel()
		key := demoKey()
		c := errStyle.connect(t, "bob", clientConfig{URLMode: true})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := c.Call(ctx, "forecast", args)
		params := urlElicitationRequired(t, err)[0]
		newPerson(t, sharedBrowser(t), "bob").completeSecret(t, params.URL, key)
		c.waitCompletion(params.ElicitationID, 30*time.Second) // from the example's event stream
		wantForecast(t, c.CallOK("forecast", args), key)
		requireNoKey(t, key, c.Traffic.String(), errStyle.proc.Output())
	})

	t.Run("no URL mode", func(t *testing.T) {
		t.Parallel()
		key := demoKey()
		c := push.connect(t, "dave", clientConfig{})
		first := c.CallOK("forecast", args)
		link := str(structured(t, first), "url")
		if str(structured(t, first), "status") != "user_action_required" || !strings.Contains(text(first), link) {
			t.Fatalf("without URL mode: %q %v", text(first), structured(t, first))
		}
		newPerson(t, sharedBrowser(t), "dave").completeSecret(t, link, key)
		wantForecast(t, c.CallOK("forecast", args), key)
		requireNoKey(t, key, c.Traffic.String(), push.proc.Output())
	})
}

// typeScriptClientCells runs the same with the TypeScript SDK clients (e2e/node), as
// parallel subtests of t: v1 in 2025 push against push and in 2025 error against
// errStyle, and v2 in 2026-07-28 against modern; a nil example skips its cell.
func typeScriptClientCells(t *testing.T, push, errStyle, modern *example) {
	args := []string{"--tool", "forecast", "--args", `{"city": "Paris"}`}
	for _, tc := range []struct {
		name, user, script string
		x                  *example
		flags              []string
		first              string // the event that carries the URL
	}{
		{"TypeScript v1, 2025 push", "erin", "client-v1.mjs", push, []string{"--url-mode"}, "elicitation"},
		{"TypeScript v1, 2025 error", "frank", "client-v1.mjs", errStyle, []string{"--url-mode"}, "url_required"},
		{"TypeScript v2, 2026-07-28", "grace", "client-v2.mjs", modern, []string{"--url-mode", "--negotiation", "pin"}, "elicitation"},
	} {
		if tc.x == nil {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			key := demoKey()
			n := startNode(t, tc.script, &server{t: t, MCPURL: tc.x.mcpURL}, tc.x.token(t, tc.user), append(tc.flags, args...)...)
			ev := n.next(tc.first, firstAsk)
			link := ev.URL
			if tc.first == "url_required" {
				link = ev.Elicitations[0].URL
			}
			newPerson(t, sharedBrowser(t), tc.user).completeSecret(t, link, key)
			if res := n.next("result", time.Minute); !strings.Contains(string(res.Result), "Sunny in Paris") {
				t.Fatalf("result %s", res.Result)
			}
			n.finish()
			requireNoKey(t, key, n.Traffic(), tc.x.proc.Output())
		})
	}
}

// claudeCodeCell runs Claude Code (2026-07-28) against an example server of its own, which
// start starts in push style with more flags, as a parallel subtest of t.
func claudeCodeCell(t *testing.T, start func(flags ...string) *example) {
	t.Run("Claude Code, 2026-07-28", func(t *testing.T) {
		t.Parallel()
		// Claude Code sends a progress token with every call: its retry waits, with progress,
		// until the user finishes, although the user takes longer than three bounded waits.
		const boundedWait = time.Second
		slow := start("--retry-wait", boundedWait.String(), "--progress-interval", "300ms")
		key := demoKey()
		cc := startClaudeCode(t, &server{t: t, MCPURL: slow.mcpURL}, slow.token(t, "heidi"), "accept")
		done := make(chan map[string]any, 1)
		go func() { done <- cc.call("forecast", map[string]any{"city": "Paris"}) }()
		asked := cc.waitHook(1)[0]
		link, _ := asked["url"].(string)
		time.Sleep(3*boundedWait + boundedWait/2)
		newPerson(t, sharedBrowser(t), "heidi").completeSecret(t, link, key)
		select {
		case res := <-done:
			if res["forecast"] != "sunny" || res["apiStatus"] != float64(200) {
				t.Fatalf("forecast through Claude Code: %v", res)
			}
		case <-time.After(claudeCodeWait):
			t.Fatal("the call did not end after the browser step")
		}
		if n := len(cc.hookInputs()); n != 1 {
			t.Errorf("the user was asked %d times, want once", n)
		}
		requireNoKey(t, key, slow.proc.Output())
	})
}

// requireNoKey fails if key appears in any of places: what a client and the delegating
// server saw.
func requireNoKey(t *testing.T, key string, places ...string) {
	t.Helper()
	for i, p := range places {
		if strings.Contains(p, key) {
			t.Errorf("place %d carries the key", i)
		}
	}
}

// TestTheExampleServerSaysToStartUrlflowFirstAndStopsCleanly: started without urlflow dev,
// each example (Go, TypeScript on the SDK v1 and v2) says to start it first and exits 1;
// started beside it, Ctrl-C stops it with exit status 0.
func TestTheExampleServerSaysToStartUrlflowFirstAndStopsCleanly(t *testing.T) {
	t.Parallel()
	requireTypeScriptBuild(t)
	for _, tc := range []struct {
		name string
		argv []string
	}{
		{"Go", []string{exampleBinary}},
		{"TypeScript v1", []string{"node", "../clients/typescript/example/weather.mjs"}},
		{"TypeScript v2", []string{"node", "../clients/typescript/example/weather-v2.mjs"}},
	} {
		command := func(addr string) *exec.Cmd {
			cmd := exec.Command(tc.argv[0], append(tc.argv[1:], "--addr", addr)...)
			cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
			return cmd
		}
		t.Run(tc.name+", without urlflow", func(t *testing.T) {
			t.Parallel()
			cmd := command(fmt.Sprintf("127.0.0.1:%d", redistest.FreePort(t)))
			cmd.Env = append(cmd.Env, fmt.Sprintf("URLFLOW_URL=http://127.0.0.1:%d", redistest.FreePort(t)))
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), "start it first with go run ./cmd/urlflow dev") {
				t.Errorf("the example without urlflow: %v\n%s", err, out)
			}
		})
		t.Run(tc.name+", ctrl-c", func(t *testing.T) {
			t.Parallel()
			x := startExampleCommand(t, command)
			if err := x.proc.cmd.Process.Signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
			select {
			case <-x.proc.exited:
			case <-time.After(10 * time.Second):
				t.Fatal("the example did not stop on Ctrl-C")
			}
			if code := x.proc.cmd.ProcessState.ExitCode(); code != 0 {
				t.Errorf("the example exited %d on Ctrl-C, want 0:\n%s", code, x.proc.output.String())
			}
		})
	}
}
