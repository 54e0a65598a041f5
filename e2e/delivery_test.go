package e2e

import (
	"bufio"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/urlflow/urlflow/internal/redistest"
)

// A session without a stream cannot receive the notification: urlflow records it as owed
// (queued, not written) and retries; when the client opens its stream, the notification is
// written at once, not after the next backoff.
func TestNotificationIsWrittenWhenTheStreamOpens(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	s := startServer(t, serverConfig{Redis: rs, Style: "error"})
	traffic := &syncBuffer{}
	cl := sdk.NewClient(&sdk.Implementation{Name: "no-stream-client", Version: "1"}, &sdk.ClientOptions{
		Capabilities: &sdk.ClientCapabilities{Elicitation: &sdk.ElicitationCapabilities{URL: &sdk.URLElicitationCapabilities{}}},
	})
	session, err := cl.Connect(t.Context(), &sdk.StreamableClientTransport{
		Endpoint:             s.MCPURL,
		HTTPClient:           &http.Client{Transport: &recorder{token: s.Token, traffic: traffic}},
		DisableStandaloneSSE: true,
	}, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()
	dev := newPerson(t, sharedBrowser(t), "dev")

	_, err = session.CallTool(t.Context(), &sdk.CallToolParams{Name: "set_secret", Arguments: map[string]any{"name": "demo_api_key"}})
	params := urlElicitationRequired(t, err)[0]
	dev.completeSecret(t, params.URL, canary)

	// Owed, attempted, not written. After five attempts the backoff is four seconds.
	e := s.waitFor(params.ElicitationID, s.Token, "fifth delivery attempt", 20*time.Second,
		func(e elicitation) bool { return e.Delivery.Attempts >= 5 })
	if e.Delivery.QueuedAt == nil || e.Delivery.WrittenAt != nil || e.Delivery.LastError == "" {
		t.Fatalf("without a stream the delivery should be queued, not written, with an error: %+v", e.Delivery)
	}

	// Open the stream as the client would, and read the notification from it.
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, s.MCPURL, nil)
	req.Header.Set("Authorization", "Bearer "+s.Token)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", session.ID())
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	opened := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: %d", resp.StatusCode)
	}
	got := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "notifications/elicitation/complete") {
				got <- sc.Text()
				return
			}
		}
	}()
	select {
	case line := <-got:
		if !strings.Contains(line, params.ElicitationID) {
			t.Fatalf("notification for another elicitation: %s", line)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the notification was not written to the opened stream")
	}
	if waited := time.Since(opened); waited > 1500*time.Millisecond {
		t.Fatalf("the notification took %s after the stream opened: the reconnect did not trigger it", waited)
	}
	e = s.waitFor(params.ElicitationID, s.Token, "written delivery", 5*time.Second,
		func(e elicitation) bool { return e.Delivery.WrittenAt != nil })
	if e.Delivery.LastError != "" {
		t.Fatalf("a written delivery keeps its last error: %+v", e.Delivery)
	}
	requireEvents(t, e, "verified", "notified")
}
