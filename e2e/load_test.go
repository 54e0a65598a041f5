package e2e

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"maps"
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
	"github.com/urlflow/urlflow/state/flow"
)

// BenchmarkLoad runs whole secret flows for 8, 32 and 128 users at once against the real
// binary (`urlflow dev`, rate limits off) and a real redis-server, as they happen in use,
// in three ways (loadMode): push style, error style and the 2026-07-28 era. Each user has
// a go-sdk client that declares URL mode and a browser (plain HTTP with cookies, signed in
// before the flows start) that opens the consent page, continues, loads the form and posts
// a new key, which urlflow checks with the demo API. It reports flows per second, the CPU time per
// flow of urlflow, redis-server and this harness (with the counting proxy between urlflow
// and Redis, which runs in it), the Redis commands and round trips per flow (redisProxy,
// background work left out), flow latency percentiles, the time from the final POST's
// answer to the completion notification (2025 era), how often the client saw the result
// before the notification (push style), and errors, which must be 0. It logs the Redis
// commands per flow by name as Redis counted them (INFO commandstats: the commands that
// scripts run count there too). URLFLOW_BENCH_REDIS_RTT (for example 500us) adds that
// latency to every round trip to Redis, as a network would.
//
//	go test -run='^$' -bench=Load -benchtime=400x ./e2e
//	URLFLOW_BENCH_REDIS_RTT=500us go test -run='^$' -bench=Load/push -benchtime=400x ./e2e
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
	pid := serverPID(b, rs)
	for _, mode := range []loadMode{loadPush, loadError, loadModern} {
		b.Run(string(mode), func(b *testing.B) {
			s := startServer(b, serverConfig{RedisURL: "redis://" + proxy.addr, Style: mode.style(),
				Env: []string{"URLFLOW_RATE_LIMIT_MCP=off", "URLFLOW_RATE_LIMIT_FORMS=off"}})
			for _, users := range []int{8, 32, 128} {
				b.Run(fmt.Sprintf("users=%d", users), func(b *testing.B) {
					runLoad(b, s, mode, users, proxy, rs, pid)
				})
			}
		})
	}
}

// runLoad runs b.N flows of mode for users users at once, and reports what BenchmarkLoad
// says.
func runLoad(b *testing.B, s *server, mode loadMode, users int, proxy *redisProxy, rs *redistest.Server, redisPID int) {
	workers := newLoadUsers(b, s, mode, users)
	commandsBefore := commandStats(b, rs)
	b.ResetTimer()
	run := runFlows(b, s, workers, b.N, proxy, redisPID)
	b.StopTimer()
	run.report(b, mode)
	if n := run.stats.errors.Load(); n > 0 {
		b.Errorf("%d of %d flows failed (each said why above)", n, b.N)
	}
	b.Logf("Redis commands per flow (INFO commandstats): %s", commandStats(b, rs).perFlowSince(commandsBefore, float64(b.N)))
}

// newLoadUsers returns users users of s, each signed in and connected.
func newLoadUsers(b testing.TB, s *server, mode loadMode, users int) []*loadUser {
	var workers []*loadUser
	for i := range users {
		workers = append(workers, newLoadUser(b, s, mode, fmt.Sprintf("load-%d-%d", users, i)))
	}
	return workers
}

// loadRun is what one run of flows measured.
type loadRun struct {
	flows int
	wall  time.Duration
	// cpu is the CPU time of the server, redis-server and this harness during the run;
	// startCPU what each had used when it began.
	cpu, startCPU [3]time.Duration
	redisCmds     int64
	redisTrips    int64
	stats         *loadStats
}

// runFlows runs n flows, the workers each running one after another at once, and measures
// them: the server's CPU is that of s and of its other replicas (also). proxy is nil, and
// redisPID 0, for a server without Redis (the anchor).
func runFlows(b testing.TB, s *server, workers []*loadUser, n int, proxy *redisProxy, redisPID int, also ...*server) loadRun {
	stats := &loadStats{}
	next := atomic.Int64{}
	replicas := slices.Compact(append([]*server{s}, also...)) // also may be s itself
	serverCPU := func() (d time.Duration) {
		for _, replica := range replicas {
			d += processCPU(replica.cmd.Process.Pid)
		}
		return d
	}
	cpuBefore := [3]time.Duration{serverCPU(), processCPU(redisPID), ownCPU()}
	var redisBefore redisWork
	if proxy != nil {
		redisBefore = proxy.snapshot()
	}
	start := time.Now()
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				stats.add(w.flow(b))
			}
		})
	}
	wg.Wait()
	run := loadRun{flows: n, wall: time.Since(start), stats: stats, startCPU: cpuBefore,
		cpu: [3]time.Duration{serverCPU(), processCPU(redisPID), ownCPU()}}
	for i := range run.cpu {
		run.cpu[i] -= cpuBefore[i]
	}
	if proxy != nil {
		redisAfter := proxy.snapshot()
		run.redisCmds, run.redisTrips = redisAfter.total()-redisBefore.total(), redisAfter.trips-redisBefore.trips
	}
	return run
}

