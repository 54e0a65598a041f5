package mcp

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/urlflow/urlflow/ask"
	"github.com/urlflow/urlflow/demoapi"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/flow"
)

// The 2026-07-28 era: multi round-trip results with a signed requestState.

// inputRequired returns the URL-mode input request of an input_required result.
func inputRequired(t *testing.T, res *sdk.CallToolResult) *sdk.ElicitParams {
	t.Helper()
	if !res.NeedsInput() || res.RequestState == "" || len(res.InputRequests) != 1 {
		t.Fatalf("not input_required with a requestState: isError=%v %q %+v", res.IsError, textOf(res), res)
	}
	p, ok := res.InputRequests[inputKey].(*sdk.ElicitParams)
	if !ok || p.Mode != "url" || p.ElicitationID != "" || p.URL == "" {
		t.Fatalf("input request %q: %#v", inputKey, res.InputRequests[inputKey])
	}
	return p
}

func TestMultiRoundTripAsksWithASignedRequestState(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.connectModern(alice, clientConfig{urlMode: true})
	args := map[string]any{"name": demoSlot}

	res := c.call("set_secret", args)
	id := f.idOf(inputRequired(t, res).URL)
	raw, _ := json.Marshal(args)
	redeemed, err := f.opts.Asker.Redeem(res.RequestState, alice, ask.ToolBinding("set_secret", raw))
	if err != nil || redeemed != id {
		t.Fatalf("requestState: %q %v", redeemed, err)
	}
	if e := f.get(id); e.State != flow.Pending || e.SessionID != "" || e.User != alice || e.Client.Name != "test-client" {
		t.Fatalf("record: %+v", e)
	}
	nothingIn(t, c.elicitations, "elicitation/create in the 2026-07-28 era")
}

func TestMultiRoundTripRetryRecordsConsentAndAsksAgainWhileRunning(t *testing.T) {
	t.Parallel()
	const wait = 200 * time.Millisecond
	f := newFixture(t, withRetryWait(wait))
	c := f.connectModern(alice, clientConfig{urlMode: true})
	args := map[string]any{"name": demoSlot}
	first := c.call("set_secret", args)
	asked := inputRequired(t, first)
	id := f.idOf(asked.URL)

	started := time.Now()
	again := c.retry("set_secret", args, first.RequestState, "accept")
	if elapsed := time.Since(started); elapsed < wait {
		t.Errorf("the retry answered after %s, before RetryWait (%s)", elapsed, wait)
	}
	if inputRequired(t, again).URL != asked.URL {
		t.Fatalf("asked again for another flow: %+v", again.InputRequests[inputKey])
	}
	if f.get(id).State != flow.Consented || !hasEntry(f.history(id), flow.ClientAccept, state.ActorClient, flow.Pending, flow.Consented) {
		t.Fatalf("the accept is not recorded as consent: %+v", f.history(id))
	}
	if f.secretOf(alice, demoSlot) != "" {
		t.Fatal("an accept stored a credential")
	}

	f.browserCompletes(id, demoKey)
	res := c.retry("set_secret", args, again.RequestState, "")
	if got := flowOf(t, res); res.NeedsInput() || res.IsError || got.Status != "stored" {
		t.Fatalf("after completion: %+v", got)
	}
}

func TestMultiRoundTripRetryRunsTheToolAsSoonAsTheFlowCompletes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.connectModern(alice, clientConfig{urlMode: true})
	args := apiCall(demoSlot, "GET", "/whoami")
	first := c.call("call_api", args)
	id := f.idOf(inputRequired(t, first).URL)

	call := c.start(&sdk.CallToolParams{Name: "call_api", Arguments: args, RequestState: first.RequestState,
		InputResponses: sdk.InputResponseMap{inputKey: &sdk.ElicitResult{Action: "accept"}}})
	f.waitForState(id, flow.Consented)
	f.browserCompletes(id, demoKey)
	out := receive(t, call, "the retry's result")
	if out.err != nil || out.res.IsError || out.res.NeedsInput() {
		t.Fatalf("retry: %v %+v", out.err, out.res)
	}
	if resp := apiResponseOf(t, out.res); resp.Status != 200 || !strings.Contains(resp.Body, demoapi.Account(demoKey)) {
		t.Fatalf("response: %+v", resp)
	}
}

