package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/urlflow/urlflow/internal/redistest"
)

// redisProxy stands between urlflow and its redis-server and counts what urlflow sends:
// each command by name, and round trips (a batch of commands written after an answer, or
// on a new connection, begins one, however many commands it pipelines). Commands that a
// server-side script runs are not sent, so they do not count, and neither do the batches of
// once-a-second background work (allBackground); the batches of a Cluster's index writes
// and audit events, which a replica sends for all its flows at once (queuedKinds), are
// counted apart. It
// forwards every byte as is.
type redisProxy struct {
	addr string
	// delay, when set before use, holds each batch back that long before it is forwarded:
	// the added latency of each round trip on a network.
	delay time.Duration

	mu       sync.Mutex
	commands map[string]int64
	trips    int64
	// queued counts the batches of queued writes by queue (queuedKinds).
	queued map[string]int64
	// trace, while tracing, lists each command sent with the key it names (never a value)
	// and when, since the trace began.
	tracing    bool
	traceStart time.Time
	trace      []string
}

func startRedisProxy(t testing.TB, target string) *redisProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &redisProxy{addr: ln.Addr().String(), commands: map[string]int64{}, queued: map[string]int64{}}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(conn, target)
		}
	}()
	return p
}

// startTrace starts listing the commands sent; stopTrace stops and returns the list.
func (p *redisProxy) startTrace() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tracing, p.traceStart, p.trace = true, time.Now(), nil
}

func (p *redisProxy) stopTrace() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tracing = false
	return p.trace
}

// snapshot returns the counts so far.
func (p *redisProxy) snapshot() redisWork {
	p.mu.Lock()
	defer p.mu.Unlock()
	return redisWork{commands: maps.Clone(p.commands), trips: p.trips, queued: maps.Clone(p.queued)}
}

func (p *redisProxy) serve(client net.Conn, target string) {
	defer client.Close()
	server, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer server.Close()
	var answered atomic.Bool // the server has answered since the last batch
	answered.Store(true)
	go func() {
		defer client.Close()
		buf := make([]byte, 64<<10)
		for {
			n, err := server.Read(buf)
			if n > 0 {
				answered.Store(true)
				if _, err := client.Write(buf[:n]); err != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	in := bufio.NewReaderSize(client, 64<<10)
	for {
		// A batch: the commands that have arrived together.
		var batch []byte
		var names, keys []string
		for {
			raw, name, key, err := readCommand(in)
			if err != nil {
				return
			}
			batch, names, keys = append(batch, raw...), append(names, name), append(keys, key)
			if in.Buffered() == 0 {
				break
			}
		}
		if p.delay > 0 {
			time.Sleep(p.delay)
		}
		p.mu.Lock()
		newTrip := answered.Swap(false)
		kinds := queuedKinds(names, keys)
		for _, k := range kinds {
			p.queued[k]++
		}
		if allBackground(names, keys) || kinds != nil { // not counted as a flow's
			p.mu.Unlock()
			if _, err := server.Write(batch); err != nil {
				return
			}
			continue
		}
		if newTrip {
			p.trips++
		}
		for i, n := range names {
			p.commands[n]++
			if p.tracing {
				mark := "  "
				if newTrip && i == 0 {
					mark = "> " // begins a round trip
				}
				at := time.Since(p.traceStart).Milliseconds()
				p.trace = append(p.trace, fmt.Sprintf("%s%5d ms %s %s", mark, at, n, keys[i]))
			}
		}
		p.mu.Unlock()
		if _, err := server.Write(batch); err != nil {
			return
		}
	}
}

// queuedKinds returns the queues a batch comes from, "index" (writes of the
// deployment-wide indexes) or "audit" (audit events) or both, or nil when it holds anything
// else. On a Redis Cluster, where a step's script cannot write those keys, a replica queues
// the writes and sends them for all its flows together, once a second (flow.indexQueue,
// audit.Trail.Later).
func queuedKinds(names, keys []string) []string {
	var index, audit bool
	for i, n := range names {
		k := keys[i]
		switch {
		case (n == "zadd" || n == "zrem") && (k == "urlflow:deadlines" || strings.HasPrefix(k, "urlflow:{flows:")):
			index = true
		case n == "xadd" && strings.HasPrefix(k, "urlflow:{audit:"):
			audit = true
		default:
			return nil
		}
	}
	var kinds []string
	if index {
		kinds = append(kinds, "index")
	}
	if audit {
		kinds = append(kinds, "audit")
	}
	return kinds
}

// allBackground reports whether a batch is only urlflow's periodic work, whatever the
// number of flows: the sweeper's scan of the deadline index, the webhook sender's of the
// due webhooks, the counters written for /metrics, the rate-limit counts shared between
// replicas, the replica's heartbeat (every 3 s), a new connection's set-up, and a Cluster
// client's reading of the slot map.
func allBackground(names, keys []string) bool {
	for i, n := range names {
		k := keys[i]
		switch {
		case n == "zrangebyscore" && (k == "urlflow:deadlines" || k == "urlflow:wh:due" || k == "urlflow:wh:due:cred"):
		// The notifier's sweep for notifications owed to ended sessions (every 3 s on a
		// replica's heartbeat), which read the owed buckets: on a Cluster a node sees its
		// share of them in a batch of their own.
		case n == "zrangebyscore" && strings.HasSuffix(k, "}:owed"):
		case n == "hincrby" && k == "urlflow:counters":
		// The heartbeat's key has a slot of its own: on a Cluster it lands on the user's
		// node in one run of three, where it once counted as a flow's (one flow in three
		// saw a ninth round trip).
		case n == "set" && strings.HasPrefix(k, "urlflow:replica:"):
		case (n == "evalsha" || n == "eval") && strings.Contains(k, "}:rl:"):
		case n == "script" || n == "hello" || n == "client" || n == "ping" || n == "cluster" || n == "readonly":
		default:
			return false
		}
	}
	return true
}

// readCommand reads one command in RESP (an array of bulk strings) and returns its bytes,
// its name in lower case, and the key it names (the first key of a script).
func readCommand(r *bufio.Reader) (raw []byte, name, key string, err error) {
	line, err := r.ReadBytes('\n')
	if err != nil {
		return nil, "", "", err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(string(line), "*")))
	if err != nil || line[0] != '*' {
		return nil, "", "", fmt.Errorf("not a RESP array: %q", line)
	}
	raw = line
	var args []string
	for range n {
		head, err := r.ReadBytes('\n')
		if err != nil {
			return nil, "", "", err
		}
		size, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(string(head), "$")))
		if err != nil {
			return nil, "", "", fmt.Errorf("not a bulk string: %q", head)
		}
		body := make([]byte, size+2)
		if _, err := io.ReadFull(r, body); err != nil {
			return nil, "", "", err
		}
		if len(args) < 4 {
			args = append(args, string(body[:size]))
		}
		raw = append(append(raw, head...), body...)
	}
	name = strings.ToLower(args[0])
	switch {
	case (name == "evalsha" || name == "eval") && len(args) > 3:
		key = args[3]
	case len(args) > 1:
		key = args[1]
	}
	return raw, name, key, nil
}