// flowsPerSecond is the run's throughput.
func (r loadRun) flowsPerSecond() float64 { return float64(r.flows) / r.wall.Seconds() }

// cpuPerFlow is the CPU time per flow of the server (0), redis-server (1) or the harness
// (2), in milliseconds.
func (r loadRun) cpuPerFlow(who int) float64 {
	return float64(r.cpu[who].Microseconds()) / 1000 / float64(r.flows)
}

// report reports what BenchmarkLoad says of the run of mode.
func (r loadRun) report(b *testing.B, mode loadMode) {
	n, stats := float64(r.flows), r.stats
	b.ReportMetric(r.flowsPerSecond(), "flows/s")
	b.ReportMetric(float64(r.redisCmds)/n, "redis-cmds/flow")
	b.ReportMetric(float64(r.redisTrips)/n, "redis-trips/flow")
	for i, who := range []string{"urlflow", "redis", "harness"} {
		b.ReportMetric(r.cpuPerFlow(i), who+"-cpu-ms/flow")
	}
	b.ReportMetric(stats.percentile(flowTime, 50), "flow-p50-ms")
	b.ReportMetric(stats.percentile(flowTime, 99), "flow-p99-ms")
	b.ReportMetric(stats.percentile(flowTime, 100), "flow-max-ms")
	b.ReportMetric(stats.percentile(pageTime, 50), "page-p50-ms")
	b.ReportMetric(stats.percentile(pageTime, 99), "page-p99-ms")
	if mode != loadModern { // no notification in that era
		b.ReportMetric(stats.percentile(func(r flowResult) time.Duration { return r.postToNotify }, 50), "post-to-notify-p50-ms")
		b.ReportMetric(stats.percentile(func(r flowResult) time.Duration { return r.postToNotify }, 99), "post-to-notify-p99-ms")
	}
	if mode == loadPush {
		// The go-sdk client runs notification handlers apart from the call that receives
		// its result, so this counts the order in which the client saw them, not the order
		// on the wire (mcp's TestPushWritesTheNotificationBeforeTheResultOnTheCallsStream).
		b.ReportMetric(float64(stats.resultFirst.Load())/n, "result-seen-first/flow")
	}
	b.ReportMetric(float64(stats.errors.Load()), "errors")
	b.ReportMetric(0, "ns/op") // wall time per flow says nothing with many users at once
}

func flowTime(r flowResult) time.Duration { return r.flow }
func pageTime(r flowResult) time.Duration { return r.page }

// loadMode is how BenchmarkLoad's flows go.
type loadMode string

const (
	// loadPush: 2025-11-25, push style. set_secret sends elicitation/create, which the
	// client accepts, and waits for the flow; the completion notification and the call's
	// `stored` end the flow.
	loadPush loadMode = "push"
	// loadError: 2025-11-25, error style. set_secret answers −32042 with the link; the
	// completion notification arrives, and the client calls set_secret again: `stored`.
	loadError loadMode = "error"
	// loadModern: 2026-07-28. set_secret answers input_required with the link, the client
	// accepts and retries, and the retry waits for the flow: `stored`. No notification.
	loadModern loadMode = "2026-07-28"
)

// style returns URLFLOW_ELICITATION_STYLE for mode.
func (m loadMode) style() string {
	if m == loadError {
		return "error"
	}
	return "push"
}

