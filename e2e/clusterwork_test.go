package e2e

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/urlflow/urlflow/internal/redistest"
)

// clusterBehindProxies starts a Redis Cluster of n primaries, each behind a counting proxy
// (redisProxy) that the node announces as its address, so that a Cluster client, which
// learns the nodes' addresses from the cluster itself, reaches each node through its
// proxy. It returns the proxies in node order and the cluster's URL through them.
func clusterBehindProxies(tb testing.TB, n int) ([]*redisProxy, string) {
	c := redistest.StartCluster(tb, n)
	ctx := context.Background()
	var proxies []*redisProxy
	var ports []string
	for _, node := range c.Nodes {
		p := startRedisProxy(tb, node.Addr)
		_, port, _ := net.SplitHostPort(p.addr)
		if err := node.Client(tb).ConfigSet(ctx, "cluster-announce-port", port).Err(); err != nil {
			tb.Fatalf("cluster node %s: announce port %s: %v", node.Addr, port, err)
		}
		proxies, ports = append(proxies, p), append(ports, port)
	}
	// Every node tells the others its new address by gossip: wait until each names only
	// the proxies.
	deadline := time.Now().Add(30 * time.Second)
	for _, node := range c.Nodes {
		for {
			nodes, err := node.Client(tb).ClusterNodes(ctx).Result()
			if err == nil && announcesOnly(nodes, ports) {
				break
			}
			if time.Now().After(deadline) {
				tb.Fatalf("cluster node %s does not name the proxies %v:\n%s (%v)", node.Addr, ports, nodes, err)
			}
			time.Sleep(50 * time.Millisecond) // gossip has no event to wait on
		}
	}
	// The first node, the others as addr parameters (go-redis' ParseClusterURL).
	url := "redis://" + proxies[0].addr
	sep := "?"
	for _, p := range proxies[1:] {
		url += sep + "addr=" + p.addr
		sep = "&"
	}
	return proxies, url
}

// announcesOnly reports whether a CLUSTER NODES answer gives every node one of ports.
func announcesOnly(nodes string, ports []string) bool {
	for line := range strings.Lines(strings.TrimSpace(nodes)) {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			return false
		}
		// ip:port@busport
		hostPort, _, _ := strings.Cut(fields[1], "@")
		_, port, _ := net.SplitHostPort(hostPort)
		if !slices.Contains(ports, port) {
			return false
		}
	}
	return true
}

// clusterWorkServer starts urlflow as redisWorkServer does, on a Redis Cluster of three
// primaries behind counting proxies (clusterBehindProxies), and runs one flow first, which
// loads the scripts on every node.
func clusterWorkServer(tb testing.TB) ([]*redisProxy, *client, *formBrowser) {
	proxies, url := clusterBehindProxies(tb, 3)
	s := startServer(tb, serverConfig{RedisURL: url, Style: "error", Env: []string{"URLFLOW_REDIS_TOPOLOGY=cluster",
		"URLFLOW_RATE_LIMIT_MCP=100000000/1m", "URLFLOW_RATE_LIMIT_FORMS=100000000/1m"}})
	c := connect(tb, s, clientConfig{Token: s.Token, URLMode: true})
	dev := newFormBrowser(tb, s, "dev")
	storeSecretByPages(tb, c, dev, "demo_0123456789abcdef", false) // signed in, key stored
	flowWork(tb, proxies[0], c, dev, false)
	return proxies, c, dev
}

// clusterFlowWork runs one whole secret flow (flowWork) and returns the Redis work each
// node saw, with its trace. (flowWork's own per-step counts see one node only.)
func clusterFlowWork(tb testing.TB, proxies []*redisProxy, c *client, dev *formBrowser) []redisWork {
	for _, p := range proxies {
		p.startTrace()
	}
	work := measureEach(proxies, func() { flowWork(tb, proxies[0], c, dev, false) })
	for i, p := range proxies {
		work[i].trace = p.stopTrace()
	}
	return work
}

