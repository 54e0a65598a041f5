package e2e

import (
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/urlflow/urlflow/internal/redistest"
)

// cuttableLink stands between one urlflow replica and Redis, and can cut them apart as a
// network partition would: every open connection is closed at once and new ones are closed
// as they arrive, until heal.
type cuttableLink struct {
	addr   string
	target string

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
}

func startCuttableLink(t testing.TB, target string) *cuttableLink {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &cuttableLink{addr: ln.Addr().String(), target: target, conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() { ln.Close(); l.cutOff() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go l.serve(conn)
		}
	}()
	return l
}

func (l *cuttableLink) serve(client net.Conn) {
	server, err := net.Dial("tcp", l.target)
	if err != nil {
		client.Close()
		return
	}
	l.mu.Lock()
	if l.cut {
		l.mu.Unlock()
		client.Close()
		server.Close()
		return
	}
	l.conns[client], l.conns[server] = struct{}{}, struct{}{}
	l.mu.Unlock()
	done := func() {
		client.Close()
		server.Close()
		l.mu.Lock()
		delete(l.conns, client)
		delete(l.conns, server)
		l.mu.Unlock()
	}
	go func() { defer done(); io.Copy(server, client) }()
	go func() { defer done(); io.Copy(client, server) }()
}

// cutOff closes every connection and refuses new ones until heal.
func (l *cuttableLink) cutOff() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cut = true
	for c := range l.conns {
		c.Close()
	}
}

func (l *cuttableLink) heal() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cut = false
}

// TestAReplicaCutFromRedis: two replicas share one Redis; replica A, which holds the
// client's session, is cut from Redis (a network partition) while the other goes on. The
// user finishes on B; A's heartbeat lapses, so B records within seconds that the
// notification cannot be written (session ended), the flow is not stuck, and a retry of the
// notification is a conflict that names a new attempt. A answers only 503 while cut, and
// is ready again by itself once the partition heals; then it tells its session after all,
// and the record says so. The credential the page said stored is there.
func TestAReplicaCutFromRedis(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	link := startCuttableLink(t, rs.Addr)
	home := t.TempDir() // shared development keys
	heartbeat := []string{"URLFLOW_TEST_REPLICA_HEARTBEAT=1s"}
	a := startServer(t, serverConfig{RedisURL: "redis://" + link.addr, Style: "error", ConfigHome: home, Env: heartbeat})
	b := startServer(t, serverConfig{Redis: rs, Style: "error", ConfigHome: home, PublicURL: a.BaseURL, Env: heartbeat})
	c := connect(t, a, clientConfig{Token: a.Token, URLMode: true})
	_, err := c.Call(t.Context(), "set_secret", map[string]any{"name": "demo_api_key"})
	id := urlElicitationRequired(t, err)[0].ElicitationID
	eventually(t, 10*time.Second, "A subscribed to events", func() bool { return strings.Contains(a.Output(), subscribedLine) })

	link.cutOff()
	eventually(t, 10*time.Second, "A not ready without Redis", func() bool {
		return a.getJSON("/readyz", "", &map[string]string{}) == http.StatusServiceUnavailable
	})
	if got := a.api(http.MethodGet, elicitationPath(id), a.Token, ""); got.status != http.StatusServiceUnavailable {
		t.Fatalf("A's API while cut answered %d, want 503: %s", got.status, got.body)
	}
	newFormBrowser(t, b, "dev").completeSecret("/e/"+id, canary)

	started := time.Now()
	e := b.waitFor(id, b.Token, "the delivery ended as session ended", 15*time.Second,
		func(e elicitation) bool { return e.Delivery.SessionEndedAt != nil })
	t.Logf("B recorded the session ended %v after the flow completed", time.Since(started).Round(100*time.Millisecond))
	if e.State != "complete" || e.Delivery.WrittenAt != nil || !strings.Contains(e.Delivery.SessionEnded, "stopped answering") {
		t.Fatalf("on B: state %s, delivery %+v", e.State, e.Delivery)
	}
	var sum struct {
		OwedNotifications int            `json:"owedNotifications"`
		Stuck             map[string]int `json:"stuck"`
	}
	if code := b.getJSON("/api/v1/elicitations/summary", b.OperatorToken, &sum); code != http.StatusOK ||
		sum.OwedNotifications != 0 || sum.Stuck["notification"] != 0 {
		t.Fatalf("summary on B: %d %+v", code, sum)
	}
	retry := b.api(http.MethodPost, elicitationPath(id)+"/retry", b.OperatorToken, `{"reason": "partition test"}`)
	if retry.status != http.StatusConflict || !strings.Contains(string(retry.body), "--new") {
		t.Fatalf("retry of the notification while A is cut: %d %s, want 409 naming --new", retry.status, retry.body)
	}

	link.heal()
	eventually(t, 15*time.Second, "A ready again by itself", func() bool {
		return a.getJSON("/readyz", "", &map[string]string{}) == http.StatusOK
	})
	c.waitCompletion(id, 20*time.Second)
	e = a.waitDelivered(id, a.Token)
	if e.Delivery.SessionEndedAt == nil || !strings.Contains(lastNotified(e), "lived after all") {
		t.Fatalf("after the partition healed: delivery %+v, history %+v", e.Delivery, e.History)
	}
	if res := c.CallOK("set_secret", map[string]any{"name": "demo_api_key"}); str(structured(t, res), "status") != "stored" {
		t.Fatalf("set_secret on A after the partition: %s", text(res))
	}
}

// lastNotified returns the reason of the last `notified` entry of e's history.
func lastNotified(e elicitation) string {
	reason := ""
	for _, h := range e.History {
		if h.Event == "notified" {
			reason = h.Reason
		}
	}
	return reason
}