// loadUser is one user of BenchmarkLoad: an MCP client and a signed-in browser.
type loadUser struct {
	mode     loadMode
	s        *server
	name     string
	baseURL  string
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

func newLoadUser(b testing.TB, s *server, mode loadMode, name string) *loadUser {
	return newLoadUserAcross(b, s, s, mode, name)
}

// newLoadUserAcross returns a user whose client speaks to s and whose browser opens the
// pages on pages: another replica of s, or s itself.
func newLoadUserAcross(b testing.TB, s, pages *server, mode loadMode, name string) *loadUser {
	u := &loadUser{mode: mode, s: s, name: name, baseURL: s.BaseURL, browser: newFormBrowser(b, pages, name), elicited: make(chan *sdk.ElicitParams, 1),
		notified: map[string]time.Time{}, wake: make(chan struct{}, 1)}
	if page := u.browser.signIn("/"); page.Status != http.StatusSeeOther {
		b.Fatalf("sign-in of %s: %d %s", name, page.Status, page.Text())
	}
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
	version := "2025-11-25" // push and error style, with the notification
	if mode == loadModern {
		version = modern
	}
	c := sdk.NewClient(&sdk.Implementation{Name: "load", Version: "1"}, opts)
	cs, err := c.Connect(b.Context(), &sdk.StreamableClientTransport{
		Endpoint: s.MCPURL, HTTPClient: &http.Client{Transport: &recorder{token: s.devToken(name), base: ownTransport(b)}}},
		&sdk.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	u.session = cs
	return u
}

// flowResult is what one flow measured; failed flows carry err.
type flowResult struct {
	// flow is from the first call to `stored`; page is the slowest of the flow's page
	// requests, and pages each one's time (flowPages); postToNotify is from the final
	// POST's answer to the notification.
	flow, page, postToNotify time.Duration
	pages                    [len(flowPages)]time.Duration
	resultFirst              bool
	err                      error
	// id is the flow's elicitation; secret the value posted, and stored whether the page
	// said it was stored (even when the flow failed after that).
	id, secret string
	stored     bool
}

// callAnswer is the outcome of a tool call and when it arrived.
type callAnswer struct {
	res *sdk.CallToolResult
	err error
	at  time.Time
}

// String says what the call answered: its error, or its result's text.
func (a callAnswer) String() string {
	if a.err != nil {
		return a.err.Error()
	}
	return fmt.Sprintf("isError=%v %s", a.res.IsError, text(a.res))
}

// flow runs one whole flow.
func (u *loadUser) flow(b testing.TB) flowResult {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	done := make(chan callAnswer, 1)
	go func() {
		res, err := u.session.CallTool(ctx, &sdk.CallToolParams{Name: "set_secret",
			Arguments: map[string]any{"name": "demo_api_key", "replace": true}})
		done <- callAnswer{res, err, time.Now()}
	}()
	var p *sdk.ElicitParams
	if u.mode == loadError {
		a := <-done
		ps, err := elicitationsOf(a.err)
		if err != nil {
			return flowResult{err: fmt.Errorf("set_secret: %w", err)}
		}
		p = ps[0]
	} else {
		select {
		case p = <-u.elicited:
		case a := <-done:
			return flowResult{err: fmt.Errorf("set_secret answered before asking: %s; %s", a, u.whyNoPrompt())}
		}
	}
	id := cmp.Or(p.ElicitationID, strings.TrimPrefix(p.URL, u.baseURL+"/e/")) // the 2026 input request has no ID
	if u.beforeOpen != nil {
		u.beforeOpen(id)
	}
	var r flowResult
	// page requests one page and checks its status; the slowest is the flow's page latency.
	step := 0
	page := func(what string, want int, request func() webPage) (webPage, error) {
		began := time.Now()
		pg := request()
		r.pages[step] = time.Since(began)
		r.page, step = max(r.page, r.pages[step]), step+1
		if pg.Status != want {
			return pg, fmt.Errorf("%s: %d", what, pg.Status)
		}
		return pg, nil
	}
	onPages := strings.Replace(p.URL, u.baseURL, u.browser.s.BaseURL, 1) // the browser's replica
	consent, err := page("consent page", http.StatusOK, func() webPage { return u.browser.open(onPages) })
	if err != nil {
		return flowResult{err: err}
	}
	if _, err := page("continue", http.StatusSeeOther, func() webPage {
		return u.browser.post("/e/"+id+"/continue", url.Values{"csrf": {consent.csrf(b)}})
	}); err != nil {
		return flowResult{err: err}
	}
	form, err := page("form page", http.StatusOK, func() webPage { return u.browser.get("/e/" + id + "/secret") })
	if err != nil {
		return flowResult{err: err}
	}
	secret := "demo_" + rand.Text()
	posted, err := page("form post", http.StatusOK, func() webPage {
		return u.browser.post("/e/"+id+"/secret", url.Values{"csrf": {form.csrf(b)}, "secret": {secret}})
	})
	if err != nil {
		return flowResult{err: err, id: id}
	}
	r.id, r.secret, r.stored = id, secret, strings.Contains(strings.ToLower(posted.Text()), "stored")
	failed := func(err error) flowResult { return flowResult{err: err, id: id, secret: secret, stored: r.stored} }
	postAnswered := time.Now()
	if u.mode == loadError {
		notifiedAt, err := u.notification(ctx, id)
		if err != nil {
			return failed(err)
		}
		r.postToNotify = max(0, notifiedAt.Sub(postAnswered))
		res, err := u.session.CallTool(ctx, &sdk.CallToolParams{Name: "set_secret", Arguments: map[string]any{"name": "demo_api_key"}})
		done <- callAnswer{res, err, time.Now()}
	}
	a := <-done
	if a.err != nil || a.res.IsError || !strings.Contains(fmt.Sprint(a.res.StructuredContent), "stored") {
		return failed(fmt.Errorf("set_secret: %s", a))
	}
	r.flow = time.Since(start)
	if u.mode == loadPush {
		notifiedAt, err := u.notification(ctx, id)
		if err != nil {
			return failed(err)
		}
		r.postToNotify, r.resultFirst = max(0, notifiedAt.Sub(postAnswered)), a.at.Before(notifiedAt)
	}
	return r
}

// flowPages names the page requests of a flow, in order.
var flowPages = [...]string{"consent page", "continue", "form page", "form post"}

// whyNoPrompt says what urlflow recorded for a call that never asked: the state and the
// newest history entry of each flow of the user that has not ended well, as the user reads
// them through the API. A call that produced no elicitation/create must have left its
// reason there (the flow unknown, with the transport's error).
func (u *loadUser) whyNoPrompt() string {
	token := u.s.devToken(u.name)
	var page flow.Listing
	if status := u.s.getJSON("/api/v1/elicitations?state=pending,consented,in_progress,unknown&limit=20", token, &page); status != http.StatusOK {
		return fmt.Sprintf("the user's flows could not be listed (%d)", status)
	}
	var out []string
	for _, l := range page.Elicitations {
		var v flow.View
		u.s.getJSON("/api/v1/elicitations/"+l.ID, token, &v)
		last := "no history"
		if len(v.History) > 0 {
			e := v.History[len(v.History)-1]
			last = fmt.Sprintf("%s by %s: %s", e.Event, e.Actor, e.Reason)
		}
		out = append(out, fmt.Sprintf("%s %s (%s)", l.ID[:8], v.State, last))
	}
	if len(out) == 0 {
		return "no flow of the user is running or unknown"
	}
	return "the user's flows that did not end well: " + strings.Join(out, "; ")
}

// notification waits for the completion notification of elicitation id and returns when
// it arrived.
func (u *loadUser) notification(ctx context.Context, id string) (time.Time, error) {
	for {
		u.mu.Lock()
		at, ok := u.notified[id]
		delete(u.notified, id)
		u.mu.Unlock()
		if ok {
			return at, nil
		}
		select {
		case <-u.wake:
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("no completion notification for %s", id)
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

// redisCommands counts the commands Redis ran, by name (INFO commandstats).
type redisCommands map[string]int64

// commandStats reads what rs counted.
func commandStats(b *testing.B, rs *redistest.Server) redisCommands {
	info, err := rs.Client(b).Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	out := redisCommands{}
	for line := range strings.Lines(info) {
		// cmdstat_get:calls=12,usec=...
		name, rest, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "cmdstat_"), ":calls=")
		if !ok {
			continue
		}
		calls, _ := strconv.ParseInt(rest[:strings.IndexByte(rest+",", ',')], 10, 64)
		out[name] = calls
	}
	return out
}

// perFlowSince returns the commands run since before, per flow, the most first, without
// the INFO commands that read them.
func (c redisCommands) perFlowSince(before redisCommands, flows float64) string {
	names := slices.Collect(maps.Keys(c))
	slices.SortFunc(names, func(a, b string) int { return cmp.Compare(c[b]-before[b], c[a]-before[a]) })
	var parts []string
	var total int64
	for _, name := range names {
		if d := c[name] - before[name]; d > 0 && name != "info" {
			parts = append(parts, fmt.Sprintf("%s %.2f", name, float64(d)/flows))
			total += d
		}
	}
	return fmt.Sprintf("%.2f in all: %s", float64(total)/flows, strings.Join(parts, ", "))
}
