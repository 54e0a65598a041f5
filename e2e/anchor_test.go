package e2e

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/internal/redistest"
	"github.com/urlflow/urlflow/upstream"
)

// BenchmarkFlowAgainstAnchor judges urlflow against the protocol's own cost: it runs
// push-style secret flows (BenchmarkLoad's, 32 users at once) against urlflow and against
// the anchor (e2e/anchor: the same requests and MCP messages answered from maps, with the
// same check of the key at the demo API, and nothing else), in alternating turns on the
// same machine, and reports each side's turns taken together: flows per second and CPU
// per flow of each (urlflow, its redis-server, the anchor), the ratios the performance
// goals are set in (urlflow's flows/s over the anchor's; urlflow's and Redis's CPU over
// the anchor's, with the anchor's own Redis when it has one), and the latency of a flow
// and of each page. b.N flows make a turn. urlflow's CPU in a
// turn counts what it and Redis used until its next turn (chargeDeferredWork).
//
//	go test -run='^$' -bench=FlowAgainstAnchor -benchtime=400x -v ./e2e
//
// URLFLOW_BENCH_USERS (32) and URLFLOW_BENCH_TURNS (5) change the users and the turns;
// URLFLOW_BENCH_DEBUG_ADDR serves urlflow's profiles there (go tool pprof
// http://ADDR/debug/pprof/profile?seconds=20 while the turns run);
// URLFLOW_BENCH_REPLICAS=2 runs urlflow as two replicas on one Redis, each user's client on
// the first and browser on the second; URLFLOW_BENCH_REDIS_RTT (for example 500us) delays
// every round trip to Redis, as a network would (through BenchmarkLoad's counting proxy,
// which runs in the harness and adds to its CPU); URLFLOW_BENCH_GOGC sets GOGC for urlflow
// and the anchor, not the harness (off: both without the garbage collector);
// URLFLOW_BENCH_ANCHOR_REDIS=1 has the anchor keep each step of a flow in a redis-server of
// its own (anchor -redis), whose CPU then counts in the anchor's.
func BenchmarkFlowAgainstAnchor(b *testing.B) {
	if raceEnabled {
		b.Skip("benchmark without -race")
	}
	users, turns, replicas := envInt(b, "URLFLOW_BENCH_USERS", 32), envInt(b, "URLFLOW_BENCH_TURNS", 5), envInt(b, "URLFLOW_BENCH_REPLICAS", 1)
	rs := redistest.Start(b)
	redisAddr := rs.Addr
	// Without a delay, urlflow talks to Redis directly: the counting proxy (BenchmarkLoad's)
	// runs in this process and would charge the machine's CPU to urlflow's side only.
	var proxy *redisProxy
	if rtt := os.Getenv("URLFLOW_BENCH_REDIS_RTT"); rtt != "" {
		d, err := time.ParseDuration(rtt)
		if err != nil {
			b.Fatalf("URLFLOW_BENCH_REDIS_RTT: %v", err)
		}
		proxy = startRedisProxy(b, rs.Addr)
		proxy.delay, redisAddr = d, proxy.addr
	}
	redisPID := serverPID(b, rs)

	home := b.TempDir() // the replicas' shared development keys
	cfg := serverConfig{RedisURL: "redis://" + redisAddr, Style: "push", ConfigHome: home,
		Env: []string{"URLFLOW_RATE_LIMIT_MCP=off", "URLFLOW_RATE_LIMIT_FORMS=off"}}
	gc := gcSetting()
	cfg.Env = append(cfg.Env, gc...)
	if addr := os.Getenv("URLFLOW_BENCH_DEBUG_ADDR"); addr != "" { // for profiles of the (first) replica
		cfg.Env = append(cfg.Env, "URLFLOW_DEBUG_ADDR="+addr)
	}
	mcpSide := startServer(b, cfg)
	cfg.Env = slices.DeleteFunc(cfg.Env, func(v string) bool { return strings.HasPrefix(v, "URLFLOW_DEBUG_ADDR=") })
	pageSide := mcpSide
	if replicas == 2 {
		cfg.PublicURL = mcpSide.BaseURL
		pageSide = startServer(b, cfg)
	} else if replicas != 1 {
		b.Fatalf("URLFLOW_BENCH_REPLICAS: 1 or 2, got %d", replicas)
	}
	var anchorFlags []string
	anchorRedisPID := 0
	if os.Getenv("URLFLOW_BENCH_ANCHOR_REDIS") == "1" {
		ars := redistest.Start(b)
		anchorFlags, anchorRedisPID = []string{"-redis", ars.Addr}, serverPID(b, ars)
	}
	anchor := startAnchor(b, gc, anchorFlags...)

	var urlflowUsers, anchorUsers []*loadUser
	onSide("urlflow", func() {
		for i := range users {
			urlflowUsers = append(urlflowUsers, newLoadUserAcross(b, mcpSide, pageSide, loadPush, fmt.Sprintf("anchored-%d", i)))
		}
		// A turn first, not counted: connections, Redis's scripts, the runtime's heaps.
		runFlows(b, mcpSide, urlflowUsers, min(b.N, 4*users), proxy, redisPID)
	})
	onSide("anchor", func() {
		anchorUsers = newLoadUsers(b, anchor, loadPush, users)
		runFlows(b, anchor, anchorUsers, min(b.N, 4*users), nil, anchorRedisPID)
	})
	stats := rs.Client(b)
	if err := stats.ConfigResetStat(context.Background()).Err(); err != nil {
		b.Fatalf("reset Redis's command statistics: %v", err)
	}

	var ofAnchor, ofURLflow []loadRun
	b.ResetTimer()
	for range turns {
		onSide("anchor", func() { ofAnchor = append(ofAnchor, runFlows(b, anchor, anchorUsers, b.N, nil, anchorRedisPID)) })
		onSide("urlflow", func() {
			ofURLflow = append(ofURLflow, runFlows(b, mcpSide, urlflowUsers, b.N, proxy, redisPID, pageSide))
		})
	}
	b.StopTimer()
	chargeDeferredWork(ofURLflow, redisPID, mcpSide, pageSide)
	reportAgainstAnchor(b, ofURLflow, ofAnchor)
	logRedisCommands(b, stats, turns*b.N)
}

