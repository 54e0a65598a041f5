package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/demoapi"
	"github.com/urlflow/urlflow/internal/redistest"
	"github.com/urlflow/urlflow/oauth/identity"
	"github.com/urlflow/urlflow/state"
)

// Redis fails over in the middle of flows: a Sentinel promotes the replica of a killed
// primary, or a Cluster's replica takes over from its killed primary. Users run whole
// secret flows (push style) before, during and after. Nothing but 503s and honest tool
// errors is answered; readiness returns by itself; flows complete after the failover; every
// ended flow's client is told; and every user's credential is the last value a page said it
// stored.

func TestASentinelFailoverMidFlowsLosesNothing(t *testing.T) {
	t.Parallel()
	ss, _ := redistest.StartSentinelWithReplica(t)
	runThroughFailover(t, ss.URL(), "sentinel", ss.Primary.Kill)
}

func TestAClusterFailoverMidFlowsLosesNothing(t *testing.T) {
	t.Parallel()
	c := redistest.StartClusterWithReplicas(t, 3)
	// The primary that holds the first user's keys dies.
	user := state.User{Issuer: identity.DevIssuer, Subject: failoverUser(0)}
	rdb := redis.NewClient(&redis.Options{Addr: c.Nodes[0].Addr})
	slot, err := rdb.ClusterKeySlot(t.Context(), state.UserTag(user.Key())+"x").Result()
	rdb.Close()
	if err != nil {
		t.Fatal(err)
	}
	runThroughFailover(t, c.URL(), "cluster", c.Nodes[int(slot)*len(c.Nodes)/16384].Kill)
}

// failoverUser names the i-th user of runThroughFailover.
func failoverUser(i int) string { return fmt.Sprintf("failover-%d", i) }

// failoverUsers is how many users run flows at once through a failover.
const failoverUsers = 4

// runThroughFailover runs flows of failoverUsers users on urlflow against the Redis at
// redisURL (topology), calls fail once flows have completed on it, and goes on until flows
// have completed after it too; then checks what the test's comment says.
func runThroughFailover(t *testing.T, redisURL, topology string, fail func()) {
	s := startServer(t, serverConfig{RedisURL: redisURL, Style: "push", Env: []string{"URLFLOW_REDIS_TOPOLOGY=" + topology,
		"URLFLOW_RATE_LIMIT_MCP=off", "URLFLOW_RATE_LIMIT_FORMS=off", "URLFLOW_TEST_REPLICA_HEARTBEAT=2s", "URLFLOW_TEST_PUSH_WAIT=5s"}})
	users := make([]*loadUser, failoverUsers)
	for i := range users {
		users[i] = newLoadUser(t, s, loadPush, failoverUser(i))
	}
	var (
		completed atomic.Int64 // flows that answered stored
		failedAt  atomic.Int64 // completed when fail was called; 0 before
		mu        sync.Mutex
		lastSaid  = map[int]string{} // the last value a page said it stored, by user
		ended     []string           // flows whose page said stored
		refused   []string           // errors, which must be 503s or honest tool errors
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, u := range users {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				r := u.flow(t)
				mu.Lock()
				if r.stored {
					lastSaid[i] = r.secret
					ended = append(ended, r.id)
				}
				if r.err != nil {
					refused = append(refused, r.err.Error())
				}
				mu.Unlock()
				if r.err == nil {
					completed.Add(1)
				} else {
					time.Sleep(100 * time.Millisecond) // Redis is away: try again shortly, as a person would
				}
			}
		})
	}
	eventually(t, time.Minute, "flows completed before the failover", func() bool { return completed.Load() >= 2*failoverUsers })
	failedAt.Store(completed.Load())
	killed := time.Now()
	fail()
	eventually(t, 2*time.Minute, "flows completed after the failover", func() bool {
		return completed.Load() >= failedAt.Load()+2*failoverUsers
	})
	t.Logf("%s: %d flows before the kill; %d flows completed again %v after it", topology, failedAt.Load(),
		2*failoverUsers, time.Since(killed).Round(100*time.Millisecond))
	close(stop)
	wg.Wait()
	if code := s.getJSON("/readyz", "", &map[string]string{}); code != http.StatusOK {
		t.Errorf("/readyz after the failover: %d", code)
	}

	for _, e := range refused {
		if !honestRefusal(e) {
			t.Errorf("answered other than a 503 or an honest tool error: %s", e)
		}
	}
	t.Logf("%d refusals, the first: %.300s", len(refused), strings.Join(refused, "; "))
	// Every ended flow's client is told (one replica holds every session, which lives).
	for _, id := range ended {
		e := s.waitFor(id, s.OperatorToken, "the completion notification written", 30*time.Second,
			func(e elicitation) bool { return e.Delivery.WrittenAt != nil })
		if e.State != "complete" {
			t.Errorf("flow %s whose page said stored is %s", id, e.State)
		}
	}
	for i, u := range users {
		secret, ok := lastSaid[i]
		if !ok {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, err := u.session.CallTool(ctx, &sdk.CallToolParams{Name: "call_api",
			Arguments: map[string]any{"name": "demo_api_key", "method": "GET", "path": "/whoami"}})
		cancel()
		if err != nil || res.IsError || !strings.Contains(text(res), `"account":"`+demoapi.Account(secret)+`"`) {
			t.Errorf("user %d: the credential is not the last one the page said stored (%s): %v %s", i, demoapi.Account(secret), err, text(res))
		}
	}
}

// honestRefusal reports whether a flow's error is what urlflow may answer while Redis
// fails over: a page's 503, a tool that says its store could not be reached, or, for a user
// whose last flow a 503 interrupted, the link of that flow, which still works.
func honestRefusal(err string) bool {
	for _, ok := range []string{": 503", "could not reach its store", "cannot reach its store", "Still waiting for you to enter"} {
		if strings.Contains(err, ok) {
			return true
		}
	}
	return false
}
