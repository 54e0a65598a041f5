package e2e

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/urlflow/urlflow/internal/redistest"
)

// BenchmarkLoad runs whole secret flows for many users at once against the real binary
// (`urlflow dev`, push style, rate limits off) and a real redis-server, as they happen in
// use: each user's go-sdk client, declaring URL mode, calls set_secret, receives
// elicitation/create and accepts; the user's browser (plain HTTP with cookies, signed in on
// the first flow) opens the consent page, continues, loads the form and posts a new key,
// which urlflow checks with the demo API; the client receives the completion notification
// and the call's `stored`. It reports flows per second, the CPU time per flow of urlflow,
// redis-server and this harness (with the counting proxy between urlflow and Redis, which
// runs in it), the Redis commands and round trips per flow (redisProxy, background work
// left out), flow latency percentiles, the time from the final POST's answer to the
// notification, how often the client saw the result before the notification, and errors,
// which must be 0. URLFLOW_BENCH_REDIS_RTT (for example 500us) adds that latency to every
// round trip to Redis, as a network would.
//
//	go test -run='^$' -bench=Load -benchtime=400x ./e2e
//	URLFLOW_BENCH_REDIS_RTT=500us go test -run='^$' -bench=Load -benchtime=400x ./e2e
func BenchmarkLoad(b *testing.B) {
	if raceEnabled {
		b.Skip("benchmark without -race")
	}
	rs := redistest.Start(b)
	proxy := startRedisProxy(b, rs.Addr)
	if rtt := os.Getenv("URLFLOW_BENCH_REDIS_RTT"); rtt != "" {
		d, err := time.ParseDuration(rtt)
		if err != nil {
			b.Fatalf("URLFLOW_BENCH_REDIS_RTT: %v", err)
		}
		proxy.delay = d
	}
	s := startServer(b, serverConfig{RedisURL: "redis://" + proxy.addr, Style: "push",
		Env: []string{"URLFLOW_RATE_LIMIT_MCP=off", "URLFLOW_RATE_LIMIT_FORMS=off"}})
	redisPID, err := rs.Client(b).InfoMap(context.Background(), "server").Result()
	if err != nil {
		b.Fatal(err)
	}
	pid, _ := strconv.Atoi(redisPID["Server"]["process_id"])
	for _, users := range []int{8, 32} {
		b.Run(fmt.Sprintf("users=%d", users), func(b *testing.B) {
			var workers []*loadUser
			for i := range users {
				workers = append(workers, newLoadUser(b, s, fmt.Sprintf("load-%d-%d", users, i)))
			}
			var stats loadStats
			next := atomic.Int64{}
			cpuBefore := [3]time.Duration{processCPU(s.cmd.Process.Pid), processCPU(pid), ownCPU()}
			redisBefore := proxy.snapshot()
			start := time.Now()
			b.ResetTimer()
			var wg sync.WaitGroup
			for _, w := range workers {
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						stats.add(w.flow(b))
					}
				})
			}
			wg.Wait()
			wall := time.Since(start)
			b.StopTimer()
			cpu := [3]time.Duration{processCPU(s.cmd.Process.Pid), processCPU(pid), ownCPU()}
			n := float64(b.N)
			b.ReportMetric(n/wall.Seconds(), "flows/s")
			redisAfter := proxy.snapshot()
			b.ReportMetric(float64(redisAfter.total()-redisBefore.total())/n, "redis-cmds/flow")
			b.ReportMetric(float64(redisAfter.trips-redisBefore.trips)/n, "redis-trips/flow")
			for i, who := range []string{"urlflow", "redis", "harness"} {
				b.ReportMetric(float64((cpu[i]-cpuBefore[i]).Microseconds())/1000/n, who+"-cpu-ms/flow")
			}
			b.ReportMetric(stats.percentile(func(r flowResult) time.Duration { return r.flow }, 50), "flow-p50-ms")
			b.ReportMetric(stats.percentile(func(r flowResult) time.Duration { return r.flow }, 99), "flow-p99-ms")
			b.ReportMetric(stats.percentile(func(r flowResult) time.Duration { return r.postToNotify }, 50), "post-to-notify-p50-ms")
			b.ReportMetric(stats.percentile(func(r flowResult) time.Duration { return r.postToNotify }, 99), "post-to-notify-p99-ms")
			// The go-sdk client runs notification handlers apart from the call that receives
			// its result, so this counts the order in which the client saw them, not the
			// order on the wire (mcp's TestPushWritesTheNotificationBeforeTheResultOnTheCallsStream).
			b.ReportMetric(float64(stats.resultFirst.Load())/n, "result-seen-first/flow")
			b.ReportMetric(float64(stats.errors.Load()), "errors")
			b.ReportMetric(0, "ns/op") // wall time per flow says nothing with many users at once
		})
	}
}

// loadUser is one user of BenchmarkLoad: an MCP client and a signed-in browser.
type loadUser struct {
	session  *sdk.ClientSession
	browser  *formBrowser
	elicited chan *sdk.ElicitParams
	// beforeOpen, if set, runs before the browser opens the link of elicitation id. Unset
	// (the load benchmark), the browser opens it at once, racing the client's accept.
	beforeOpen func(id string)

	mu       sync.Mutex
	notified map[string]time.Time // first completion notification of each elicitation
	wake     chan struct{}
}

