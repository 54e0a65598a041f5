package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/urlflow/urlflow/internal/redistest"
)

// TestAFlowOnEveryRedisTopology runs urlflow on a Redis Cluster and on a primary behind
// Sentinel, and completes a flow on each: the elicitation, the pages, the completion
// notification (through Redis pub/sub), and call_api with the stored key.
func TestAFlowOnEveryRedisTopology(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		topology string
		start    func(t *testing.T) (url, addr string)
	}{
		{"cluster", func(t *testing.T) (string, string) {
			c := redistest.StartCluster(t, 3)
			return c.URL(), c.Nodes[0].Addr
		}},
		{"sentinel", func(t *testing.T) (string, string) {
			ss := redistest.StartSentinel(t)
			return ss.URL(), ss.Sentinel.Addr
		}},
	} {
		t.Run(tt.topology, func(t *testing.T) {
			t.Parallel()
			url, addr := tt.start(t)
			s := startServer(t, serverConfig{RedisURL: url, Style: "error", Env: []string{"URLFLOW_REDIS_TOPOLOGY=" + tt.topology}})
			if !strings.Contains(s.Stdout(), tt.topology+" "+addr) {
				t.Errorf("the banner does not name the %s at %s:\n%s", tt.topology, addr, s.Output())
			}
			c := connect(t, s, clientConfig{Token: s.Token, URLMode: true})
			id := storeSecretByPages(t, c, newFormBrowser(t, s, "dev"), canary, false)
			if e := s.status(id, s.Token); e.State != "complete" {
				t.Fatalf("elicitation %s ended %s", id, e.State)
			}
			if words, sc := whoami(t, c); sc["status"] != float64(http.StatusOK) || !strings.Contains(words, `"account":"demo-`) {
				t.Fatalf("whoami: %s %v", words, sc)
			}
		})
	}
}
