package mcp

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/flow"
)

// Push style (2025-11-25): the tool sends elicitation/create and waits for the flow to end.

func setSecretParams(name string) *sdk.CallToolParams {
	return &sdk.CallToolParams{Name: "set_secret", Arguments: map[string]any{"name": name}}
}

func TestPushAcceptIsConsentNotSuccess(t *testing.T) {
	t.Parallel()
	const wait = 300 * time.Millisecond
	f := newFixture(t, withPushWait(wait))
	c := f.connect(alice, clientConfig{urlMode: true})

	started := time.Now()
	res := c.call("set_secret", map[string]any{"name": demoSlot})
	if elapsed := time.Since(started); elapsed < wait {
		t.Errorf("the call returned after %s, before PushWait (%s)", elapsed, wait)
	}
	asked := receive(t, c.elicitations, "elicitation/create")
	if asked.Mode != "url" || asked.ElicitationID == "" || f.idOf(asked.URL) != asked.ElicitationID ||
		!strings.Contains(asked.Message, "Demo API key") {
		t.Fatalf("elicitation/create: %+v", asked)
	}
	got := flowOf(t, res)
	if res.IsError || got.Status != "waiting" || got.State != flow.Consented || got.ElicitationID != asked.ElicitationID ||
		got.URL != asked.URL || got.ExpiresAt == nil || got.Name != demoSlot {
		t.Fatalf("after an accept and no browser: isError=%v %+v", res.IsError, got)
	}
	if !strings.Contains(textOf(res), asked.URL) {
		t.Errorf("the text does not give the link: %q", textOf(res))
	}
	if f.secretOf(alice, demoSlot) != "" {
		t.Fatal("an accept stored a credential")
	}
	e := f.get(asked.ElicitationID)
	if e.State != flow.Consented || e.SessionID != c.sessionID || e.User != alice || e.Client.Name != "test-client" {
		t.Fatalf("record: %+v", e)
	}
	if !hasEntry(f.history(e.ID), flow.ClientAccept, state.ActorClient, flow.Pending, flow.Consented) {
		t.Errorf("the accept is not in the history: %+v", f.history(e.ID))
	}
}

func TestPushStoresOnceTheBrowserCompletes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.connect(alice, clientConfig{urlMode: true})

	call := c.start(setSecretParams(demoSlot))
	asked := receive(t, c.elicitations, "elicitation/create")
	f.waitForState(asked.ElicitationID, flow.Consented)
	nothingIn(t, call, "result before the browser finished")

	f.browserCompletes(asked.ElicitationID, demoKey)
	out := receive(t, call, "result")
	if out.err != nil {
		t.Fatal(out.err)
	}
	got := flowOf(t, out.res)
	if out.res.IsError || got.Status != "stored" || got.State != flow.Complete || got.ElicitationID != asked.ElicitationID {
		t.Fatalf("result: %+v", got)
	}
	if strings.Contains(wholeOf(out.res), demoKey) {
		t.Fatal("the result carries the secret")
	}
	if f.secretOf(alice, demoSlot) != demoKey {
		t.Fatal("the secret is not stored")
	}
}

func TestPushAnswersTheClientsRefusalHonestly(t *testing.T) {
	t.Parallel()
	tests := []struct {
		action string
		want   flow.State
		event  flow.Event
	}{
		{"decline", flow.Declined, flow.ClientDecline},
		{"cancel", flow.Cancelled, flow.ClientCancel},
	}
	for _, tt := range tests {
		t.Run(tt.action, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			c := f.connect(alice, clientConfig{urlMode: true, answer: answerWith(tt.action)})

			res := c.call("set_secret", map[string]any{"name": demoSlot})
			got := flowOf(t, res)
			if res.IsError || got.Status != string(tt.want) || got.State != tt.want || got.URL != "" {
				t.Fatalf("isError=%v %+v", res.IsError, got)
			}
			if !strings.Contains(textOf(res), string(tt.want)) || !strings.Contains(textOf(res), "Nothing was stored") {
				t.Errorf("text: %q", textOf(res))
			}
			if !hasEntry(f.history(got.ElicitationID), tt.event, state.ActorClient, flow.Pending, tt.want) {
				t.Errorf("history: %+v", f.history(got.ElicitationID))
			}
			if f.secretOf(alice, demoSlot) != "" {
				t.Fatal("a credential was stored")
			}
		})
	}
}

func TestPushWithoutAnAnswerIsUnknown(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		answer func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error)
		reason string
	}{
		{"elicitation/create fails", func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			return nil, errors.New("the client has no window to show")
		}, "elicitation/create failed"},
		{"the client never answers", neverAnswer, "did not answer elicitation/create in time"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, withPushWait(300*time.Millisecond))
			c := f.connect(alice, clientConfig{urlMode: true, answer: tt.answer})

			res := c.call("set_secret", map[string]any{"name": demoSlot})
			got := flowOf(t, res)
			if res.IsError || got.Status != "waiting" || got.State != flow.Unknown || got.URL == "" {
				t.Fatalf("isError=%v %+v", res.IsError, got)
			}
			h := f.history(got.ElicitationID)
			last := h[len(h)-1]
			if last.Event != flow.NoAnswer || last.Actor != state.ActorSystem || last.To != flow.Unknown ||
				!strings.Contains(last.Reason, tt.reason) {
				t.Fatalf("history: %+v", h)
			}
			// Unknown is not the end: the user can still finish in the browser.
			f.browserCompletes(got.ElicitationID, demoKey)
			if res := c.call("set_secret", map[string]any{"name": demoSlot}); flowOf(t, res).Status != "stored" {
				t.Fatalf("after the browser finished: %s", textOf(res))
			}
		})
	}
}

