package e2e

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/urlflow/urlflow/internal/redistest"
)

// The client matrix: every cell is a whole secret flow with a real MCP client over HTTP
// and Chromium as the user, followed by a call_api that uses the stored secret. Each cell
// must end complete by way of in_progress, show the client's answer in the history where
// the client gave one (and none where it did not), and leave the canary nowhere.

var (
	setSecretArgs = map[string]any{"name": "demo_api_key"}
	whoamiArgs    = map[string]any{"name": "demo_api_key", "method": "GET", "path": "/whoami"}
)

const (
	setSecretJSON = `{"name":"demo_api_key"}`
	whoamiJSON    = `{"name":"demo_api_key","method":"GET","path":"/whoami"}`
)

// cellRun is what a cell reports: the elicitation it went through, whether the client
// answered it (accept), and the client's HTTP traffic.
type cellRun struct {
	id       string
	answered bool
	traffic  string
}

type cell struct {
	name  string
	style string // URLFLOW_ELICITATION_STYLE
	run   func(t *testing.T, s *server, dev *person) cellRun
}

func TestClientMatrix(t *testing.T) {
	t.Parallel()
	cells := []cell{
		{"go-sdk/2025/push", "push", goPush},
		{"go-sdk/2025/error", "error", goError},
		{"go-sdk/2026/multi-round-trip", "push", goMultiRoundTrip},
		{"go-sdk/2025/no-url-mode", "push", goFallback(lastLegacy)},
		{"go-sdk/2026/no-url-mode", "push", goFallback(modern)},
		{"ts-sdk-v1/2025/push", "push", tsV1Push},
		{"ts-sdk-v1/2025/error", "error", tsV1Error},
		{"ts-sdk-v2/2026/multi-round-trip", "push", tsV2MultiRoundTrip},
		{"ts-sdk-v1/2025/no-url-mode", "push", tsFallback("client-v1.mjs", lastLegacy)},
		{"ts-sdk-v2/2026/no-url-mode", "push", tsFallback("client-v2.mjs", modern, "--negotiation", "pin")},
		{"ts-sdk-v1/2025/form-mode-only", "push", tsFallback("client-v1.mjs", lastLegacy, "--form-only")},
		{"ts-sdk-v2/2026/form-mode-only", "push", tsFallback("client-v2.mjs", modern, "--negotiation", "pin", "--form-only")},
	}
	browser := sharedBrowser(t)
	for _, c := range cells {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rs := redistest.Start(t)
			s := startServer(t, serverConfig{Redis: rs, Style: c.style})
			run := c.run(t, s, newPerson(t, browser, "dev"))

			e := s.waitState(run.id, s.Token, "complete", 30*time.Second)
			want := []string{"created", "browser_open", "verified"}
			if run.answered {
				want = []string{"created", "client_accept", "browser_open", "verified"}
			} else if slices.ContainsFunc(e.events(), func(ev string) bool { return ev == "client_accept" || ev == "client_decline" || ev == "client_cancel" }) {
				t.Fatalf("history %v records an answer from a client that gave none", e.events())
			}
			requireEvents(t, e, want...)
			if run.traffic == "" {
				t.Fatal("no traffic captured: the canary check would prove nothing")
			}
			requireNoCanary(t, rs, map[string]string{"the client's traffic": run.traffic, "urlflow output": s.Output()})
		})
	}
}

const lastLegacy = "2025-11-25"

// requireWhoami checks a call_api /whoami result's structuredContent.
func requireWhoami(t *testing.T, sc map[string]any) {
	t.Helper()
	if sc["status"] != float64(http.StatusOK) {
		t.Fatalf("call_api /whoami: %v", sc)
	}
}

func requireStored(t *testing.T, sc map[string]any) {
	t.Helper()
	if str(sc, "status") != "stored" {
		t.Fatalf("set_secret: %v", sc)
	}
}

func goPush(t *testing.T, s *server, dev *person) cellRun {
	c := connect(t, s, clientConfig{Token: s.Token, URLMode: true})
	call := c.callAsync("set_secret", setSecretArgs)
	p := c.nextElicitation(30 * time.Second)
	dev.completeSecret(t, p.URL, canary)
	requireStored(t, structured(t, await(t, call, time.Minute)))
	requireWhoami(t, structured(t, c.CallOK("call_api", whoamiArgs)))
	return cellRun{id: p.ElicitationID, answered: true, traffic: c.Traffic.String()}
}

func goError(t *testing.T, s *server, dev *person) cellRun {
	c := connect(t, s, clientConfig{Token: s.Token, URLMode: true})
	_, err := c.Call(t.Context(), "set_secret", setSecretArgs)
	p := urlElicitationRequired(t, err)[0]
	dev.completeSecret(t, p.URL, canary)
	c.waitCompletion(p.ElicitationID, 30*time.Second)
	requireStored(t, structured(t, c.CallOK("set_secret", setSecretArgs)))
	requireWhoami(t, structured(t, c.CallOK("call_api", whoamiArgs)))
	return cellRun{id: p.ElicitationID, traffic: c.Traffic.String()}
}

