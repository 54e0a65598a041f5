package mcp

import (
	"bufio"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/flow"
)

// The one /mcp endpoint over real HTTP, behind the bearer check, as package web serves it.

func TestOneEndpointServesBothErasBehindTheBearerCheck(t *testing.T) {
	t.Parallel()
	f := newFixture(t, withStyle(StyleError))
	endpoint, token := f.serveHTTP()

	resp, err := testHTTP.Post(endpoint, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"server/discover"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), "resource_metadata=") {
		t.Fatalf("without a token: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}

	modern := f.connectHTTP(endpoint, token("dev"), "2026-07-28", clientConfig{urlMode: true}, true)
	res := modern.call("set_secret", map[string]any{"name": demoSlot})
	if e := f.get(f.idOf(inputRequired(t, res).URL)); modern.sessionID != "" || e.SessionID != "" || e.User != devUser("dev") {
		t.Fatalf("a 2026-07-28 call: session %q, record %+v", modern.sessionID, e)
	}

	legacy := f.connectHTTP(endpoint, token("dev"), "2025-11-25", clientConfig{urlMode: true}, true)
	_, err = legacy.CallTool(t.Context(), setSecretParams(demoSlot))
	id := urlElicitationRequired(t, err)[0].ElicitationID
	if e := f.get(id); legacy.sessionID == "" || e.SessionID != legacy.sessionID || e.User != devUser("dev") {
		t.Fatalf("a 2025-11-25 call: session %q, record %+v", legacy.sessionID, e)
	}
	f.browserCompletes(id, demoKey)
	if got := receive(t, legacy.completions, "completion notification"); got != id {
		t.Fatalf("notification for %s, want %s", got, id)
	}
	if got := flowOf(t, legacy.call("set_secret", map[string]any{"name": demoSlot})); got.Status != "stored" {
		t.Fatalf("the retry: %+v", got)
	}
}

// sseReader reads the messages of a server-sent events stream, or of a JSON body.
type sseReader struct {
	t *testing.T
	r *bufio.Reader
}

// until returns the first message that contains every one of want.
func (s sseReader) until(want ...string) string {
	s.t.Helper()
	for {
		line, err := s.r.ReadString('\n')
		msg, _ := strings.CutPrefix(strings.TrimSpace(line), "data:")
		if all(msg, want) {
			return msg
		}
		if err != nil {
			s.t.Fatalf("the stream ended without a message holding %q", want)
		}
	}
}

func all(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// rawRequest sends an MCP request over HTTP as a hand-written client would, and returns
// the response and its messages.
func rawRequest(t *testing.T, method, endpoint, token, session, body string) (*http.Response, sseReader) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), method, endpoint, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/json, text/event-stream")
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	} else {
		req.Header.Set("Accept", "text/event-stream")
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	resp, err := testHTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp, sseReader{t, bufio.NewReader(resp.Body)}
}

func TestNotificationIsQueuedUntilTheClientOpensItsStream(t *testing.T) {
	t.Parallel()
	f := newFixture(t, withStyle(StyleError))
	endpoint, token := f.serveHTTP()
	c := f.connectHTTP(endpoint, token("dev"), "2025-11-25", clientConfig{urlMode: true}, false)
	_, err := c.CallTool(t.Context(), setSecretParams(demoSlot))
	id := urlElicitationRequired(t, err)[0].ElicitationID

	f.browserCompletes(id, demoKey)
	e := f.waitFor(id, "an attempt recorded", func(e *flow.Elicitation) bool { return e.Delivery.Attempts > 0 })
	if e.Delivery.WrittenAt != nil || e.Delivery.QueuedAt == nil || e.Delivery.LastError == "" {
		t.Fatalf("without a stream: %+v", e.Delivery)
	}
	if owed, err := f.store.Deliveries().IsUndelivered(f.ctx, devUser("dev"), c.sessionID, id); err != nil || !owed {
		t.Fatalf("no longer owed although not written: %v %v", owed, err)
	}

	// The client opens its stream: the notification owed to its session is written there.
	resp, stream := rawRequest(t, http.MethodGet, endpoint, token("dev"), c.sessionID, "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: %d", resp.StatusCode)
	}
	stream.until(`"notifications/elicitation/complete"`, id)
	e = f.waitFor(id, "recorded as written", func(e *flow.Elicitation) bool { return e.Delivery.WrittenAt != nil })
	if e.Delivery.LastError != "" || e.Delivery.Attempts < 2 {
		t.Fatalf("after the stream opened: %+v", e.Delivery)
	}
	if !hasEntry(f.history(id), flow.Notified, state.ActorSystem, flow.Complete, flow.Complete) {
		t.Fatalf("history: %+v", f.history(id))
	}
}

