package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/urlflow/urlflow/internal/redistest"
)

// Many clients time a request out after about 60 seconds. Without a progress token the
// push-style wait answers after 50 seconds (mcp.DefaultPushWait, whose value the mcp tests
// check) with an honest "still waiting"; with one it sends progress every 15 seconds and
// keeps waiting. These tests shorten the waits with the test-only settings
// (URLFLOW_TEST_*): the rules are the same, the waits shorter.

func TestPushWithoutProgressTokenAnswersStillWaitingAfterThePushWait(t *testing.T) {
	t.Parallel()
	const pushWait = 3 * time.Second
	rs := redistest.Start(t)
	s := startServer(t, serverConfig{Redis: rs, Style: "push", Env: []string{"URLFLOW_TEST_PUSH_WAIT=" + pushWait.String()}})
	c := connect(t, s, clientConfig{Token: s.Token, URLMode: true})
	dev := newPerson(t, sharedBrowser(t), "dev")

	start := time.Now()
	call := c.callAsync("set_secret", map[string]any{"name": "demo_api_key"})
	params := c.nextElicitation(30 * time.Second)
	res := await(t, call, 2*time.Minute)
	took := time.Since(start)
	if took < pushWait || took > pushWait+5*time.Second {
		t.Fatalf("the push wait answered after %s, want about %s", took, pushWait)
	}
	sc := structured(t, res)
	if res.IsError || str(sc, "status") != "waiting" || str(sc, "url") != params.URL || str(sc, "elicitationId") != params.ElicitationID {
		t.Fatalf("still-waiting result: isError=%v %v", res.IsError, sc)
	}
	if !strings.Contains(text(res), params.URL) || !strings.Contains(text(res), "elicitation_status") {
		t.Fatalf("the still-waiting text does not say how to go on:\n%s", text(res))
	}
	if got := s.status(params.ElicitationID, s.Token).State; got != "consented" {
		t.Fatalf("after the wait the state is %s, want consented (an accept is not success)", got)
	}

	// The user finishes later; the next call finds the secret.
	dev.completeSecret(t, params.URL, canary)
	c.waitCompletion(params.ElicitationID, 30*time.Second)
	if got := str(structured(t, c.CallOK("set_secret", map[string]any{"name": "demo_api_key"})), "status"); got != "stored" {
		t.Fatalf("after the browser step: %s", got)
	}
}

func TestPushWithProgressTokenSendsProgressAndKeepsWaiting(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	// Progress every half second instead of every 15: the rule is the same, the wait shorter.
	s := startServer(t, serverConfig{Redis: rs, Style: "push", Env: []string{"URLFLOW_TEST_PROGRESS_INTERVAL=500ms"}})
	progress := make(chan *sdk.ProgressNotificationParams, 16)
	cl := sdk.NewClient(&sdk.Implementation{Name: "progress-client", Version: "1"}, &sdk.ClientOptions{
		Capabilities: &sdk.ClientCapabilities{Elicitation: &sdk.ElicitationCapabilities{URL: &sdk.URLElicitationCapabilities{}}},
		ElicitationHandler: func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			return &sdk.ElicitResult{Action: "accept"}, nil
		},
		ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
			// Keep the first ones; never block the client's handler (a blocked handler keeps
			// the session from closing).
			select {
			case progress <- req.Params:
			default:
			}
		},
	})
	session, err := cl.Connect(t.Context(), &sdk.StreamableClientTransport{
		Endpoint:   s.MCPURL,
		HTTPClient: &http.Client{Transport: &recorder{token: s.Token, traffic: &syncBuffer{}}},
	}, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()
	dev := newPerson(t, sharedBrowser(t), "dev")

	params := &sdk.CallToolParams{Name: "set_secret", Arguments: map[string]any{"name": "demo_api_key"}}
	params.SetProgressToken("urlflow-e2e")
	done := make(chan callResult, 1)
	go func() {
		res, err := session.CallTool(context.Background(), params)
		done <- callResult{res, err}
	}()

	var first *sdk.ProgressNotificationParams
	select {
	case first = <-progress:
	case <-time.After(20 * time.Second):
		t.Fatal("no progress notification within 20s")
	}
	if first.ProgressToken != "urlflow-e2e" || !strings.Contains(first.Message, "/e/") {
		t.Fatalf("progress notification: %+v", first)
	}
	id := first.Message[strings.LastIndex(first.Message, "/e/")+3:]
	select {
	case r := <-done:
		t.Fatalf("the call returned while it should still wait: %v %v", r.res, r.err)
	default:
	}
	dev.completeSecret(t, s.BaseURL+"/e/"+id, canary)
	res := await(t, done, time.Minute)
	if str(structured(t, res), "status") != "stored" {
		t.Fatalf("result: %s", text(res))
	}
}
