package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/urlflow/urlflow/internal/redistest"
)

// BenchmarkOverhead compares urlflow with a bare go-sdk server (e2e/baresdk) that serves
// urlflow's own tool definitions, as urlflow lists them, with the SDK's defaults and
// nothing else. It reports each server's figure and their ratio for: the CPU each process
// uses per `ping` and per `tools/list` (b.N calls, one after another from one go-sdk
// client each, both servers measured in ten alternating turns so that the machine's drift
// touches both); and the memory each holds per idle 2025-11-25 session (b.N sessions of
// go-sdk clients, each with its stream open, one user per session on urlflow): its RSS,
// and the Go heap and stacks in use after a collection. urlflow runs as `urlflow dev` with
// its rate limits counting (set high enough never to refuse), against a real redis-server.
//
//	go test -run='^$' -bench=Overhead -benchtime=2000x ./e2e
func BenchmarkOverhead(b *testing.B) {
	if raceEnabled {
		b.Skip("benchmark without -race")
	}
	rs := redistest.Start(b)
	debug := [2]string{fmt.Sprintf("127.0.0.1:%d", redistest.FreePort(b)), fmt.Sprintf("127.0.0.1:%d", redistest.FreePort(b))}
	s := startServer(b, serverConfig{Redis: rs, Env: []string{"URLFLOW_MCP_SESSIONS_PER_USER=10000",
		"URLFLOW_RATE_LIMIT_MCP=100000000/1m", "URLFLOW_RATE_LIMIT_FORMS=100000000/1m", "URLFLOW_DEBUG_ADDR=" + debug[0]}})
	urlflow := connectIdle(b, s.MCPURL, s.Token)
	b.Cleanup(func() { urlflow.Close() })
	list, err := urlflow.ListTools(b.Context(), nil)
	if err != nil {
		b.Fatal(err)
	}
	bare := startBare(b, list.Tools, debug[1])
	bareClient := connectIdle(b, bare.MCPURL, "")
	b.Cleanup(func() { bareClient.Close() })
	servers := []overheadTarget{
		{"urlflow", s.cmd.Process.Pid, urlflow, func(i int) string { return s.devToken(fmt.Sprintf("idle-%d", i)) }, s.MCPURL, debug[0]},
		{"bare", bare.cmd.Process.Pid, bareClient, func(int) string { return "" }, bare.MCPURL, debug[1]},
	}
	calls := map[string]func(*sdk.ClientSession) error{
		"ping": func(cs *sdk.ClientSession) error { return cs.Ping(context.Background(), nil) },
		"tools-list": func(cs *sdk.ClientSession) error {
			_, err := cs.ListTools(context.Background(), nil)
			return err
		},
	}
	for _, name := range []string{"ping", "tools-list"} {
		b.Run(name, func(b *testing.B) {
			const turns = 10
			var cpu [2]time.Duration
			for turn := range turns {
				for i, t := range servers {
					n := b.N / turns
					if turn < b.N%turns {
						n++
					}
					before := processCPU(t.pid)
					for range n {
						if err := calls[name](t.session); err != nil {
							b.Fatalf("%s on %s: %v", name, t.name, err)
						}
					}
					cpu[i] += processCPU(t.pid) - before
				}
			}
			reportPair(b, "cpu-us/call", float64(cpu[0].Microseconds())/float64(b.N), float64(cpu[1].Microseconds())/float64(b.N))
		})
	}
	b.Run("idle-session", func(b *testing.B) {
		var mem [2]memory
		for i, t := range servers {
			mem[i] = t.idleSessionMemory(b, b.N)
		}
		reportPair(b, "rss-kB/session", mem[0].rss, mem[1].rss)
		b.ReportMetric(mem[0].heap, "urlflow-heap-kB/session")
		b.ReportMetric(mem[1].heap, "bare-heap-kB/session")
		b.ReportMetric(mem[0].stack, "urlflow-stack-kB/session")
		b.ReportMetric(mem[1].stack, "bare-stack-kB/session")
		b.ReportMetric((mem[0].heap+mem[0].stack)/(mem[1].heap+mem[1].stack), "live-ratio")
	})
}

// overheadTarget is one of the servers BenchmarkOverhead compares.
type overheadTarget struct {
	name    string
	pid     int
	session *sdk.ClientSession
	// token returns the bearer token of the ith idle session's user ("" for none).
	token  func(i int) string
	mcpURL string
	// debugAddr serves the process's net/http/pprof.
	debugAddr string
}

// memory is what a process holds, in kB: its resident set, and of the Go heap and
// goroutine stacks what is in use after a collection.
type memory struct{ rss, heap, stack float64 }

