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
		if strings.Contains(g, "github.com/urlflow/urlflow/") && !strings.Contains(g, "urlflow/cmd/urlflow.Test") &&
			!strings.Contains(g, "testing.tRunner") {
			own = append(own, g)
		}
	}
	return own
}

// TestDevStopsEverythingItStartedBeforeItReturns runs `urlflow dev` with its embedded Redis,
// opens an MCP session, and stops it: run returns without an error, and by then no goroutine
// of urlflow's is left (the sweeper, the event hub, the MCP server's background work and
// the HTTP server all joined before Redis closed).
func TestDevStopsEverythingItStartedBeforeItReturns(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	ctx, stop := context.WithCancel(t.Context())
	stdout := &lockedBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"dev", "--addr", "127.0.0.1:0"}, envOf(nil), stdout, io.Discard)
	}()
	listening := regexp.MustCompile(`Listening on:\s+(\S+)`)
	deadline := time.Now().Add(30 * time.Second)
	var addr string
	for addr == "" {
		if m := listening.FindStringSubmatch(stdout.String()); m != nil {
			addr = m[1]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no banner within 30s:\n%s", stdout.String())
		}
		time.Sleep(20 * time.Millisecond) // the banner is the only sign of readiness
	}
	// An MCP session open at shutdown, as clients leave them.
	token := regexp.MustCompile(`Bearer token:\s+(\S+)`).FindStringSubmatch(stdout.String())[1]
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/mcp", strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("initialize: %v %v", resp, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	http.DefaultClient.CloseIdleConnections()

	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("urlflow dev stopped with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("urlflow dev did not stop within 30s")
	}
	if left := ownGoroutines(); len(left) > 0 {
		t.Fatalf("urlflow's goroutines still run after it returned:\n\n%s", strings.Join(left, "\n\n"))
	}
}
