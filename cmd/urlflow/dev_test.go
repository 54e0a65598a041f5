package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is a bytes.Buffer that a process's output and a test can share.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// ownGoroutines returns the stacks of the goroutines running urlflow's code, apart from
// the test's own.
func ownGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var own []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		running, _, _ := strings.Cut(g, "\ncreated by ")
		if strings.Contains(g, "created by github.com/urlflow/urlflow/cmd/urlflow.startDev") &&
			!strings.Contains(running, "github.com/urlflow/urlflow/") {
			continue // startDev's goroutine, still exiting after it handed over run's error
		}
		if strings.Contains(g, "github.com/urlflow/urlflow/") && !strings.Contains(g, "urlflow/cmd/urlflow.Test") &&
			!strings.Contains(g, "testing.tRunner") {
			own = append(own, g)
		}
	}
	return own
}

// startDev runs `urlflow dev` on a free port with env, and returns its address once its
// banner is out, its output, a function that stops it and the channel of run's error.
func startDev(t *testing.T, env map[string]string) (addr string, stdout, stderr *lockedBuffer, stop func(), done chan error) {
	t.Helper()
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	ctx, stop := context.WithCancel(t.Context())
	stdout, stderr = &lockedBuffer{}, &lockedBuffer{}
	done = make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"dev", "--addr", "127.0.0.1:0"}, envOf(env), nil, stdout, stderr)
	}()
	listening := regexp.MustCompile(`Listening on:\s+(\S+)`)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m := listening.FindStringSubmatch(stdout.String()); m != nil {
			return m[1], stdout, stderr, stop, done
		}
		if time.Now().After(deadline) {
			t.Fatalf("no banner within 30s:\n%s", stdout.String())
		}
		time.Sleep(20 * time.Millisecond) // the banner is the only sign of readiness
	}
}

// TestDevStopsEverythingItStartedBeforeItReturns runs `urlflow dev` with its embedded Redis,
// opens an MCP session, and stops it: run returns without an error, and by then no goroutine
// of urlflow's is left (the sweeper, the event hub, the MCP server's background work and
// the HTTP server all joined before Redis closed).
func TestDevStopsEverythingItStartedBeforeItReturns(t *testing.T) {
	addr, stdout, _, stop, done := startDev(t, nil)
	// An MCP session open at shutdown, as clients leave them.
	token := regexp.MustCompile(`Bearer token:\s+(\S+)`).FindStringSubmatch(stdout.String())[1]
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/mcp", strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := testClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("initialize: %v %v", resp, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	testClient.CloseIdleConnections()

	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("urlflow dev stopped with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("urlflow dev did not stop within 30s")
	}
	// A goroutine that has done its work may still be on its way out for a moment (one
	// that context.AfterFunc started, say); one that stays is a leak.
	left := ownGoroutines()
	for deadline := time.Now().Add(2 * time.Second); len(left) > 0 && time.Now().Before(deadline); left = ownGoroutines() {
		time.Sleep(10 * time.Millisecond)
	}
	if len(left) > 0 {
		t.Fatalf("urlflow's goroutines still run after it returned:\n\n%s", strings.Join(left, "\n\n"))
	}
}

// TestProfilingIsServedOnlyOnItsOwnListener: with URLFLOW_DEBUG_ADDR, net/http/pprof answers
// there and not on the main address.
func TestProfilingIsServedOnlyOnItsOwnListener(t *testing.T) {
	addr, _, stderr, stop, done := startDev(t, map[string]string{"URLFLOW_DEBUG_ADDR": "127.0.0.1:0"})
	defer func() { stop(); <-done }()
	m := regexp.MustCompile(`profiling listener.* addr=(\S+)`).FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("no log line names the profiling listener:\n%s", stderr.String())
	}
	for _, tt := range []struct {
		url  string
		want int
	}{
		{"http://" + m[1] + "/debug/pprof/", http.StatusOK},
		{"http://" + m[1] + "/debug/pprof/goroutine?debug=1", http.StatusOK},
		{"http://" + addr + "/debug/pprof/", http.StatusNotFound},
	} {
		resp, err := testClient.Get(tt.url)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("GET %s = %d, want %d", tt.url, resp.StatusCode, tt.want)
		}
	}
}