// logRedisCommands logs what Redis did for the flows of urlflow's turns, from its command
// statistics: each command's calls and microseconds per flow. Redis counts the time a
// command runs, not the time it spends reading requests and writing answers, which its
// process's CPU (redis-cpu-ms/flow) includes.
func logRedisCommands(b *testing.B, rdb redis.UniversalClient, flows int) {
	info, err := rdb.InfoMap(context.Background(), "commandstats").Result()
	if err != nil {
		b.Errorf("read Redis's command statistics: %v", err)
		return
	}
	type command struct {
		name        string
		calls, usec float64
	}
	var commands []command
	var all command
	for name, fields := range info["Commandstats"] {
		if strings.HasPrefix(name, "cmdstat_config") {
			continue
		}
		c := command{name: strings.TrimPrefix(name, "cmdstat_")}
		for _, f := range strings.Split(fields, ",") {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "calls":
				c.calls, _ = strconv.ParseFloat(v, 64)
			case "usec":
				c.usec, _ = strconv.ParseFloat(v, 64)
			}
		}
		commands = append(commands, c)
		all.calls, all.usec = all.calls+c.calls, all.usec+c.usec
	}
	slices.SortFunc(commands, func(a, b command) int { return cmp.Compare(b.usec, a.usec) })
	var table strings.Builder
	fmt.Fprintf(&table, "Redis per flow (calls, µs running the command; a script's own commands count in it and again by name):\n")
	for _, c := range commands {
		fmt.Fprintf(&table, "  %-14s %6.2f calls %7.1f µs\n", c.name, c.calls/float64(flows), c.usec/float64(flows))
	}
	fmt.Fprintf(&table, "  %-14s %6.2f calls %7.1f µs", "all", all.calls/float64(flows), all.usec/float64(flows))
	b.Log(table.String())
}

// onSide runs fn with the profiler's label side (urlflow or anchor), which the goroutines
// it starts keep (the clients' and browsers' connections among them): a CPU profile of the
// benchmark (-cpuprofile) then tells the harness's work for each side apart, with
// go tool pprof -tagfocus=side=urlflow.
func onSide(side string, fn func()) {
	pprof.Do(context.Background(), pprof.Labels("side", side), func(context.Context) { fn() })
}