// redisWork is the Redis work of one step.
type redisWork struct {
	commands map[string]int64
	trips    int64
	queued   map[string]int64
	// trace lists the commands counted, when they were traced (redisProxy.startTrace).
	trace []string
}

func (w redisWork) total() int64 {
	var n int64
	for _, c := range w.commands {
		n += c
	}
	return n
}

func (w redisWork) String() string {
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range w.commands {
			if !yield(k) {
				return
			}
		}
	})
	var parts []string
	for _, n := range names {
		if w.commands[n] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", n, w.commands[n]))
		}
	}
	return strings.Join(parts, ", ")
}

// measure runs step and returns the Redis work done until it has settled: no round trip
// for 50 ms after it returned, so that work done in the background (the notification)
// counts with the step that caused it.
func measure(p *redisProxy, step func()) redisWork {
	return measureEach([]*redisProxy{p}, step)[0]
}

// measureEach is measure for the proxies of several servers (the nodes of a Cluster): the
// work each saw, once none has seen a round trip for 50 ms.
func measureEach(ps []*redisProxy, step func()) []redisWork {
	trips := func() (n int64) {
		for _, p := range ps {
			n += p.snapshot().trips
		}
		return n
	}
	before := make([]redisWork, len(ps))
	for i, p := range ps {
		before[i] = p.snapshot()
	}
	step()
	last := trips()
	for {
		time.Sleep(50 * time.Millisecond)
		now := trips()
		if now == last {
			break
		}
		last = now
	}
	work := make([]redisWork, len(ps))
	for i, p := range ps {
		work[i] = p.snapshot().since(before[i])
	}
	return work
}

// since returns the work of w, a snapshot, since snapshot before.
func (w redisWork) since(before redisWork) redisWork {
	d := redisWork{commands: map[string]int64{}, trips: w.trips - before.trips, queued: map[string]int64{}}
	for name, n := range w.commands {
		if c := n - before.commands[name]; c > 0 {
			d.commands[name] = c
		}
	}
	for kind, n := range w.queued {
		d.queued[kind] = n - before.queued[kind]
	}
	return d
}

// redisWorkBudget is the most Redis commands and round trips one whole secret flow may
// cost (TestRedisWorkPerFlowStaysWithinBudget). docs/performance.md ("Redis work per
// flow") has what a flow costs now.
const (
	redisWorkBudgetCommands = 12
	redisWorkBudgetTrips    = 8
)

