package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/flow"
	"github.com/urlflow/urlflow/state/mcpsessions"
)

func withSessionsPerUser(n int) func(*testOptions) {
	return func(o *testOptions) { o.SessionsPerUser = n }
}

// startReplica starts a second urlflow replica on the fixture's Redis, with its own event
// subscription, as another process would be.
func (f *fixture) startReplica(name string) *Server {
	f.t.Helper()
	server, _ := f.startKillableReplica(name)
	return server
}

// startKillableReplica is startReplica, and returns as well a function that kills the
// replica as SIGKILL would: from then on nothing it does reaches Redis (its Redis client is
// closed first), and then it stops.
func (f *fixture) startKillableReplica(name string) (*Server, func()) {
	f.t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: f.redis.Addr, MaxRetries: -1})
	hub := flow.NewHub(rdb, f.opts.Logger)
	opts := f.opts
	opts.Hub, opts.Replica = hub, name
	opts.Flows = flow.NewStore(rdb, flow.StoreOptions{Logger: f.opts.Logger, Now: f.store.Now})
	opts.Sessions = mcpsessions.New(rdb, f.store.Now)
	server := New(opts.Options)
	ctx, stop := context.WithCancel(f.ctx)
	ran := make(chan struct{})
	go func() {
		server.Run(ctx)
		close(ran)
	}()
	go hub.Run(ctx)
	select {
	case <-hub.Connected():
	case <-time.After(waitLimit):
		f.t.Fatal("the second replica's hub did not subscribe to Redis")
	}
	kill := sync.OnceFunc(func() {
		rdb.Close()
		stop()
		<-ran
	})
	f.t.Cleanup(kill)
	return server, kill
}

// alive reports whether c's session still answers.
func alive(c *testClient) bool {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	return c.Ping(ctx, nil) == nil
}