func newLoadUser(b testing.TB, s *server, name string) *loadUser {
	u := &loadUser{browser: newFormBrowser(b, s, name), elicited: make(chan *sdk.ElicitParams, 1),
		notified: map[string]time.Time{}, wake: make(chan struct{}, 1)}
	opts := &sdk.ClientOptions{
		Capabilities: &sdk.ClientCapabilities{Elicitation: &sdk.ElicitationCapabilities{URL: &sdk.URLElicitationCapabilities{}}},
		ElicitationHandler: func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			u.elicited <- req.Params
			return &sdk.ElicitResult{Action: "accept"}, nil
		},
		ElicitationCompleteHandler: func(_ context.Context, req *sdk.ElicitationCompleteNotificationRequest) {
			u.mu.Lock()
			if _, seen := u.notified[req.Params.ElicitationID]; !seen {
				u.notified[req.Params.ElicitationID] = time.Now()
			}
			u.mu.Unlock()
			select {
			case u.wake <- struct{}{}:
			default:
			}
		},
	}
	c := sdk.NewClient(&sdk.Implementation{Name: "load", Version: "1"}, opts)
	cs, err := c.Connect(b.Context(), &sdk.StreamableClientTransport{
		Endpoint: s.MCPURL, HTTPClient: &http.Client{Transport: &recorder{token: s.devToken(name)}}},
		&sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"}) // push style and its notification
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	u.session = cs
	return u
}

// flowResult is what one flow measured; failed flows carry err.
type flowResult struct {
	flow, postToNotify time.Duration
	resultFirst        bool
	err                error
}

// flow runs one whole flow.
func (u *loadUser) flow(b testing.TB) flowResult {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	type answer struct {
		res *sdk.CallToolResult
		err error
		at  time.Time
	}
	done := make(chan answer, 1)
	go func() {
		res, err := u.session.CallTool(ctx, &sdk.CallToolParams{Name: "set_secret",
			Arguments: map[string]any{"name": "demo_api_key", "replace": true}})
		done <- answer{res, err, time.Now()}
	}()
	var p *sdk.ElicitParams
	select {
	case p = <-u.elicited:
	case a := <-done:
		return flowResult{err: fmt.Errorf("set_secret answered before asking: %v %v", a.err, a.res)}
	}
	id := p.ElicitationID
	if u.beforeOpen != nil {
		u.beforeOpen(id)
	}
	consent := u.browser.open(p.URL)
	if consent.Status != http.StatusOK {
		return flowResult{err: fmt.Errorf("consent page: %d", consent.Status)}
	}
	if page := u.browser.post("/e/"+id+"/continue", url.Values{"csrf": {consent.csrf(b)}}); page.Status != http.StatusSeeOther {
		return flowResult{err: fmt.Errorf("continue: %d", page.Status)}
	}
	form := u.browser.get("/e/" + id + "/secret")
	posted := u.browser.post("/e/"+id+"/secret", url.Values{"csrf": {form.csrf(b)}, "secret": {"demo_" + rand.Text()}})
	postAnswered := time.Now()
	if posted.Status != http.StatusOK {
		return flowResult{err: fmt.Errorf("form post: %d", posted.Status)}
	}
	a := <-done
	if a.err != nil || a.res.IsError || !strings.Contains(fmt.Sprint(a.res.StructuredContent), "stored") {
		return flowResult{err: fmt.Errorf("set_secret: %v %v", a.err, a.res)}
	}
	for {
		u.mu.Lock()
		at, ok := u.notified[id]
		delete(u.notified, id)
		u.mu.Unlock()
		if ok {
			return flowResult{flow: time.Since(start), postToNotify: max(0, at.Sub(postAnswered)), resultFirst: a.at.Before(at)}
		}
		select {
		case <-u.wake:
		case <-ctx.Done():
			return flowResult{err: fmt.Errorf("no completion notification for %s", id)}
		}
	}
}

// loadStats gathers the flows' results.
type loadStats struct {
	mu          sync.Mutex
	results     []flowResult
	errors      atomic.Int64
	resultFirst atomic.Int64
}

func (s *loadStats) add(r flowResult) {
	if r.err != nil {
		s.errors.Add(1)
		fmt.Fprintln(os.Stderr, "load flow failed:", r.err)
		return
	}
	if r.resultFirst {
		s.resultFirst.Add(1)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.results = append(s.results, r)
}

// percentile returns the pth percentile of what of the successful flows, in milliseconds.
func (s *loadStats) percentile(what func(flowResult) time.Duration, p int) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.results) == 0 {
		return 0
	}
	ds := make([]time.Duration, len(s.results))
	for i, r := range s.results {
		ds[i] = what(r)
	}
	slices.Sort(ds)
	return float64(ds[min(len(ds)-1, len(ds)*p/100)].Microseconds()) / 1000
}

// processCPU returns the CPU time (user and system) process pid has used, from /proc.
func processCPU(pid int) time.Duration {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name, which is in parentheses and may hold spaces.
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	const ticksPerSecond = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / ticksPerSecond
}

// ownCPU returns the CPU time this process has used.
func ownCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
