package e2e

import (
	"bufio"
	"context"
	"fmt"
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

	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/internal/redistest"
)

// redisProxy stands between urlflow and its redis-server and counts round trips: a client
// write that follows an answer (or starts a connection) begins one, however many commands
// it pipelines. It forwards bytes as they come and changes nothing.
type redisProxy struct {
	addr   string
	trips  atomic.Int64
	listen net.Listener
}

func startRedisProxy(t testing.TB, target string) *redisProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &redisProxy{addr: ln.Addr().String(), listen: ln}
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

func (p *redisProxy) serve(client net.Conn, target string) {
	defer client.Close()
	server, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer server.Close()
	var mu sync.Mutex
	waiting := false // a request was sent and no answer has come back yet
	pipe := func(dst, src net.Conn, request bool) {
		buf := make([]byte, 64<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				mu.Lock()
				if request && !waiting {
					p.trips.Add(1)
				}
				waiting = request
				mu.Unlock()
				if _, err := dst.Write(buf[:n]); err != nil {
					return
				}
			}
			if err != nil {
				dst.Close()
				return
			}
		}
	}
	go pipe(client, server, false)
	pipe(server, client, true)
}

// commandStats reads the calls per command from INFO commandstats, leaving out INFO
// itself.
func commandStats(t testing.TB, rdb redis.UniversalClient) map[string]int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	stats := map[string]int64{}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		name, rest, ok := strings.Cut(strings.TrimPrefix(sc.Text(), "cmdstat_"), ":calls=")
		if !ok || name == "info" {
			continue
		}
		calls, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
		stats[name] = calls
	}
	return stats
}

// redisWork is the Redis work of one step.
type redisWork struct {
	commands map[string]int64
	trips    int64
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
func measure(t testing.TB, rdb redis.UniversalClient, p *redisProxy, step func()) redisWork {
	t.Helper()
	before, trips := commandStats(t, rdb), p.trips.Load()
	step()
	for last := p.trips.Load(); ; {
		time.Sleep(50 * time.Millisecond)
		now := p.trips.Load()
		if now == last {
			break
		}
		last = now
	}
	after := commandStats(t, rdb)
	w := redisWork{commands: map[string]int64{}, trips: p.trips.Load() - trips}
	for name, calls := range after {
		if d := calls - before[name]; d > 0 {
			w.commands[name] = d
		}
	}
	return w
}

// BenchmarkRedisWorkPerFlow counts the Redis commands and round trips of one whole secret
// flow, step by step, as the real binary does them against a real redis-server (through a
// counting proxy): the tool call that answers −32042, the consent page, Continue, the
// form, the post that verifies and stores the key (with the notification it causes), and
// the client's call again. The counts do not depend on the machine; each figure is the
// median over the iterations (the sweeper's once-a-second scan can land in any step).
//
//	go test -run='^$' -bench=RedisWorkPerFlow -benchtime=20x -v ./e2e
func BenchmarkRedisWorkPerFlow(b *testing.B) {
	if raceEnabled {
		b.Skip("benchmark without -race")
	}
	rs := redistest.Start(b)
	proxy := startRedisProxy(b, rs.Addr)
	s := startServer(b, serverConfig{RedisURL: "redis://" + proxy.addr, Style: "error",
		Env: []string{"URLFLOW_RATE_LIMIT_MCP=100000000/1m", "URLFLOW_RATE_LIMIT_FORMS=100000000/1m"}})
	c := connect(b, s, clientConfig{Token: s.Token, URLMode: true})
	dev := newFormBrowser(b, s, "dev")
	storeSecretByPages(b, c, dev, "demo_0123456789abcdef", false) // signed in, key stored
	rdb := rs.Client(b)

	steps := []string{"tool call (-32042)", "consent page", "continue", "form page", "form post (verify, store, notify)", "tool call again (stored)"}
	work := make([][]redisWork, len(steps))
	ctx := context.Background()
	for b.Loop() {
		var id string
		run := []func(){
			func() {
				_, err := c.Call(ctx, "set_secret", map[string]any{"name": "demo_api_key", "replace": true})
				id = urlElicitationRequired(b, err)[0].ElicitationID
			},
			func() { expectStatus(b, dev.get("/e/"+id), http.StatusOK) },
			func() {
				consent := dev.get("/e/" + id)
				expectStatus(b, dev.post("/e/"+id+"/continue", url.Values{"csrf": {consent.csrf(b)}}), http.StatusSeeOther)
			},
			func() { expectStatus(b, dev.get("/e/"+id+"/secret"), http.StatusOK) },
			func() {
				form := dev.get("/e/" + id + "/secret")
				expectStatus(b, dev.post("/e/"+id+"/secret", url.Values{"csrf": {form.csrf(b)}, "secret": {"demo_0123456789abcdef"}}), http.StatusOK)
				c.waitCompletion(id, 30*time.Second)
			},
			func() { callOK(b, c, "set_secret", map[string]any{"name": "demo_api_key"}) },
		}
		for i, step := range run {
			if i == 2 || i == 4 {
				// The page loaded only to find its CSRF token is not part of the step.
				work[i] = append(work[i], subtractPage(b, rdb, proxy, dev, id, i, step))
				continue
			}
			work[i] = append(work[i], measure(b, rdb, proxy, step))
		}
	}

	var cmds, trips int64
	var table strings.Builder
	fmt.Fprintf(&table, "\n%-36s %8s %8s  %s\n", "step", "commands", "trips", "commands by name (median iteration)")
	for i, name := range steps {
		m := median(work[i])
		cmds, trips = cmds+m.total(), trips+m.trips
		fmt.Fprintf(&table, "%-36s %8d %8d  %s\n", name, m.total(), m.trips, m)
	}
	fmt.Fprintf(&table, "%-36s %8d %8d\n", "whole flow", cmds, trips)
	b.Log(table.String())
	b.ReportMetric(float64(cmds), "redis-cmds/flow")
	b.ReportMetric(float64(trips), "redis-trips/flow")
}

// subtractPage measures step, which loads a page for its CSRF token first, without that
// load: it measures the load alone before, and takes it away.
func subtractPage(b *testing.B, rdb redis.UniversalClient, p *redisProxy, dev *formBrowser, id string, i int, step func()) redisWork {
	page := "/e/" + id
	if i == 4 {
		page += "/secret"
	}
	load := measure(b, rdb, p, func() { dev.get(page) })
	w := measure(b, rdb, p, step)
	w.trips -= load.trips
	for name, n := range load.commands {
		if w.commands[name] -= n; w.commands[name] <= 0 {
			delete(w.commands, name)
		}
	}
	return w
}

// median returns the measurement with the median number of commands.
func median(ws []redisWork) redisWork {
	sorted := slices.Clone(ws)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].total() < sorted[j].total() })
	return sorted[len(sorted)/2]
}

func expectStatus(b *testing.B, page webPage, want int) {
	b.Helper()
	if page.Status != want {
		b.Fatalf("answered %d, want %d: %s", page.Status, want, page.Text())
	}
}