// initialize sends an initialize request as a client would, and returns the answer's
// status and body.
func initialize(t *testing.T, endpoint, token string) (int, string) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"probe","version":"1"}}}`
	req, _ := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := testHTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

func TestANewSessionBeyondTheCapClosesTheLeastRecentlyUsedIdleOne(t *testing.T) {
	f := newFixture(t, withSessionsPerUser(2))
	endpoint, token := f.serveHTTP()
	first := f.connectHTTP(endpoint, token("alice"), "2025-11-25", clientConfig{urlMode: true}, false)
	second := f.connectHTTP(endpoint, token("alice"), "2025-11-25", clientConfig{urlMode: true}, false)
	if !alive(first) { // first is now the more recently used
		t.Fatal("the first session does not answer")
	}
	bob := f.connectHTTP(endpoint, token("bob"), "2025-11-25", clientConfig{urlMode: true}, false)

	third := f.connectHTTP(endpoint, token("alice"), "2025-11-25", clientConfig{urlMode: true}, false)
	if alive(second) {
		t.Error("the least recently used session of alice still answers; want it closed to make room")
	}
	for name, c := range map[string]*testClient{"first": first, "third": third, "bob's": bob} {
		if !alive(c) {
			t.Errorf("the %s session was closed", name)
		}
	}
	if n := f.redis.Client(t).ZCard(f.ctx, "urlflow:{u:"+devUser("alice").Key()+"}:mss").Val(); n != 2 {
		t.Errorf("alice has %d sessions counted, want 2", n)
	}
}

func TestANewSessionIsRefusedWhenEveryOtherIsWaitingOnACall(t *testing.T) {
	f := newFixture(t, withSessionsPerUser(2))
	endpoint, token := f.serveHTTP()
	var busy []*testClient
	var ids []string
	var calls []<-chan callOutcome
	for range 2 {
		c := f.connectHTTP(endpoint, token("alice"), "2025-11-25", clientConfig{urlMode: true}, true)
		// set_secret in push style waits for the flow to end: a call in progress until the
		// user completes the flow.
		calls = append(calls, c.start(&sdk.CallToolParams{Name: "set_secret", Arguments: map[string]any{"name": demoSlot}}))
		ids = append(ids, f.idOf(receive(t, c.elicitations, "elicitation/create").URL))
		busy = append(busy, c)
	}

	status, body := initialize(t, endpoint, token("alice"))
	var answer struct {
		ID    int `json:"id"`
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &answer); err != nil || status != http.StatusTooManyRequests || answer.ID != 7 ||
		!strings.Contains(answer.Error.Message, "you have 2 open, the most it allows") {
		t.Fatalf("initialize beyond the cap = %d %s; want 429 with a JSON-RPC error that says why", status, body)
	}
	for i, c := range busy {
		if !alive(c) {
			t.Errorf("busy session %d was closed", i)
		}
	}
	// Another user is not affected.
	if status, body := initialize(t, endpoint, token("bob")); status != http.StatusOK {
		t.Errorf("bob's initialize = %d %s", status, body)
	}

	for i, id := range ids {
		f.browserCompletes(id, "demo_x7Qk2mZp9LwVtR4s")
		receive(t, calls[i], "the end of set_secret")
		receive(t, busy[i].completions, "the completion notification")
	}
	// Once its call has ended, a session is idle and makes room.
	if status, body := initialize(t, endpoint, token("alice")); status != http.StatusOK {
		t.Errorf("initialize once the calls ended = %d %s", status, body)
	}
}

func TestTheCapCountsSessionsOnEveryReplica(t *testing.T) {
	f := newFixture(t, withSessionsPerUser(2))
	endpoint, token := f.serveHTTP()
	older := f.connectHTTP(endpoint, token("alice"), "2025-11-25", clientConfig{urlMode: true}, false)
	newer := f.connectHTTP(endpoint, token("alice"), "2025-11-25", clientConfig{urlMode: true}, false)

	otherEndpoint, otherToken := f.serveHTTPOf(f.startReplica("replica-2"))
	onOther := f.connectHTTP(otherEndpoint, otherToken("alice"), "2025-11-25", clientConfig{urlMode: true}, false)

	// The replica that holds the least recently used session closes it on request.
	deadline := time.Now().Add(waitLimit)
	for alive(older) {
		if time.Now().After(deadline) {
			t.Fatal("the least recently used session, on the first replica, still answers")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !alive(newer) || !alive(onOther) {
		t.Error("a session that should stay was closed")
	}
}

func TestASessionOwedANotificationIsNotClosedForRoom(t *testing.T) {
	f := newFixture(t, withSessionsPerUser(1))
	endpoint, token := f.serveHTTP()
	// Without its stream open, the client cannot receive the notification of a flow of its
	// session that ends: it is owed.
	c := f.connectHTTP(endpoint, token("alice"), "2025-11-25", clientConfig{urlMode: true}, false)
	e, err := f.store.Create(f.ctx, flow.NewElicitation{User: devUser("alice"), Kind: state.KindSecret, Target: demoSlot,
		Purpose: "a test", TTL: f.opts.TTL, SessionID: c.sessionID})
	if err != nil {
		t.Fatal(err)
	}
	f.apply(e.ID, flow.ClientDecline)
	if owed, err := f.store.Deliveries().IsUndelivered(f.ctx, devUser("alice"), c.sessionID, e.ID); err != nil || !owed {
		t.Fatalf("IsUndelivered = %v, %v; the test needs the notification owed", owed, err)
	}

	if status, body := initialize(t, endpoint, token("alice")); status != http.StatusTooManyRequests {
		t.Fatalf("initialize = %d %s; want 429: the only other session is owed a notification", status, body)
	}
	if !alive(c) {
		t.Error("the session owed a notification was closed")
	}
}

// registered reports whether c's session is registered in Redis as live.
func (f *fixture) registered(c *testClient) bool {
	f.t.Helper()
	_, err := f.mcpSessions.Live(f.ctx, c.sessionID)
	if err != nil && !errors.Is(err, state.ErrNotFound) {
		f.t.Fatal(err)
	}
	return err == nil
}

func TestASessionItsClientDeletesIsUnregisteredBeforeTheAnswer(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	endpoint, token := f.serveHTTP()
	c := f.connectHTTP(endpoint, token("alice"), "2025-11-25", clientConfig{urlMode: true}, true)
	if !f.registered(c) {
		t.Fatal("the session is not registered")
	}
	c.Close() // DELETE
	if f.registered(c) {
		t.Fatal("the session is still registered once its DELETE was answered")
	}
	if _, held := f.server.sessions.get(c.sessionID); held {
		t.Fatal("the registry still holds the deleted session")
	}
}

// TestASessionThatIdlesOutIsUnregistered: the SDK closes a session that idles out without
// a request telling urlflow; the registry finds it ended (reap, which Run calls every
// reapInterval) and unregisters it. The idle timeout leaves a loaded machine seconds
// between the requests that start the session.
func TestASessionThatIdlesOutIsUnregistered(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *testOptions) { o.SessionIdleTimeout = 4 * time.Second })
	endpoint, token := f.serveHTTP()
	c := f.connectHTTP(endpoint, token("alice"), "2025-11-25", clientConfig{urlMode: true}, true)
	if !f.registered(c) {
		t.Fatal("the session is not registered")
	}
	eventually(t, "the SDK closes the idle session", func() bool {
		for ss := range f.server.legacy.Sessions() {
			if ss.ID() == c.sessionID {
				return false
			}
		}
		return true
	})
	f.server.sessions.reap(f.ctx)
	if f.registered(c) {
		t.Fatal("the idle session is still registered")
	}
	if _, held := f.server.sessions.get(c.sessionID); held {
		t.Fatal("the registry still holds the session")
	}
	if !strings.Contains(f.logs.text(), "mcp session ended") {
		t.Fatal("no log of the session's end")
	}
}