// settledAfter is how long urlflow goes on working for the flows of a turn once they have
// ended: it packs a settled flow's history 10 s later (state/flow's compactDelay).
const settledAfter = 12 * time.Second

// chargeDeferredWork counts in each of urlflow's turns (runs) the CPU that urlflow's
// replicas and Redis used from its start to the start of the next (the anchor's turn
// between them included, when urlflow is otherwise idle), and after the last turn until
// its flows have settled: the work a flow leaves for later (packing its history) falls in
// another turn, often the anchor's, and would otherwise go uncounted.
func chargeDeferredWork(runs []loadRun, redisPID int, replicas ...*server) {
	time.Sleep(settledAfter)
	var end [2]time.Duration
	for _, r := range slices.Compact(replicas) {
		end[0] += processCPU(r.cmd.Process.Pid)
	}
	end[1] = processCPU(redisPID)
	for i := range runs {
		next := end
		if i+1 < len(runs) {
			next = [2]time.Duration{runs[i+1].startCPU[0], runs[i+1].startCPU[1]}
		}
		runs[i].cpu[0], runs[i].cpu[1] = next[0]-runs[i].startCPU[0], next[1]-runs[i].startCPU[1]
	}
}

// reportAgainstAnchor reports the figures of urlflow's turns and of the anchor's, each
// side's turns taken as one run (whole), and logs each page's latency and each turn's
// figures. A whole run, not the median turn: the work urlflow defers (packing a settled
// flow's history 10 s later) mostly falls after the last turn and is charged to it
// (chargeDeferredWork), so the median turn would leave it out.
func reportAgainstAnchor(b *testing.B, ofURLflow, ofAnchor []loadRun) {
	u, a := whole(ofURLflow), whole(ofAnchor)
	b.ReportMetric(u.flowsPerSecond(), "urlflow-flows/s")
	b.ReportMetric(a.flowsPerSecond(), "anchor-flows/s")
	b.ReportMetric(u.flowsPerSecond()/a.flowsPerSecond(), "flows-ratio")
	b.ReportMetric(u.cpuPerFlow(0), "urlflow-cpu-ms/flow")
	b.ReportMetric(u.cpuPerFlow(1), "redis-cpu-ms/flow")
	b.ReportMetric(a.cpuPerFlow(0), "anchor-cpu-ms/flow")
	if a.cpu[1] > 0 { // the anchor's own Redis (URLFLOW_BENCH_ANCHOR_REDIS)
		b.ReportMetric(a.cpuPerFlow(1), "anchor-redis-cpu-ms/flow")
	}
	b.ReportMetric(u.cpuPerFlow(2), "harness-urlflow-cpu-ms/flow")
	b.ReportMetric(a.cpuPerFlow(2), "harness-anchor-cpu-ms/flow")
	b.ReportMetric((u.cpuPerFlow(0)+u.cpuPerFlow(1))/(a.cpuPerFlow(0)+a.cpuPerFlow(1)), "cpu-ratio")
	if u.redisTrips > 0 { // counted through the proxy
		b.ReportMetric(float64(u.redisTrips)/float64(u.flows), "redis-trips/flow")
	}
	b.ReportMetric(u.stats.percentile(flowTime, 50), "urlflow-flow-p50-ms")
	b.ReportMetric(u.stats.percentile(flowTime, 99), "urlflow-flow-p99-ms")
	b.ReportMetric(a.stats.percentile(flowTime, 50), "anchor-flow-p50-ms")
	b.ReportMetric(a.stats.percentile(flowTime, 99), "anchor-flow-p99-ms")
	b.ReportMetric(float64(u.stats.errors.Load()+a.stats.errors.Load()), "errors")
	b.ReportMetric(0, "ns/op")
	var table strings.Builder
	fmt.Fprintf(&table, "each page, p50 / p99 ms: urlflow | anchor\n")
	for i, name := range flowPages {
		at := func(r flowResult) time.Duration { return r.pages[i] }
		fmt.Fprintf(&table, "  %-12s %6.2f / %6.2f | %6.2f / %6.2f\n", name, u.stats.percentile(at, 50), u.stats.percentile(at, 99), a.stats.percentile(at, 50), a.stats.percentile(at, 99))
	}
	for i := range ofURLflow {
		u, a := ofURLflow[i], ofAnchor[i]
		fmt.Fprintf(&table, "  turn %d: urlflow %.0f flows/s, CPU per flow %.2f + Redis %.2f + harness %.2f ms; anchor %.0f flows/s, %.2f + Redis %.2f + harness %.2f ms\n",
			i+1, u.flowsPerSecond(), u.cpuPerFlow(0), u.cpuPerFlow(1), u.cpuPerFlow(2), a.flowsPerSecond(), a.cpuPerFlow(0), a.cpuPerFlow(1), a.cpuPerFlow(2))
	}
	b.Log(table.String())
	if n := u.stats.errors.Load() + a.stats.errors.Load(); n > 0 {
		b.Errorf("%d flows failed (each said why above)", n)
	}
}

