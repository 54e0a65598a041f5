package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/urlflow/urlflow/internal/redistest"
)

// Two replicas share one Redis. The MCP session lives on replica A; the user's browser
// lands on replica B. B completes the flow, A notifies its session.
func TestCompletionOnAnotherReplicaNotifiesTheOriginatingSession(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	home := t.TempDir() // shared development keys
	a := startServer(t, serverConfig{Redis: rs, Style: "error", ConfigHome: home})
	b := startServer(t, serverConfig{Redis: rs, Style: "error", ConfigHome: home, PublicURL: a.BaseURL})
	c := connect(t, a, clientConfig{Token: a.Token, URLMode: true})
	dev := newPerson(t, sharedBrowser(t), "dev")

	_, err := c.Call(t.Context(), "set_secret", map[string]any{"name": "demo_api_key"})
	params := urlElicitationRequired(t, err)[0]
	onB := strings.Replace(params.URL, a.BaseURL, b.BaseURL, 1)
	dev.completeSecret(t, onB, canary)

	c.waitCompletion(params.ElicitationID, 30*time.Second)
	e := a.waitDelivered(params.ElicitationID, a.Token)
	if e.State != "complete" || e.Delivery.WrittenAt == nil {
		t.Fatalf("state %s, delivery %+v", e.State, e.Delivery)
	}
	if !strings.Contains(b.Output(), "to=complete") || strings.Contains(a.Output(), "to=complete") {
		t.Fatal("the flow did not complete on replica B as the test intended")
	}
	if !strings.Contains(a.Output(), "completion notification written") {
		t.Fatal("replica A, which holds the session, did not write the notification")
	}
	res := c.CallOK("set_secret", map[string]any{"name": "demo_api_key"})
	if str(structured(t, res), "status") != "stored" {
		t.Fatalf("retry on A: %s", text(res))
	}
}
