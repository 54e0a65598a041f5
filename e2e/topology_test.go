package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/urlflow/urlflow/internal/redistest"
)

// TestAFlowOnEveryRedisTopology runs urlflow on a Redis Cluster and on a primary behind
// Sentinel, and completes a flow on each: the elicitation, the pages, the completion
// notification (through Redis pub/sub), call_api with the stored key, and the operators'
// listing of every user's flows (on a Cluster, its index writes are queued by the replica).
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
			if list := s.api(http.MethodGet, "/api/v1/elicitations?state=complete", s.OperatorToken, ""); list.status != http.StatusOK || !strings.Contains(string(list.body), id) {
				t.Errorf("the operators' listing of complete flows: %d, without %s:\n%s", list.status, id, list.body)
			}
		})
	}
}