// whole is runs taken as one: their flows, time, CPU and results added up.
func whole(runs []loadRun) loadRun {
	all := loadRun{stats: &loadStats{}}
	for _, r := range runs {
		all.flows += r.flows
		all.wall += r.wall
		for i := range all.cpu {
			all.cpu[i] += r.cpu[i]
		}
		all.redisCmds += r.redisCmds
		all.redisTrips += r.redisTrips
		all.stats.results = append(all.stats.results, r.stats.results...)
		all.stats.errors.Add(r.stats.errors.Load())
	}
	return all
}

// gcSetting is the garbage collector's setting for the servers (not the harness):
// URLFLOW_BENCH_GOGC as GOGC, to measure what the collector costs each.
func gcSetting() []string {
	if v := os.Getenv("URLFLOW_BENCH_GOGC"); v != "" {
		return []string{"GOGC=" + v}
	}
	return nil
}

// startAnchor builds e2e/anchor and starts it with env added to this process's, and flags
// added to its own.
func startAnchor(b *testing.B, env []string, flags ...string) *server {
	bin := filepath.Join(b.TempDir(), "anchor")
	if out, err := exec.Command("go", "build", "-o", bin, "./anchor").CombinedOutput(); err != nil {
		b.Fatalf("build the anchor: %v\n%s", err, out)
	}
	// As many idle connections to the demo API as urlflow keeps.
	cmd := exec.Command(bin, append([]string{"-idle-conns-per-host", strconv.Itoa(upstream.IdleConnsPerHost)}, flags...)...)
	cmd.Env = append(os.Environ(), env...)
	s, banner, err := launch(b, cmd, "MCP URL:")
	if err != nil {
		b.Fatal(err)
	}
	s.MCPURL = strings.TrimSpace(strings.TrimPrefix(banner, "MCP URL:"))
	s.BaseURL = strings.TrimSuffix(s.MCPURL, "/mcp")
	return s
}

// serverPID returns the process ID of rs.
func serverPID(b *testing.B, rs *redistest.Server) int {
	info, err := rs.Client(b).InfoMap(context.Background(), "server").Result()
	if err != nil {
		b.Fatal(err)
	}
	pid, _ := strconv.Atoi(info["Server"]["process_id"])
	return pid
}

// envInt returns the whole number in environment variable name, or def when it is unset.
func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s: want a whole number of 1 or more, got %q", name, v)
	}
	return n
}

// TestTheAnchorImportsNoMoreOfURLflowThanTheDemoAPI keeps the anchor minimal: a package of
// urlflow's brings its dependencies along (importing upstream for one constant brought 231
// packages: gRPC, OpenTelemetry, Redis, protobuf), with initialised globals that the
// anchor's collector scans at every cycle and that a minimal server does not have.
func TestTheAnchorImportsNoMoreOfURLflowThanTheDemoAPI(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "./anchor").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	allowed := []string{"github.com/urlflow/urlflow/e2e/anchor", "github.com/urlflow/urlflow/demoapi"}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "github.com/urlflow/urlflow/") && !slices.Contains(allowed, pkg) {
			t.Errorf("the anchor imports %s", pkg)
		}
	}
}
