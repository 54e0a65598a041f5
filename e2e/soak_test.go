package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/urlflow/urlflow/internal/redistest"
)

// BenchmarkSoak runs b.N whole secret flows (push style, 32 users at once, rate limits off)
// through one replica and reports where its memory went: its RSS, the Go heap in use after
// a collection (live data), the heap the runtime holds but does not use (idle, not yet
// returned to the system) and the goroutine stacks, before the flows (the 32 sessions
// open), right after them, and after two minutes idle (the store's copies of records
// expire). It logs the heap profile's difference after the flows (go tool pprof -top
// -base); URLFLOW_SOAK_PROFILES names a directory to keep the profiles in. It takes two
// minutes more than its flows. docs/performance.md records a run:
//
//	go test -run='^$' -bench=Soak -benchtime=60000x ./e2e
func BenchmarkSoak(b *testing.B) {
	if raceEnabled {
		b.Skip("benchmark without -race")
	}
	rs := redistest.Start(b)
	debugAddr := fmt.Sprintf("127.0.0.1:%d", redistest.FreePort(b))
	s := startServer(b, serverConfig{Redis: rs, Style: "push", Env: []string{"URLFLOW_RATE_LIMIT_MCP=off",
		"URLFLOW_RATE_LIMIT_FORMS=off", "URLFLOW_DEBUG_ADDR=" + debugAddr}})
	const users = 32
	workers := make([]*loadUser, users)
	for i := range workers {
		workers[i] = newLoadUser(b, s, loadPush, fmt.Sprintf("soak-%d", i))
	}
	dir := b.TempDir()
	before := runtimeMemory(b, s, debugAddr, filepath.Join(dir, "before.pprof"))
	var next, failed atomic.Int64
	b.ResetTimer()
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if r := w.flow(b); r.err != nil {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	time.Sleep(2 * time.Second) // the flows' background work (deliveries, index batches) settles
	after := runtimeMemory(b, s, debugAddr, filepath.Join(dir, "after.pprof"))
	// Then idle past the two minutes the store keeps its copies of records for.
	time.Sleep(2*time.Minute + 5*time.Second)
	idle := runtimeMemory(b, s, debugAddr, filepath.Join(dir, "idle.pprof"))
	for _, m := range []struct {
		name                string
		before, after, idle float64
	}{
		{"rss", before.rss, after.rss, idle.rss}, {"heap-inuse", before.heapInuse, after.heapInuse, idle.heapInuse},
		{"heap-idle-unreturned", before.idleUnreturned, after.idleUnreturned, idle.idleUnreturned},
		{"stacks", before.stack, after.stack, idle.stack},
	} {
		b.ReportMetric(m.before/1024, m.name+"-MB-before")
		b.ReportMetric(m.after/1024, m.name+"-MB-after")
		b.ReportMetric(m.idle/1024, m.name+"-MB-idle")
	}
	b.ReportMetric(float64(failed.Load()), "errors")
	b.ReportMetric(0, "ns/op")
	out, err := exec.Command("go", "tool", "pprof", "-top", "-nodecount=15", "-sample_index=inuse_space",
		"-base", filepath.Join(dir, "before.pprof"), filepath.Join(dir, "after.pprof")).CombinedOutput()
	if err != nil {
		b.Logf("go tool pprof: %v\n%s", err, out)
	}
	b.Logf("live heap after the soak, less before it:\n%s", out)
	if dump := os.Getenv("URLFLOW_SOAK_PROFILES"); dump != "" {
		for _, name := range []string{"before.pprof", "after.pprof", "idle.pprof", "before.pprof.txt", "after.pprof.txt", "idle.pprof.txt"} {
			if data, err := os.ReadFile(filepath.Join(dir, name)); err == nil {
				os.WriteFile(filepath.Join(dump, name), data, 0o600)
			}
		}
	}
}

// processMemory is what runtimeMemory reads of a process, in kB.
type processMemory struct{ rss, heapInuse, idleUnreturned, stack float64 }

// runtimeMemory reads the RSS of s's process and, from its net/http/pprof on debugAddr
// after a collection, the heap in use, the idle heap not returned to the system and the
// stacks; it saves the heap profile at profile.
func runtimeMemory(b *testing.B, s *server, debugAddr, profile string) processMemory {
	b.Helper()
	if err := os.WriteFile(profile, heapProfile(b, debugAddr, "gc=1"), 0o600); err != nil {
		b.Fatal(err)
	}
	text := heapProfile(b, debugAddr, "debug=1&gc=1")
	if err := os.WriteFile(profile+".txt", text, 0o600); err != nil {
		b.Fatal(err)
	}
	return processMemory{rss: float64(processRSS(b, s.cmd.Process.Pid)), heapInuse: memStat(b, text, "HeapInuse"),
		idleUnreturned: memStat(b, text, "HeapIdle") - memStat(b, text, "HeapReleased"), stack: memStat(b, text, "Stack")}
}