func goMultiRoundTrip(t *testing.T, s *server, dev *person) cellRun {
	c := connect(t, s, clientConfig{Token: s.Token, URLMode: true, ProtocolVersion: modern})
	if c.ProtocolVersion() != modern {
		t.Fatalf("negotiated %s", c.ProtocolVersion())
	}
	call := c.callAsync("set_secret", setSecretArgs)
	p := c.nextElicitation(30 * time.Second)
	dev.completeSecret(t, p.URL, canary)
	requireStored(t, structured(t, await(t, call, 2*time.Minute)))
	requireWhoami(t, structured(t, c.CallOK("call_api", whoamiArgs)))
	return cellRun{id: idFromURL(p.URL), answered: true, traffic: c.Traffic.String()}
}

func goFallback(version string) func(*testing.T, *server, *person) cellRun {
	return func(t *testing.T, s *server, dev *person) cellRun {
		c := connect(t, s, clientConfig{Token: s.Token, ProtocolVersion: version})
		sc := structured(t, c.CallOK("set_secret", setSecretArgs))
		if str(sc, "status") != "user_action_required" {
			t.Fatalf("fallback: %v", sc)
		}
		dev.completeSecret(t, str(sc, "url"), canary)
		requireStored(t, structured(t, c.CallOK("set_secret", setSecretArgs)))
		requireWhoami(t, structured(t, c.CallOK("call_api", whoamiArgs)))
		return cellRun{id: str(sc, "elicitationId"), traffic: c.Traffic.String()}
	}
}

// nodeFlow starts a node client that calls set_secret and then call_api.
func nodeFlow(t *testing.T, s *server, script string, extra ...string) *nodeClient {
	args := append([]string{"--tool", "set_secret", "--args", setSecretJSON, "--then", "call_api", "--then-args", whoamiJSON}, extra...)
	return startNode(t, script, s, s.Token, args...)
}

// requireConnected checks the protocol version a node client negotiated.
func requireConnected(t *testing.T, n *nodeClient, version string) {
	t.Helper()
	if got := n.next("connected", 30*time.Second).ProtocolVersion; got != version {
		t.Fatalf("negotiated %s, want %s", got, version)
	}
}

// finishNode reads the two results of nodeFlow, checks them and waits for the exit.
func finishNode(t *testing.T, n *nodeClient) {
	t.Helper()
	requireStored(t, n.next("result", 2*time.Minute).structured(t))
	requireWhoami(t, n.next("result", time.Minute).structured(t))
	n.finish()
}

func tsV1Push(t *testing.T, s *server, dev *person) cellRun {
	n := nodeFlow(t, s, "client-v1.mjs", "--url-mode")
	requireConnected(t, n, lastLegacy)
	ev := n.next("elicitation", 30*time.Second)
	if ev.Via != "elicitation/create" || ev.ElicitationID == "" {
		t.Fatalf("elicitation: %+v", ev)
	}
	dev.completeSecret(t, ev.URL, canary)
	finishNode(t, n)
	return cellRun{id: ev.ElicitationID, answered: true, traffic: n.Traffic()}
}

func tsV1Error(t *testing.T, s *server, dev *person) cellRun {
	n := nodeFlow(t, s, "client-v1.mjs", "--url-mode")
	requireConnected(t, n, lastLegacy)
	ev := n.next("url_required", 30*time.Second)
	if len(ev.Elicitations) != 1 {
		t.Fatalf("url_required: %+v", ev)
	}
	p := ev.Elicitations[0]
	dev.completeSecret(t, p.URL, canary)
	if got := n.next("complete", 30*time.Second).ElicitationID; got != p.ElicitationID {
		t.Fatalf("completion for %s, want %s", got, p.ElicitationID)
	}
	finishNode(t, n)
	return cellRun{id: p.ElicitationID, traffic: n.Traffic()}
}

func tsV2MultiRoundTrip(t *testing.T, s *server, dev *person) cellRun {
	n := nodeFlow(t, s, "client-v2.mjs", "--url-mode", "--negotiation", "pin")
	requireConnected(t, n, modern)
	ev := n.next("elicitation", 30*time.Second)
	if ev.Via != "input_required" {
		t.Fatalf("elicitation: %+v", ev)
	}
	dev.completeSecret(t, ev.URL, canary)
	finishNode(t, n)
	return cellRun{id: idFromURL(ev.URL), answered: true, traffic: n.Traffic()}
}

func tsFallback(script, version string, extra ...string) func(*testing.T, *server, *person) cellRun {
	return func(t *testing.T, s *server, dev *person) cellRun {
		n := nodeFlow(t, s, script, extra...)
		requireConnected(t, n, version)
		sc := n.next("result", time.Minute).structured(t)
		if str(sc, "status") != "user_action_required" {
			t.Fatalf("fallback: %v", sc)
		}
		dev.completeSecret(t, str(sc, "url"), canary)
		n.send("retry")
		finishNode(t, n)
		return cellRun{id: str(sc, "elicitationId"), traffic: n.Traffic()}
	}
}