// flowSteps names the steps of one secret flow as flowWork measures them.
var flowSteps = []string{"tool call (-32042)", "consent page", "continue", "form page", "form post (verify, store, notify)", "tool call again (stored)"}

// redisWorkServer starts urlflow (error style, the development user signed in, a key
// stored, rate limits counting) on a redis-server behind a counting proxy.
func redisWorkServer(tb testing.TB) (*redisProxy, *client, *formBrowser) {
	rs := redistest.Start(tb)
	proxy := startRedisProxy(tb, rs.Addr)
	s := startServer(tb, serverConfig{RedisURL: "redis://" + proxy.addr, Style: "error",
		Env: []string{"URLFLOW_RATE_LIMIT_MCP=100000000/1m", "URLFLOW_RATE_LIMIT_FORMS=100000000/1m"}})
	c := connect(tb, s, clientConfig{Token: s.Token, URLMode: true})
	dev := newFormBrowser(tb, s, "dev")
	storeSecretByPages(tb, c, dev, "demo_0123456789abcdef", false) // signed in, key stored
	return proxy, c, dev
}

// flowWork runs one whole secret flow that replaces the stored key, and returns the Redis
// work of each of its steps (flowSteps): the tool call that answers −32042, the consent
// page, Continue, the form, the post that verifies and stores the key (with the
// notification it causes), and the client's call again. When trace is set, it returns the
// commands of each step too. Each post carries the CSRF token of the page before it, as a
// browser's would.
func flowWork(tb testing.TB, proxy *redisProxy, c *client, dev *formBrowser, trace bool) ([]redisWork, [][]string) {
	ctx := context.Background()
	var id string
	var consent, form webPage // the pages whose forms the next step posts, as a browser does
	run := []func(){
		func() {
			_, err := c.Call(ctx, "set_secret", map[string]any{"name": "demo_api_key", "replace": true})
			id = urlElicitationRequired(tb, err)[0].ElicitationID
		},
		func() {
			consent = dev.get("/e/" + id)
			expectStatus(tb, consent, http.StatusOK)
		},
		func() {
			expectStatus(tb, dev.post("/e/"+id+"/continue", url.Values{"csrf": {consent.csrf(tb)}}), http.StatusSeeOther)
		},
		func() {
			form = dev.get("/e/" + id + "/secret")
			expectStatus(tb, form, http.StatusOK)
		},
		func() {
			expectStatus(tb, dev.post("/e/"+id+"/secret", url.Values{"csrf": {form.csrf(tb)}, "secret": {"demo_0123456789abcdef"}}), http.StatusOK)
			c.waitCompletion(id, 30*time.Second)
		},
		func() { callOK(tb, c, "set_secret", map[string]any{"name": "demo_api_key"}) },
	}
	work := make([]redisWork, len(run))
	var traces [][]string
	for i, step := range run {
		if trace {
			proxy.startTrace()
		}
		work[i] = measure(proxy, step)
		if trace {
			traces = append(traces, proxy.stopTrace())
		}
	}
	return work, traces
}

// TestRedisWorkPerFlowStaysWithinBudget counts the Redis commands and round trips of whole
// secret flows, as the real binary sends them to a real redis-server, and fails when the
// cheapest of five flows costs more than redisWorkBudget (12 commands in 8 round trips):
// work that a flow does not cause (a step that finds what it started from changed runs
// again; a reopened stream or subscription makes the notifier check what it owes) only
// adds, and is rare.
func TestRedisWorkPerFlowStaysWithinBudget(t *testing.T) {
	t.Parallel()
	proxy, c, dev := redisWorkServer(t)
	var best redisWork
	for i := range 6 {
		work, _ := flowWork(t, proxy, c, dev, false)
		total := redisWork{commands: map[string]int64{}}
		for _, w := range work {
			total.trips += w.trips
			for name, n := range w.commands {
				total.commands[name] += n
			}
		}
		if i == 0 {
			continue // the first flow loads the scripts
		}
		if i == 1 || total.total() < best.total() || (total.total() == best.total() && total.trips < best.trips) {
			best = total
		}
	}
	t.Logf("the cheapest flow: %d commands in %d round trips (%s)", best.total(), best.trips, best)
	if best.total() > redisWorkBudgetCommands || best.trips > redisWorkBudgetTrips {
		t.Errorf("a whole secret flow costs %d Redis commands in %d round trips, over the budget of %d in %d: %s\n"+
			"go test -run='^$' -bench=RedisWorkPerFlow -benchtime=3x -v ./e2e shows each step's commands",
			best.total(), best.trips, redisWorkBudgetCommands, redisWorkBudgetTrips, best)
	}
}