func TestMultiRoundTripAnswersHonestlyOnceTheFlowEnded(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		end    func(f *fixture, id string)
		action string
		want   flow.State
	}{
		{"declined in the client", func(*fixture, string) {}, "decline", flow.Declined},
		{"cancelled in the client", func(*fixture, string) {}, "cancel", flow.Cancelled},
		{"expired", func(f *fixture, id string) { f.passDeadline(id) }, "accept", flow.Expired},
		{"declined on the page", func(f *fixture, id string) { f.apply(id, flow.BrowserOpen, flow.PageDecline) }, "", flow.Declined},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			c := f.connectModern(alice, clientConfig{urlMode: true})
			args := map[string]any{"name": demoSlot}
			first := c.call("set_secret", args)
			id := f.idOf(inputRequired(t, first).URL)
			tt.end(f, id)

			res := c.retry("set_secret", args, first.RequestState, tt.action)
			got := flowOf(t, res)
			if res.NeedsInput() || res.IsError || got.Status != string(tt.want) || got.State != tt.want || got.ElicitationID != id {
				t.Fatalf("isError=%v needsInput=%v %+v", res.IsError, res.NeedsInput(), got)
			}
			if f.secretOf(alice, demoSlot) != "" {
				t.Fatal("a credential was stored")
			}
		})
	}
}

func TestMultiRoundTripRefusesARequestStateOfAnotherCall(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.connectModern(alice, clientConfig{urlMode: true})
	bobs := f.connectModern(bob, clientConfig{urlMode: true})
	args := map[string]any{"name": demoSlot}
	first := c.call("set_secret", args)
	id := f.idOf(inputRequired(t, first).URL)
	history := len(f.history(id))

	raw, _ := json.Marshal(args)
	binding := ask.ToolBinding("set_secret", raw)
	// States this server would issue for a flow past its deadline and its grace, and for
	// a flow that is gone; and one another server issued.
	expired := f.opts.Asker.Issue(&flow.Elicitation{ID: id, User: alice, ExpiresAt: time.Now().Add(-ask.StateGrace - time.Second)}, binding)
	gone := f.opts.Asker.Issue(&flow.Elicitation{ID: "AAAAAAAAAAAAAAAAAAAAAAAAAA", User: alice, ExpiresAt: time.Now().Add(time.Hour)}, binding)
	otherKey := []byte(strings.Repeat("x", 32))
	another := ask.New(ask.Options{ToolStateKeys: [][]byte{otherKey}, ServiceStateKeys: [][]byte{otherKey}}).Issue(f.get(id), binding)
	tampered := []byte(first.RequestState)
	tampered[5] ^= 1

	tests := []struct {
		name         string
		c            *testClient
		tool         string
		args         map[string]any
		requestState string
		why          string
	}{
		{"tampered", c, "set_secret", args, string(tampered), "not issued by this server or was changed"},
		{"from another server", c, "set_secret", args, another, "not issued by this server"},
		{"of another user", bobs, "set_secret", args, first.RequestState, "another user"},
		{"of another tool", c, "call_api", apiCall(demoSlot, "GET", "/whoami"), first.RequestState, "another tool"},
		{"for other arguments", c, "set_secret", map[string]any{"name": notesSlot}, first.RequestState, "other arguments"},
		{"for other arguments (replace)", c, "set_secret", map[string]any{"name": demoSlot, "replace": true}, first.RequestState, "other arguments"},
		{"expired", c, "set_secret", args, expired, "expired"},
		{"whose elicitation is gone", c, "set_secret", args, gone, "its elicitation is gone"},
	}
	for _, tt := range tests {
		res := tt.c.retry(tt.tool, tt.args, tt.requestState, "accept")
		if text := textOf(res); !res.IsError || res.NeedsInput() || !strings.Contains(text, tt.why) ||
			!strings.Contains(text, "without requestState to start over") {
			t.Errorf("%s: isError=%v %q", tt.name, res.IsError, text)
		}
	}
	if e := f.get(id); e.State != flow.Pending || len(f.history(id)) != history {
		t.Fatalf("a refused retry changed the flow: %s %+v", e.State, f.history(id))
	}
	for _, u := range []struct {
		user state.User
		slot string
	}{{alice, notesSlot}, {bob, demoSlot}} {
		if _, err := f.store.OpenFor(f.ctx, u.user, state.KindSecret, u.slot, ""); err == nil {
			t.Errorf("a refused retry opened a flow for %s's %s", u.user.Subject, u.slot)
		}
	}
}