func TestPushWithAProgressTokenWaitsPastPushWaitWithProgress(t *testing.T) {
	t.Parallel()
	const interval = 50 * time.Millisecond
	f := newFixture(t, withPushWait(interval), withProgressInterval(interval))
	c := f.connect(alice, clientConfig{urlMode: true})

	params := setSecretParams(demoSlot)
	params.SetProgressToken("p-1")
	call := c.start(params)
	asked := receive(t, c.elicitations, "elicitation/create")
	// Four notifications take four intervals, far past PushWait, and the call still waits.
	for step := 1; step <= 4; step++ {
		p := receive(t, c.progress, "progress notification")
		if p.ProgressToken != "p-1" || p.Progress != float64(step) || !strings.Contains(p.Message, asked.URL) {
			t.Fatalf("progress %d: %+v", step, p)
		}
	}
	nothingIn(t, call, "result while the flow runs")

	f.browserCompletes(asked.ElicitationID, demoKey)
	out := receive(t, call, "result")
	if out.err != nil || flowOf(t, out.res).Status != "stored" {
		t.Fatalf("result: %v %v", out.err, out.res)
	}
}

// TestThePushWaitIsFiftySecondsByDefault: many clients give up on a request after about 60
// seconds, so the push-style call answers "still waiting" before that unless configured.
func TestThePushWaitIsFiftySecondsByDefault(t *testing.T) {
	t.Parallel()
	f := newFixture(t, withPushWait(0), withProgressInterval(0))
	if got := f.server.opts.PushWait; got != 50*time.Second {
		t.Fatalf("the default push wait is %s, want 50s", got)
	}
	if got := f.server.opts.ProgressInterval; got != 15*time.Second {
		t.Fatalf("the default progress interval is %s, want 15s", got)
	}
}

// TestPushNotifiesEachFlowOnceOnTheSessionsStreams runs several push-style flows in one
// session of a go-sdk client over HTTP, with its own stream (GET) open, and counts the
// completion notifications that reach the client on both streams: the one written on the
// tool call's stream is the delivery, so none follows on the session's stream.
func TestPushNotifiesEachFlowOnceOnTheSessionsStreams(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	endpoint, token := f.serveHTTP()
	c := f.connectHTTP(endpoint, token("dev"), "2025-11-25", clientConfig{urlMode: true}, true)

	var ids []string
	for range 3 {
		call := c.start(&sdk.CallToolParams{Name: "set_secret", Arguments: map[string]any{"name": demoSlot, "replace": true}})
		asked := receive(t, c.elicitations, "elicitation/create")
		f.browserCompletes(asked.ElicitationID, demoKey)
		if out := receive(t, call, "result"); out.err != nil || flowOf(t, out.res).Status != "stored" {
			t.Fatalf("flow %d: %v %+v", len(ids)+1, out.err, out.res)
		}
		ids = append(ids, asked.ElicitationID)
	}
	for _, id := range ids {
		e := f.waitFor(id, "delivery recorded", func(e *flow.Elicitation) bool { return e.Delivery.WrittenAt != nil })
		if e.Delivery.Attempts != 1 {
			t.Errorf("%s: %d delivery attempts, want 1 (on the call's stream): %+v", id, e.Delivery.Attempts, e.Delivery)
		}
	}
	// Whatever the notifier wrote on the session's stream came before this marker there.
	c.markSessionStream(f)

	got := map[string]int{}
	for len(c.completions) > 0 {
		got[<-c.completions]++
	}
	for _, id := range ids {
		if got[id] != 1 {
			t.Errorf("%s: %d completion notifications, want 1", id, got[id])
		}
	}
}

// TestACallThatPicksUpAnAcceptedFlowAsksAgain: a push-style call reuses the running
// elicitation of the same user and secret in the same session. When the client had
// accepted it already (the call that showed it ended, for example after the page's form
// post was refused with 429), the call used to send nothing and wait in silence for the
// push wait: the client got no elicitation/create at all, on every call until the
// deadline. That was the "lost prompts" of the load run (4 of about 15,000 calls;
// BenchmarkLoad with the default rate limits shows it at once). Every call asks; a second
// accept changes nothing.
func TestACallThatPicksUpAnAcceptedFlowAsksAgain(t *testing.T) {
	t.Parallel()
	for _, st := range []flow.State{flow.Consented, flow.InProgress} {
		t.Run(string(st), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, withPushWait(300*time.Millisecond))
			c := f.connect(alice, clientConfig{urlMode: true})
			first := flowOf(t, c.call("set_secret", map[string]any{"name": demoSlot}))
			asked := receive(t, c.elicitations, "the first elicitation/create")
			if first.Status != "waiting" || first.State != flow.Consented {
				t.Fatalf("first call: %+v", first)
			}
			if st == flow.InProgress {
				f.browserOpens(asked.ElicitationID)
			}

			second := c.start(setSecretParams(demoSlot))
			again := receive(t, c.elicitations, "elicitation/create of the second call")
			if again.ElicitationID != asked.ElicitationID || again.URL != asked.URL {
				t.Fatalf("asked again for %s at %s, want %s at %s", again.ElicitationID, again.URL, asked.ElicitationID, asked.URL)
			}
			f.browserCompletes(asked.ElicitationID, demoKey)
			if out := receive(t, second, "the second call's result"); out.err != nil || flowOf(t, out.res).Status != "stored" {
				t.Fatalf("second call: %+v", out)
			}
			if e := f.get(asked.ElicitationID); e.State != flow.Complete {
				t.Fatalf("state %s", e.State)
			}
		})
	}
}