// TestRedisWorkPerWaitingFlowStaysWithinBudget is TestRedisWorkPerFlowStaysWithinBudget
// for the flows in which the tool call waits, as BenchmarkLoad runs them: push style (the
// client accepts elicitation/create) and the 2026-07-28 era (the client accepts the input
// request and retries). The call answers `stored` once the browser has posted the key.
// The browser opens the link 100 ms after the accept is recorded (the test reads Redis
// directly, not through the proxy), as with a browser that takes any time at all to
// start; when the two race, one of their steps runs again (docs/performance.md).
func TestRedisWorkPerWaitingFlowStaysWithinBudget(t *testing.T) {
	t.Parallel()
	for _, mode := range []loadMode{loadPush, loadModern} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			rs := redistest.Start(t)
			proxy := startRedisProxy(t, rs.Addr)
			s := startServer(t, serverConfig{RedisURL: "redis://" + proxy.addr, Style: mode.style(),
				Env: []string{"URLFLOW_RATE_LIMIT_MCP=100000000/1m", "URLFLOW_RATE_LIMIT_FORMS=100000000/1m"}})
			u := newLoadUser(t, s, mode, string(mode))
			direct := rs.Client(t)
			u.beforeOpen = func(id string) {
				keys, err := direct.Keys(t.Context(), "urlflow:*:e:"+id).Result()
				if err != nil || len(keys) != 1 {
					t.Fatalf("the record of %s: %v %v", id, keys, err)
				}
				for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
					if doc, _ := direct.Get(t.Context(), keys[0]).Result(); strings.Contains(doc, `"state":"consented"`) {
						// The record says so before urlflow has the script's answer; a browser
						// takes longer than this to start.
						time.Sleep(100 * time.Millisecond)
						return
					}
				}
				t.Fatalf("the client's accept of %s was not recorded", id)
			}
			var best redisWork
			for i := range 6 {
				w := measure(proxy, func() {
					if r := u.flow(t); r.err != nil {
						t.Fatal(r.err)
					}
				})
				if i == 0 {
					continue // signs in, loads the scripts
				}
				if i == 1 || w.total() < best.total() || (w.total() == best.total() && w.trips < best.trips) {
					best = w
				}
			}
			t.Logf("the cheapest flow: %d commands in %d round trips (%s)", best.total(), best.trips, best)
			if best.total() > redisWorkBudgetCommands || best.trips > redisWorkBudgetTrips {
				t.Errorf("a whole %s secret flow costs %d Redis commands in %d round trips, over the budget of %d in %d: %s",
					mode, best.total(), best.trips, redisWorkBudgetCommands, redisWorkBudgetTrips, best)
			}
		})
	}
}

// BenchmarkRedisWorkPerFlow counts the Redis commands and round trips of one whole secret
// flow, step by step (flowWork). The counts do not depend on the machine; each figure is
// the median over the iterations.
//
//	go test -run='^$' -bench=RedisWorkPerFlow -benchtime=20x -v ./e2e
func BenchmarkRedisWorkPerFlow(b *testing.B) {
	if raceEnabled {
		b.Skip("benchmark without -race")
	}
	proxy, c, dev := redisWorkServer(b)
	work := make([][]redisWork, len(flowSteps))
	var traces [][]string // of the second flow
	for iteration := 0; b.Loop(); iteration++ {
		last := iteration == 1 // the first flow loads the scripts
		steps, tr := flowWork(b, proxy, c, dev, last)
		for i, w := range steps {
			work[i] = append(work[i], w)
		}
		if last {
			traces = tr
		}
	}

	var cmds, trips int64
	var table strings.Builder
	fmt.Fprintf(&table, "\n%-36s %8s %8s  %s\n", "step", "commands", "trips", "commands by name (median iteration)")
	for i, name := range flowSteps {
		m := median(work[i])
		cmds, trips = cmds+m.total(), trips+m.trips
		fmt.Fprintf(&table, "%-36s %8d %8d  %s\n", name, m.total(), m.trips, m)
	}
	fmt.Fprintf(&table, "%-36s %8d %8d\n", "whole flow", cmds, trips)
	if testing.Verbose() {
		// The commands of the second flow, with the key each names ("> " begins a round
		// trip), on stdout: a benchmark's log is cut short.
		for i, tr := range traces {
			fmt.Printf("%s (second flow):\n  %s\n", flowSteps[i], strings.Join(tr, "\n  "))
		}
	}
	b.Log(table.String())
	b.ReportMetric(float64(cmds), "redis-cmds/flow")
	b.ReportMetric(float64(trips), "redis-trips/flow")
}

// median returns the measurement with the median number of commands.
func median(ws []redisWork) redisWork {
	sorted := slices.Clone(ws)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].total() < sorted[j].total() })
	return sorted[len(sorted)/2]
}

func expectStatus(tb testing.TB, page webPage, want int) {
	tb.Helper()
	if page.Status != want {
		tb.Fatalf("answered %d, want %d: %s", page.Status, want, page.Text())
	}
}
