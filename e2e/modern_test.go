package e2e

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/urlflow/urlflow/internal/redistest"
)

const modern = "2026-07-28"

// The 2026-07-28 era: no session, no elicitation/create, no notification. The tool answers
// input_required with a URL and a signed requestState; the client retries, and the retry
// waits for the flow to end.
func TestMultiRoundTripCompletesAFullFlow(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	s := startServer(t, serverConfig{Redis: rs})
	c := connect(t, s, clientConfig{Token: s.Token, URLMode: true, ProtocolVersion: modern})
	if got := c.ProtocolVersion(); got != modern || c.SessionID() != "" {
		t.Fatalf("negotiated %q with session %q, want %s without a session", got, c.SessionID(), modern)
	}
	dev := newPerson(t, sharedBrowser(t), "dev")

	call := c.callAsync("call_api", map[string]any{"name": "demo_api_key", "method": "GET", "path": "/whoami"})
	params := c.nextElicitation(30 * time.Second)
	if params.Mode != "url" || !strings.HasPrefix(params.URL, s.BaseURL+"/e/") || params.ElicitationID != "" {
		t.Fatalf("input request: %+v (the 2026 input request carries no elicitation ID)", params)
	}
	id := strings.TrimPrefix(params.URL, s.BaseURL+"/e/")
	dev.completeSecret(t, params.URL, canary)
	res := await(t, call, 2*time.Minute)
	if res.IsError || structured(t, res)["status"] != float64(http.StatusOK) {
		t.Fatalf("call_api after the browser step: %s", text(res))
	}
	e := s.status(id, s.Token)
	if e.State != "complete" {
		t.Fatalf("state %s", e.State)
	}
	// The retry's accept was recorded as consent, and only the browser completed it.
	requireEvents(t, e, "created", "client_accept", "browser_open", "verified")
	for _, h := range e.History {
		if h.Event == "client_accept" && h.To == "complete" {
			t.Fatal("an accept completed the flow")
		}
	}
	if res := c.CallOK("set_secret", map[string]any{"name": "demo_api_key"}); str(structured(t, res), "status") != "stored" {
		t.Fatalf("set_secret afterwards: %s", text(res))
	}
	// The status tool answers for it in this era too.
	if st := structured(t, c.CallOK("elicitation_status", map[string]any{"elicitationId": id})); str(st, "state") != "complete" {
		t.Fatalf("elicitation_status: %v", st)
	}
	requireNoCanary(t, rs, map[string]string{"MCP traffic": c.Traffic.String(), "urlflow output": s.Output()})
}

// inputRequired calls tool without the automatic retry and returns the input_required
// result.
func inputRequired(t *testing.T, c *client, tool string, args map[string]any) *sdk.CallToolResult {
	t.Helper()
	res, err := c.session.CallTool(t.Context(), &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	if !res.NeedsInput() || res.RequestState == "" || res.InputRequests["auth"] == nil {
		t.Fatalf("want input_required with a requestState, got %+v", res)
	}
	return res
}

func TestATamperedOrMisusedRequestStateIsRefusedAndChangesNothing(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	// The genuine retry at the end waits for the flow; a second instead of 25 is enough.
	s := startServer(t, serverConfig{Redis: rs, Env: []string{"URLFLOW_TEST_RETRY_WAIT=1s"}})
	alice := connect(t, s, clientConfig{Token: s.devToken("alice"), URLMode: true, ProtocolVersion: modern, ManualRetry: true})
	bob := connect(t, s, clientConfig{Token: s.devToken("bob"), URLMode: true, ProtocolVersion: modern, ManualRetry: true})

	args := map[string]any{"name": "demo_api_key"}
	first := inputRequired(t, alice, "set_secret", args)
	url := first.InputRequests["auth"].(*sdk.ElicitParams).URL
	id := url[strings.LastIndex(url, "/")+1:]
	before := s.status(id, s.devToken("alice"))

	flip := []byte(first.RequestState)
	flip[len(flip)/3] ^= 1
	cases := []struct {
		name  string
		c     *client
		tool  string
		args  map[string]any
		state string
		why   string
	}{
		{"tampered", alice, "set_secret", args, string(flip), "not issued by this server or was changed"},
		{"malformed", alice, "set_secret", args, "not-a-state", "malformed"},
		{"another user", bob, "set_secret", args, first.RequestState, "another user"},
		{"another tool", alice, "call_api", map[string]any{"name": "demo_api_key", "method": "GET", "path": "/whoami"}, first.RequestState, "another tool"},
		{"other arguments", alice, "set_secret", map[string]any{"name": "demo_api_key", "replace": true}, first.RequestState, "other arguments"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := tc.c.session.CallTool(t.Context(), &sdk.CallToolParams{
				Name: tc.tool, Arguments: tc.args, RequestState: tc.state,
				InputResponses: sdk.InputResponseMap{"auth": &sdk.ElicitResult{Action: "accept"}},
			})
			if err != nil {
				t.Fatal(err)
			}
			if !res.IsError || !strings.Contains(text(res), tc.why) || !strings.Contains(text(res), "Nothing was changed") {
				t.Fatalf("want a clear error saying %q, got isError=%v %s", tc.why, res.IsError, text(res))
			}
			requireUnchanged(t, before, s.status(id, s.devToken("alice")))
		})
	}

	// The genuine retry is accepted: its accept is recorded as consent only.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	res, err := alice.session.CallTool(ctx, &sdk.CallToolParams{Name: "set_secret", Arguments: args, RequestState: first.RequestState,
		InputResponses: sdk.InputResponseMap{"auth": &sdk.ElicitResult{Action: "accept"}}})
	if err != nil || !res.NeedsInput() {
		t.Fatalf("genuine retry: %v %+v", err, res)
	}
	if got := s.status(id, s.devToken("alice")).State; got != "consented" {
		t.Fatalf("after the accepted retry the state is %s, want consented", got)
	}
}