func TestMultiRoundTripClientWithoutURLModeGetsALinkToOpen(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.connectModern(alice, clientConfig{})
	args := map[string]any{"name": demoSlot}

	res := c.call("set_secret", args)
	got := flowOf(t, res)
	if res.NeedsInput() || res.IsError || got.Status != "user_action_required" || f.idOf(got.URL) != got.ElicitationID ||
		got.ExpiresAt == nil {
		t.Fatalf("isError=%v needsInput=%v %+v", res.IsError, res.NeedsInput(), got)
	}
	// Without a session, the same user's call for the same slot finds the same flow.
	if again := flowOf(t, c.call("set_secret", args)); again.ElicitationID != got.ElicitationID {
		t.Fatalf("a second link: %+v", again)
	}
	f.browserCompletes(got.ElicitationID, demoKey)
	if done := flowOf(t, c.call("set_secret", args)); done.Status != "stored" {
		t.Fatalf("after the browser finished: %+v", done)
	}
}

// A requestState outlives its flow by the grace period. Replayed after the stored secret
// was deleted (disconnect), it must not answer "stored", nor pass the missing secret off as
// an outage: the call starts over.
func TestMultiRoundTripRetryAfterTheSecretWasDeletedStartsOver(t *testing.T) {
	t.Parallel()
	tests := []struct {
		tool string
		args map[string]any
		name string // of the credential
	}{
		{"set_secret", map[string]any{"name": demoSlot}, demoSlot},
		{"call_api", apiCall(demoSlot, "GET", "/whoami"), demoSlot},
		{"connect", map[string]any{"provider": acme}, acme},
	}
	for _, tt := range tests {
		t.Run(tt.tool, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			c := f.connectModern(alice, clientConfig{urlMode: true})
			first := c.call(tt.tool, tt.args)
			id := f.idOf(inputRequired(t, first).URL)
			if tt.name == acme {
				f.browserConnects(id, acme, "alice@acme", demoKey)
			} else {
				f.browserCompletes(id, demoKey)
			}
			if res := c.call("disconnect", map[string]any{"name": tt.name}); res.StructuredContent.(map[string]any)["deleted"] != true {
				t.Fatalf("disconnect: %q", textOf(res))
			}

			res := c.retry(tt.tool, tt.args, first.RequestState, "accept")
			if res.IsError || !res.NeedsInput() {
				t.Fatalf("the replayed retry: isError=%v %q %v", res.IsError, textOf(res), res.StructuredContent)
			}
			again := f.idOf(inputRequired(t, res).URL)
			if again == id || f.get(again).State != flow.Pending {
				t.Fatalf("asked again for %s (%s), the first flow was %s", again, f.get(again).State, id)
			}
		})
	}
}

// retryParams is the retry of a multi round-trip call with the client's accept.
func retryParams(name string, args map[string]any, requestState string) *sdk.CallToolParams {
	return &sdk.CallToolParams{Name: name, Arguments: args, RequestState: requestState,
		InputResponses: sdk.InputResponseMap{inputKey: &sdk.ElicitResult{Action: "accept"}}}
}

