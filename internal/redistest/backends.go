package redistest

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/internal/embedded"
)

// Backend is the Redis one test runs on.
type Backend struct {
	// Client is connected to it; it is closed when the test ends.
	Client redis.UniversalClient
	// Server is the single redis-server, for tests that stop and restart it; nil for the
	// other kinds.
	Server *Server
}

// ForEachBackend runs test against each kind of Redis urlflow runs on, each fresh: the
// embedded miniredis of `urlflow dev`, a real redis-server, a real Redis Cluster of three
// nodes, and a primary found through a real Sentinel, as the parallel subtests "embedded",
// "redis-server", "redis-cluster" and "redis-sentinel". A store must behave the same on
// all of them.
//
// The test that calls it runs in parallel with the package's other tests: each has its own
// Redis.
func ForEachBackend(t *testing.T, test func(t *testing.T, b *Backend)) {
	t.Helper()
	t.Parallel()
	t.Run("embedded", func(t *testing.T) {
		t.Parallel()
		test(t, StartEmbedded(t))
	})
	t.Run("redis-server", func(t *testing.T) {
		t.Parallel()
		srv := Start(t)
		test(t, &Backend{Client: srv.Client(t), Server: srv})
	})
	t.Run("redis-cluster", func(t *testing.T) {
		t.Parallel()
		c := StartCluster(t, 3)
		var addrs []string
		for _, n := range c.Nodes {
			addrs = append(addrs, n.Addr)
		}
		test(t, backend(t, redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})))
	})
	t.Run("redis-sentinel", func(t *testing.T) {
		t.Parallel()
		ss := StartSentinel(t)
		test(t, backend(t, redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: ss.MasterName, SentinelAddrs: []string{ss.Sentinel.Addr},
		})))
	})
}

// StartEmbedded starts the embedded Redis of `urlflow dev` for one test and returns it
// connected.
func StartEmbedded(t testing.TB) *Backend {
	t.Helper()
	e, err := embedded.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	opts, err := redis.ParseURL(e.URL())
	if err != nil {
		t.Fatal(err)
	}
	return backend(t, redis.NewClient(opts))
}

// backend checks that rdb answers and closes it when the test ends.
func backend(t testing.TB, rdb redis.UniversalClient) *Backend {
	t.Helper()
	t.Cleanup(func() { rdb.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("connect to Redis: %v", err)
	}
	return &Backend{Client: rdb}
}