func TestADeclineInTheRetryEndsDeclined(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	s := startServer(t, serverConfig{Redis: rs})
	c := connect(t, s, clientConfig{Token: s.Token, URLMode: true, ProtocolVersion: modern, Answer: "decline"})
	res := c.CallOK("set_secret", map[string]any{"name": "demo_api_key"})
	sc := structured(t, res)
	if res.IsError || str(sc, "status") != "declined" {
		t.Fatalf("result: %s %v", text(res), sc)
	}
	e := s.status(str(sc, "elicitationId"), s.Token)
	requireEvents(t, e, "created", "client_decline")
}

func TestModernClientWithoutURLModeGetsTheFallbackAndSucceedsOnTheNextCall(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	s := startServer(t, serverConfig{Redis: rs})
	c := connect(t, s, clientConfig{Token: s.Token, ProtocolVersion: modern})
	dev := newPerson(t, sharedBrowser(t), "dev")

	res := c.CallOK("call_api", map[string]any{"name": "demo_api_key", "method": "GET", "path": "/whoami"})
	sc := structured(t, res)
	if res.IsError || res.NeedsInput() || str(sc, "status") != "user_action_required" {
		t.Fatalf("fallback: %s %v", text(res), sc)
	}
	// A second call before the browser step points at the same link.
	if again := structured(t, c.CallOK("call_api", map[string]any{"name": "demo_api_key", "method": "GET", "path": "/whoami"})); str(again, "url") != str(sc, "url") {
		t.Fatalf("a second call made another link: %v", again)
	}
	dev.completeSecret(t, str(sc, "url"), canary)
	res = c.CallOK("call_api", map[string]any{"name": "demo_api_key", "method": "GET", "path": "/whoami"})
	if res.IsError || structured(t, res)["status"] != float64(http.StatusOK) {
		t.Fatalf("after the browser step: %s", text(res))
	}
}

// A client that asks for 2026-07-28 in initialize (not server/discover) is negotiated down
// and served as a 2025 client: a session, and elicitation/create, not input_required.
func TestAClientNegotiatedDownIsServedAsA2025Client(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	s := startServer(t, serverConfig{Redis: rs})
	post := func(session, body string) (*http.Response, *bufio.Reader) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, s.MCPURL, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+s.Token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp, bufio.NewReader(resp.Body)
	}
	// readUntil reads the stream until a line holding want, and returns that line.
	readUntil := func(r *bufio.Reader, want string) string {
		for {
			line, err := r.ReadString('\n')
			if strings.Contains(line, want) {
				return line
			}
			if err != nil {
				t.Fatalf("the stream ended without %q", want)
			}
		}
	}

	resp, r := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2026-07-28",`+
		`"capabilities":{"elicitation":{"url":{}}},"clientInfo":{"name":"raw","version":"1"}}}`)
	session := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || session == "" {
		t.Fatalf("initialize asking 2026-07-28: %d, session %q", resp.StatusCode, session)
	}
	if line := readUntil(r, `"protocolVersion"`); !strings.Contains(line, `"protocolVersion":"2025-11-25"`) {
		t.Fatalf("negotiated: %s", line)
	}
	if resp, _ := post(session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("initialized: %d", resp.StatusCode)
	}
	_, r = post(session, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"set_secret","arguments":{"name":"demo_api_key"}}}`)
	line := readUntil(r, `"method"`)
	if !strings.Contains(line, `"elicitation/create"`) || !strings.Contains(line, `"elicitationId"`) || strings.Contains(line, "inputRequests") {
		t.Fatalf("a client negotiated down to 2025-11-25 got: %s", line)
	}
}
