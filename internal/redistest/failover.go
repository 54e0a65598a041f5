package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Kill kills the server as SIGKILL does: it writes nothing more and answers nothing more.
func (s *Server) Kill() { s.stopWith(syscall.SIGKILL) }

// StartSentinelWithReplica starts a primary with one replica, watched by one Sentinel that
// takes the primary for down after a second and fails over to the replica, and waits until
// the Sentinel knows the replica. Kill the primary to see a failover.
func StartSentinelWithReplica(t testing.TB) (*SentinelSetup, *Server) {
	t.Helper()
	ss := &SentinelSetup{Primary: Start(t), MasterName: "urlflow"}
	host, port, _ := net.SplitHostPort(ss.Primary.Addr)
	replica := startWith(t, func(s *Server) { s.args = []string{"--replicaof", host, port} })
	replica.waitFor(t, "master_link_status:up", func(ctx context.Context, rdb *redis.Client) (string, error) {
		return rdb.Info(ctx, "replication").Result()
	})
	ss.Sentinel = startWith(t, func(s *Server) {
		s.conf = filepath.Join(s.dir, "sentinel.conf") // Sentinel rewrites its file: it must be its own
		conf := fmt.Sprintf("sentinel monitor %s %s %s 1\nsentinel down-after-milliseconds %[1]s 1000\n"+
			"sentinel failover-timeout %[1]s 5000\n", ss.MasterName, host, port)
		if err := os.WriteFile(s.conf, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		s.args = []string{"--sentinel"}
	})
	// The Sentinel learns of replicas from the primary's INFO, every 10 seconds at first.
	ss.Sentinel.waitFor(t, replica.Addr, func(ctx context.Context, rdb *redis.Client) (string, error) {
		replicas, err := rdb.Do(ctx, "SENTINEL", "replicas", ss.MasterName).Slice()
		return fmt.Sprint(replicas), err
	})
	return ss, replica
}

// ClusterWithReplicas is a Redis Cluster whose every primary has one replica.
type ClusterWithReplicas struct {
	*Cluster
	// Replicas[i] replicates Nodes[i].
	Replicas []*Server
}

// StartClusterWithReplicas starts a Redis Cluster of n primaries (n of at least 3, so that
// the others can elect a replica when one dies) each with one replica, whose nodes take a
// node for failed after a second. Kill a primary to see its replica take over.
func StartClusterWithReplicas(t testing.TB, n int) *ClusterWithReplicas {
	t.Helper()
	c := &ClusterWithReplicas{Cluster: startCluster(t, n, 1000)}
	ctx := t.Context()
	for _, primary := range c.Nodes {
		var busPort string
		replica := startWith(t, func(s *Server) {
			busPort = strconv.Itoa(FreePort(t))
			s.args = []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
				"--cluster-node-timeout", "1000", "--cluster-port", busPort}
		})
		rdb := redis.NewClient(&redis.Options{Addr: replica.Addr})
		host, port, _ := net.SplitHostPort(c.Nodes[0].Addr)
		if err := rdb.Do(ctx, "CLUSTER", "MEET", host, port, c.busPorts[0]).Err(); err != nil {
			t.Fatalf("cluster replica %s meeting %s: %v", replica.Addr, c.Nodes[0].Addr, err)
		}
		pc := redis.NewClient(&redis.Options{Addr: primary.Addr})
		id, err := pc.ClusterMyID(ctx).Result()
		pc.Close()
		if err != nil {
			t.Fatalf("cluster node %s: %v", primary.Addr, err)
		}
		// The replica must know the primary before it can replicate it.
		replica.waitFor(t, id, func(ctx context.Context, rdb *redis.Client) (string, error) {
			return rdb.ClusterNodes(ctx).Result()
		})
		if err := rdb.Do(ctx, "CLUSTER", "REPLICATE", id).Err(); err != nil {
			t.Fatalf("cluster replica %s of %s: %v", replica.Addr, primary.Addr, err)
		}
		rdb.Close()
		replica.waitFor(t, "master_link_status:up", func(ctx context.Context, rdb *redis.Client) (string, error) {
			return rdb.Info(ctx, "replication").Result()
		})
		c.Replicas = append(c.Replicas, replica)
	}
	for _, node := range append(append([]*Server{}, c.Nodes...), c.Replicas...) {
		node.waitFor(t, "cluster_state:ok", func(ctx context.Context, rdb *redis.Client) (string, error) {
			return rdb.ClusterInfo(ctx).Result()
		})
	}
	// Every node must know every replica, or a failover may find no majority that knows it.
	for _, node := range c.Nodes {
		node.waitFor(t, strconv.Itoa(2*n)+" nodes", func(ctx context.Context, rdb *redis.Client) (string, error) {
			nodes, err := rdb.ClusterNodes(ctx).Result()
			return strconv.Itoa(strings.Count(strings.TrimSpace(nodes), "\n")+1) + " nodes", err
		})
	}
	return c
}