// TestRedisWorkPerFlowOnClusterStaysWithinBudget is TestRedisWorkPerFlowStaysWithinBudget
// on a Redis Cluster, node by node. The flow's keys share the user's slot; the deadline
// index and the listing indexes' buckets have slots of their own, on any node, the user's
// included, and so do the audit trail's. Their writes do not count against a flow: a
// replica queues them and sends those of all its flows together once a second, and the
// test checks that it does. Then no node
// may see more than the budget in any of ten flows but the costliest (a flow's count only
// grows by what it does not cause, such as a client's new connection).
func TestRedisWorkPerFlowOnClusterStaysWithinBudget(t *testing.T) {
	t.Parallel()
	proxies, c, dev := clusterWorkServer(t)
	start := time.Now()
	before := make([]redisWork, len(proxies))
	for i, p := range proxies {
		before[i] = p.snapshot()
	}
	var flows [][]redisWork
	for range 10 {
		flows = append(flows, clusterFlowWork(t, proxies, c, dev))
	}
	// One batch of each queue a second (flow.indexFlushInterval, audit.LaterInterval), and
	// one more for the ends of the run.
	took := time.Since(start)
	allowed := int64(took/time.Second) + 2
	for i, p := range proxies {
		for kind, n := range p.snapshot().since(before[i]).queued {
			t.Logf("node %d: %d batches of the %s queue in %v", i+1, n, kind, took.Round(time.Millisecond))
			if n > allowed {
				t.Errorf("node %d received %d batches of the %s queue in ten flows over %v, more than one a second: its writes are sent per step, not queued",
					i+1, n, kind, took.Round(time.Millisecond))
			}
		}
	}
	slices.SortFunc(flows, func(a, b []redisWork) int { return cmp.Compare(busiest(a).total(), busiest(b).total()) })
	for i, w := range flows[len(flows)-2] {
		t.Logf("node %d, the second costliest of ten flows: %d commands in %d round trips (%s)", i+1, w.total(), w.trips, w)
		if w.total() > redisWorkBudgetCommands || w.trips > redisWorkBudgetTrips {
			t.Errorf("a whole secret flow costs node %d of the Cluster %d Redis commands in %d round trips, over the budget of %d in %d: %s\n"+
				"its commands (\"> \" begins a round trip):\n%s",
				i+1, w.total(), w.trips, redisWorkBudgetCommands, redisWorkBudgetTrips, w, strings.Join(w.trace, "\n"))
		}
	}
}

// busiest returns the work of the node that saw the most.
func busiest(work []redisWork) redisWork {
	return slices.MaxFunc(work, func(a, b redisWork) int { return cmp.Compare(a.total(), b.total()) })
}

// BenchmarkRedisWorkPerFlowOnCluster counts the Redis commands and round trips of one
// whole secret flow (flowWork: error style, signed in, rate limits counting) on a Redis
// Cluster of three primaries, node by node. Each figure is the median over the iterations;
// nodes are numbered by their slot ranges. The batches of the queues that a replica sends
// for all its flows together (queuedKinds) are logged for the whole run.
//
//	go test -run='^$' -bench=RedisWorkPerFlowOnCluster -benchtime=7x ./e2e
func BenchmarkRedisWorkPerFlowOnCluster(b *testing.B) {
	proxies, c, dev := clusterWorkServer(b)
	perNode := make([][]redisWork, len(proxies))
	before := make([]redisWork, len(proxies))
	for i, p := range proxies {
		before[i] = p.snapshot()
	}
	start := time.Now()
	b.ResetTimer()
	for range b.N {
		for i, w := range clusterFlowWork(b, proxies, c, dev) {
			perNode[i] = append(perNode[i], w)
		}
	}
	b.StopTimer()
	took := time.Since(start).Round(time.Millisecond)
	for i, works := range perNode {
		m := median(works)
		b.ReportMetric(float64(m.total()), fmt.Sprintf("node%d-cmds/flow", i+1))
		b.ReportMetric(float64(m.trips), fmt.Sprintf("node%d-trips/flow", i+1))
		q := proxies[i].snapshot().since(before[i]).queued
		b.Logf("node %d: %d commands in %d round trips (%s); in all %d flows (%v), %d batches of index writes and %d of audit events",
			i+1, m.total(), m.trips, m, b.N, took, q["index"], q["audit"])
	}
	b.ReportMetric(0, "ns/op")
}