// A client that asks initialize for 2026-07-28 is negotiated down to 2025-11-25, and must
// then be served as a 2025 client: elicitation/create, not input_required.
func TestInitializeAskingForTheSessionlessVersionIsServedAs2025(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	endpoint, token := f.serveHTTP()
	tok := token("dev")

	resp, msgs := rawRequest(t, http.MethodPost, endpoint, tok, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":`+
		`{"protocolVersion":"2026-07-28","capabilities":{"elicitation":{"url":{}}},"clientInfo":{"name":"raw","version":"1"}}}`)
	session := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || session == "" {
		t.Fatalf("initialize: %d, session %q", resp.StatusCode, session)
	}
	msgs.until(`"protocolVersion":"2025-11-25"`)
	if resp, _ := rawRequest(t, http.MethodPost, endpoint, tok, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("initialized: %d", resp.StatusCode)
	}

	_, msgs = rawRequest(t, http.MethodPost, endpoint, tok, session,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"set_secret","arguments":{"name":"demo_api_key"}}}`)
	ask := msgs.until(`"method":"elicitation/create"`)
	if !strings.Contains(ask, `"elicitationId"`) || !strings.Contains(ask, `"mode":"url"`) {
		t.Fatalf("elicitation/create: %s", ask)
	}
	askID := ask[strings.Index(ask, `"id":`)+len(`"id":`):]
	askID = askID[:strings.IndexAny(askID, ",}")]
	if resp, _ := rawRequest(t, http.MethodPost, endpoint, tok, session,
		`{"jsonrpc":"2.0","id":`+askID+`,"result":{"action":"decline"}}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("answer to elicitation/create: %d", resp.StatusCode)
	}
	result := msgs.until(`"id":2`)
	if !strings.Contains(result, `"status":"declined"`) || strings.Contains(result, "inputRequests") {
		t.Fatalf("result: %s", result)
	}
	if f.server.sessions.snapshot()[session] == nil {
		t.Fatal("the session is not registered with its user")
	}
}

// A client that reopens its stream again soon after (some do, every few seconds) does not
// make the notifier read Redis each time; the deliveries waiting to try again are woken.
func TestAStreamReopenedSoonAfterWakesTheWaitingDeliveries(t *testing.T) {
	t.Parallel()
	f := newFixture(t, withStyle(StyleError))
	endpoint, token := f.serveHTTP()
	c := f.connectHTTP(endpoint, token("dev"), "2025-11-25", clientConfig{urlMode: true}, false)
	first, _ := rawRequest(t, http.MethodGet, endpoint, token("dev"), c.sessionID, "")
	if first.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: %d", first.StatusCode)
	}
	time.Sleep(2 * streamSettle) // the reopened stream's recheck is done
	first.Body.Close()

	_, err := c.CallTool(t.Context(), setSecretParams(demoSlot))
	id := urlElicitationRequired(t, err)[0].ElicitationID
	f.browserCompletes(id, demoKey)
	// Without a stream, the attempts back off: 250 ms, 500 ms, 1 s, 2 s; the next in 4 s.
	f.waitFor(id, "five attempts", func(e *flow.Elicitation) bool { return e.Delivery.Attempts >= 5 })

	resp, stream := rawRequest(t, http.MethodGet, endpoint, token("dev"), c.sessionID, "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: %d", resp.StatusCode)
	}
	opened := time.Now()
	stream.until(`"notifications/elicitation/complete"`, id)
	if waited := time.Since(opened); waited > 2*time.Second {
		t.Errorf("the notification came %v after the stream reopened: the waiting delivery was not woken", waited)
	}
}