// TestMultiRoundTripRetryWithAProgressTokenWaitsUntilTheFlowEnds: a client that sends a
// progress token (as Claude Code does on every call) hears progress and keeps its retry
// open far past RetryWait, so that it asks the user once; the tool runs when the browser
// finishes.
func TestMultiRoundTripRetryWithAProgressTokenWaitsUntilTheFlowEnds(t *testing.T) {
	t.Parallel()
	const interval = 50 * time.Millisecond
	f := newFixture(t, withRetryWait(interval), withProgressInterval(interval))
	c := f.connectModern(alice, clientConfig{urlMode: true})
	args := apiCall(demoSlot, "GET", "/whoami")
	first := c.call("call_api", args)
	asked := inputRequired(t, first)
	id := f.idOf(asked.URL)

	params := retryParams("call_api", args, first.RequestState)
	params.SetProgressToken("cc-1")
	call := c.start(params)
	// Four notifications take four intervals, far past RetryWait, and the retry still waits.
	for step := 1; step <= 4; step++ {
		p := receive(t, c.progress, "progress notification")
		if p.ProgressToken != "cc-1" || p.Progress != float64(step) || !strings.Contains(p.Message, asked.URL) {
			t.Fatalf("progress %d: %+v", step, p)
		}
	}
	nothingIn(t, call, "result while the flow runs")
	if f.get(id).State != flow.Consented {
		t.Fatalf("the retry's accept is not recorded as consent: %s", f.get(id).State)
	}

	f.browserCompletes(id, demoKey)
	out := receive(t, call, "the retry's result")
	if out.err != nil || out.res.IsError || out.res.NeedsInput() {
		t.Fatalf("retry: %v %+v", out.err, out.res)
	}
	if resp := apiResponseOf(t, out.res); resp.Status != 200 || !strings.Contains(resp.Body, demoapi.Account(demoKey)) {
		t.Fatalf("response: %+v", resp)
	}
}

// TestMultiRoundTripRetryWithAProgressTokenStopsAtTheCap: past ProgressWaitLimit the retry
// answers input_required again for the same flow; the next retry waits again.
func TestMultiRoundTripRetryWithAProgressTokenStopsAtTheCap(t *testing.T) {
	t.Parallel()
	const limit = 300 * time.Millisecond
	f := newFixture(t, withProgressWaitLimit(limit), withProgressInterval(50*time.Millisecond))
	c := f.connectModern(alice, clientConfig{urlMode: true})
	args := map[string]any{"name": demoSlot}
	first := c.call("set_secret", args)
	asked := inputRequired(t, first)

	params := retryParams("set_secret", args, first.RequestState)
	params.SetProgressToken("cc-2")
	started := time.Now()
	res, err := c.CallTool(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	if elapsed := time.Since(started); elapsed < limit {
		t.Errorf("the retry answered after %s, before the cap (%s)", elapsed, limit)
	}
	if again := inputRequired(t, res); again.URL != asked.URL {
		t.Fatalf("at the cap the retry asked for another flow: %+v", again)
	}
}

// TestAWaitWithProgressEndsAtTheDeadline: a flow whose deadline comes before the cap ends
// the wait at the deadline, with the honest answer.
func TestAWaitWithProgressEndsAtTheDeadline(t *testing.T) {
	t.Parallel()
	f := newFixture(t, withProgressInterval(50*time.Millisecond), func(o *testOptions) { o.TTL = 500 * time.Millisecond })
	c := f.connectModern(alice, clientConfig{urlMode: true})
	args := map[string]any{"name": demoSlot}
	first := c.call("set_secret", args)
	inputRequired(t, first)

	params := retryParams("set_secret", args, first.RequestState)
	params.SetProgressToken("cc-3")
	res, err := c.CallTool(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	if got := flowOf(t, res); res.NeedsInput() || got.Status != "expired" {
		t.Fatalf("after the deadline: needs input %v, %+v", res.NeedsInput(), got)
	}
}
