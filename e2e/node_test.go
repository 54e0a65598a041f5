package e2e

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// nodeClient is one of the TypeScript SDK clients in e2e/node, run as a subprocess that
// prints one JSON event per line and reads commands from stdin (see e2e/node/README.md).
type nodeClient struct {
	t       *testing.T
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	events  chan nodeEvent
	exited  chan struct{}
	stderr  *syncBuffer
	traffic string
}

// nodeEvent is one line a node client prints.
type nodeEvent struct {
	Event           string          `json:"event"`
	Via             string          `json:"via"`
	Mode            string          `json:"mode"`
	URL             string          `json:"url"`
	ElicitationID   string          `json:"elicitationId"`
	ProtocolVersion string          `json:"protocolVersion"`
	Tool            string          `json:"tool"`
	Message         string          `json:"message"`
	Result          json.RawMessage `json:"result"`
	Elicitations    []struct {
		URL           string `json:"url"`
		ElicitationID string `json:"elicitationId"`
	} `json:"elicitations"`
}

// structured returns the structuredContent of a result event.
func (e nodeEvent) structured(t *testing.T) map[string]any {
	t.Helper()
	var r struct {
		StructuredContent map[string]any `json:"structuredContent"`
		IsError           bool           `json:"isError"`
	}
	if err := json.Unmarshal(e.Result, &r); err != nil {
		t.Fatalf("result event %s: %v", e.Result, err)
	}
	return r.StructuredContent
}

// startNode runs script (client-v1.mjs or client-v2.mjs) against s with token and args.
func startNode(t *testing.T, script string, s *server, token string, args ...string) *nodeClient {
	t.Helper()
	dir, err := filepath.Abs("node")
	if err != nil {
		t.Fatal(err)
	}
	for _, sdk := range []string{"@modelcontextprotocol/sdk", "@modelcontextprotocol/client"} {
		if _, err := npmPackage("node", sdk); err != nil {
			t.Fatal(err)
		}
	}
	n := &nodeClient{t: t, events: make(chan nodeEvent, 64), exited: make(chan struct{}), stderr: &syncBuffer{},
		traffic: filepath.Join(t.TempDir(), "traffic.log")}
	all := append([]string{filepath.Join(dir, script), "--url", s.MCPURL, "--token", token, "--traffic", n.traffic}, args...)
	n.cmd = exec.Command("node", all...)
	n.cmd.Stderr = n.stderr
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := n.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if n.stdin, err = n.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := n.cmd.Start(); err != nil {
		t.Fatalf("start node %s: %v", script, err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var ev nodeEvent
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				ev = nodeEvent{Event: "unparsed", Message: sc.Text()}
			}
			n.events <- ev
		}
		close(n.events)
	}()
	go func() { n.cmd.Wait(); close(n.exited) }()
	t.Cleanup(func() {
		n.stdin.Close()
		select {
		case <-n.exited:
		case <-time.After(5 * time.Second):
			n.cmd.Process.Kill()
			<-n.exited
		}
	})
	return n
}

// next returns the next event of kind, skipping others; an error event fails the test.
func (n *nodeClient) next(kind string, timeout time.Duration) nodeEvent {
	n.t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case ev, ok := <-n.events:
			if !ok {
				n.t.Fatalf("the node client ended before %q:\n%s", kind, n.stderr.String())
			}
			if ev.Event == "error" || ev.Event == "unparsed" {
				n.t.Fatalf("the node client failed waiting for %q: %s\n%s", kind, ev.Message, n.stderr.String())
			}
			if ev.Event == kind {
				return ev
			}
		case <-deadline:
			n.t.Fatalf("no %q event from the node client within %s:\n%s", kind, timeout, n.stderr.String())
		}
	}
}

// send writes a command line to the client.
func (n *nodeClient) send(line string) {
	n.t.Helper()
	if _, err := io.WriteString(n.stdin, line+"\n"); err != nil {
		n.t.Fatal(err)
	}
}

// finish waits for done and a clean exit.
func (n *nodeClient) finish() {
	n.t.Helper()
	n.next("done", time.Minute)
	n.stdin.Close()
	select {
	case <-n.exited:
		if code := n.cmd.ProcessState.ExitCode(); code != 0 {
			n.t.Fatalf("the node client exited %d:\n%s", code, n.stderr.String())
		}
	case <-time.After(30 * time.Second):
		n.t.Fatal("the node client did not exit after done")
	}
}

// Traffic returns every HTTP body the client sent and received.
func (n *nodeClient) Traffic() string {
	b, _ := os.ReadFile(n.traffic)
	return string(b)
}

// idFromURL returns the elicitation ID at the end of an elicitation URL.
func idFromURL(url string) string { return url[strings.LastIndex(url, "/")+1:] }