// idleSessionMemory opens n sessions, each with its stream open, and returns how much the
// server's memory grew per session once it settled. The sessions close at the end. The
// RSS also holds garbage not yet collected and depends on when the collector last ran;
// the heap and stacks in use after a collection do not.
func (t overheadTarget) idleSessionMemory(b *testing.B, n int) memory {
	tokens := make([]string, n)
	for i := range tokens {
		tokens[i] = t.token(i)
	}
	settle := func() memory {
		time.Sleep(2 * time.Second)
		m := memory{rss: float64(processRSS(b, t.pid))}
		m.heap, m.stack = liveMemory(b, t.debugAddr)
		return m
	}
	before := settle()
	sessions := make([]*sdk.ClientSession, n)
	var wg sync.WaitGroup
	next := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range next {
				sessions[i] = connectIdle(b, t.mcpURL, tokens[i])
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	after := settle()
	for _, cs := range sessions {
		cs.Close()
	}
	perSession := func(after, before float64) float64 { return (after - before) / float64(n) }
	return memory{perSession(after.rss, before.rss), perSession(after.heap, before.heap), perSession(after.stack, before.stack)}
}

// liveMemory returns the heap and the goroutine stacks in use in the process that serves
// net/http/pprof on debugAddr, in kB, after a collection it makes.
func liveMemory(b *testing.B, debugAddr string) (heap, stack float64) {
	body := heapProfile(b, debugAddr, "debug=1&gc=1")
	return memStat(b, body, "HeapInuse"), memStat(b, body, "Stack")
}

// heapProfile returns the heap profile of the process that serves net/http/pprof on
// debugAddr, with query (debug=1 for text, gc=1 to collect first).
func heapProfile(b *testing.B, debugAddr, query string) []byte {
	b.Helper()
	resp, err := http.Get("http://" + debugAddr + "/debug/pprof/heap?" + query)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	return body
}

// memStat returns the figure called name ("# HeapInuse = N", "# Stack = IN_USE / SYS") of
// a text heap profile, in kB.
func memStat(b *testing.B, profile []byte, name string) float64 {
	b.Helper()
	m := regexp.MustCompile(`(?m)^# ` + name + ` = (\d+)\b`).FindSubmatch(profile)
	if m == nil {
		b.Fatalf("no %s in the heap profile", name)
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v / 1024
}

// reportPair reports urlflow's figure, the bare server's and their ratio.
func reportPair(b *testing.B, unit string, urlflow, bare float64) {
	b.ReportMetric(urlflow, "urlflow-"+unit)
	b.ReportMetric(bare, "bare-"+unit)
	if bare > 0 {
		b.ReportMetric(urlflow/bare, "ratio")
	}
	b.ReportMetric(0, "ns/op")
}

// startBare builds e2e/baresdk and starts it with tools, serving its profiles on debugAddr.
func startBare(b *testing.B, tools []*sdk.Tool, debugAddr string) *server {
	dir := b.TempDir()
	raw, err := json.Marshal(tools)
	if err != nil {
		b.Fatal(err)
	}
	toolsFile := filepath.Join(dir, "tools.json")
	if err := os.WriteFile(toolsFile, raw, 0o600); err != nil {
		b.Fatal(err)
	}
	bin := filepath.Join(dir, "baresdk")
	if out, err := exec.Command("go", "build", "-o", bin, "./baresdk").CombinedOutput(); err != nil {
		b.Fatalf("build baresdk: %v\n%s", err, out)
	}
	s, banner, err := launch(b, exec.Command(bin, "-tools", toolsFile, "-debug-addr", debugAddr), "MCP URL:")
	if err != nil {
		b.Fatal(err)
	}
	s.MCPURL = strings.TrimSpace(strings.TrimPrefix(banner, "MCP URL:"))
	return s
}

// connectIdle starts a 2025-11-25 session declaring URL mode, as urlflow's clients do,
// with bearer token unless it is empty.
func connectIdle(b *testing.B, url, token string) *sdk.ClientSession {
	c := sdk.NewClient(&sdk.Implementation{Name: "overhead", Version: "1"}, &sdk.ClientOptions{
		Capabilities: &sdk.ClientCapabilities{Elicitation: &sdk.ElicitationCapabilities{URL: &sdk.URLElicitationCapabilities{}}},
	})
	cs, err := c.Connect(b.Context(), &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: &recorder{token: token}}},
		&sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		b.Fatalf("connect to %s: %v", url, err)
	}
	return cs
}

// processRSS returns the resident set size of process pid, in kB.
func processRSS(b *testing.B, pid int) int64 {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kB, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				b.Fatalf("VmRSS: %q", rest)
			}
			return kB
		}
	}
	b.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}
