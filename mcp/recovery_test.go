package mcp

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/flow"
)

// elicitation_status and cancel_elicitation: the MCP side of recovery.

// openLink starts a flow for user's slot with a client without URL mode, which gets the
// link at once, and returns its ID.
func openLink(t *testing.T, f *fixture, c *testClient, slot string) string {
	t.Helper()
	got := flowOf(t, c.call("set_secret", map[string]any{"name": slot}))
	if got.Status != "user_action_required" {
		t.Fatalf("set_secret: %+v", got)
	}
	return got.ElicitationID
}

func TestElicitationStatusShowsTheOwnersElicitationWithItsHistory(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.connect(alice, clientConfig{})
	id := openLink(t, f, c, demoSlot)
	f.browserOpens(id)

	res := c.call("elicitation_status", map[string]any{"elicitationId": id})
	v := viewOf(t, res)
	if res.IsError || v.ID != id || v.State != flow.InProgress || v.Kind != state.KindSecret || v.Target != demoSlot ||
		f.idOf(v.URL) != id || len(v.History) != 2 || v.History[1].Event != flow.BrowserOpen {
		t.Fatalf("isError=%v %+v", res.IsError, v)
	}
	if !strings.Contains(textOf(res), "open in your browser") {
		t.Errorf("text: %q", textOf(res))
	}

	f.browserStores(id, demoKey)
	v = viewOf(t, c.call("elicitation_status", map[string]any{"elicitationId": id}))
	if v.State != flow.Complete || v.URL != "" {
		t.Fatalf("after completion: %+v", v)
	}
}

func TestElicitationStatusWaitsUntilTheFlowEnds(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.connect(alice, clientConfig{})
	id := openLink(t, f, c, demoSlot)

	call := c.start(&sdk.CallToolParams{Name: "elicitation_status",
		Arguments: map[string]any{"elicitationId": id, "waitSeconds": 60}})
	f.browserOpens(id) // a change that is not the end: the wait goes on
	f.browserStores(id, demoKey)
	out := receive(t, call, "status before the flow's end plus "+waitLimit.String())
	if out.err != nil || viewOf(t, out.res).State != flow.Complete {
		t.Fatalf("status: %v %+v", out.err, out.res)
	}
}

func TestElicitationStatusWaitIsCapped(t *testing.T) {
	t.Parallel()
	const limit = time.Second
	f := newFixture(t, withStatusWaitLimit(limit))
	c := f.connect(alice, clientConfig{})
	id := openLink(t, f, c, demoSlot)

	tests := []struct {
		name    string
		seconds int64
		waits   bool // the whole limit
	}{
		{"an hour", 3600, true},
		{"more seconds than a Duration holds", 10_000_000_000, true},
		{"negative", -5, false},
		{"zero", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			started := time.Now()
			res, err := c.CallTool(t.Context(), &sdk.CallToolParams{Name: "elicitation_status",
				Arguments: map[string]any{"elicitationId": id, "waitSeconds": tt.seconds}})
			elapsed := time.Since(started)
			if err != nil {
				t.Fatal(err)
			}
			if v := viewOf(t, res); res.IsError || v.State != flow.Pending {
				t.Fatalf("isError=%v %+v", res.IsError, v)
			}
			if tt.waits && (elapsed < limit || elapsed > limit+5*time.Second) {
				t.Fatalf("waited %s, want the limit %s", elapsed, limit)
			}
			if !tt.waits && elapsed >= limit {
				t.Fatalf("waited %s, want no wait", elapsed)
			}
		})
	}
}

func TestCancelElicitationEndsARunningFlowOnly(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.connect(alice, clientConfig{})
	id := openLink(t, f, c, demoSlot)

	res := c.call("cancel_elicitation", map[string]any{"elicitationId": id})
	v := viewOf(t, res)
	if res.IsError || v.State != flow.Cancelled || !hasEntry(v.History, flow.CancelRequested, state.ActorClient, flow.Pending, flow.Cancelled) {
		t.Fatalf("isError=%v %+v", res.IsError, v)
	}
	if got := flowOf(t, c.call("set_secret", map[string]any{"name": demoSlot})); got.ElicitationID == id {
		t.Fatal("set_secret reused a cancelled flow")
	}

	// A flow that has ended stays as it is, and the answer says so.
	done := openLink(t, f, c, notesSlot)
	f.browserCompletes(done, demoKey)
	for _, ended := range []struct {
		id   string
		want flow.State
	}{{id, flow.Cancelled}, {done, flow.Complete}} {
		res := c.call("cancel_elicitation", map[string]any{"elicitationId": ended.id})
		if v := viewOf(t, res); !res.IsError || v.State != ended.want || !strings.HasPrefix(textOf(res), "Nothing was cancelled") {
			t.Errorf("cancel of a %s flow: isError=%v state %s %q", ended.want, res.IsError, v.State, textOf(res))
		}
		if got := f.get(ended.id).State; got != ended.want {
			t.Errorf("the cancel changed a %s flow to %s", ended.want, got)
		}
	}
}

func TestElicitationsOfOthersReadAsUnknownAndStayUntouched(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	bobs := f.connect(bob, clientConfig{})
	bobsID := openLink(t, f, bobs, demoSlot)
	before := f.history(bobsID)
	c := f.connect(alice, clientConfig{})

	for _, id := range []string{bobsID, "AAAAAAAAAAAAAAAAAAAAAAAAAA", "../../admin", ""} {
		for tool, args := range map[string]map[string]any{
			"elicitation_status": {"elicitationId": id, "waitSeconds": 1},
			"cancel_elicitation": {"elicitationId": id},
		} {
			res := c.call(tool, args)
			got, _ := res.StructuredContent.(map[string]any)
			if res.IsError || !slices.Equal(slices.Sorted(maps.Keys(got)), []string{"id", "state"}) ||
				got["id"] != id || got["state"] != "unknown" || !strings.HasPrefix(textOf(res), "No request with that ID belongs to you") {
				t.Errorf("%s %q: isError=%v %v %q", tool, id, res.IsError, got, textOf(res))
			}
		}
	}
	if e := f.get(bobsID); e.State != flow.Pending || len(f.history(bobsID)) != len(before) {
		t.Fatalf("bob's flow was touched: %s, history %+v", e.State, f.history(bobsID))
	}
}

func TestElicitationStatusSaysWhereEveryStateStands(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.connect(alice, clientConfig{})
	tests := []struct {
		kind   state.Kind
		target string
		events []flow.Event
		want   flow.State
		says   string
	}{
		{state.KindSecret, demoSlot, nil, flow.Pending, "The request for your Demo API key is waiting for you to open https://urlflow.test/e/"},
		{state.KindSecret, demoSlot, []flow.Event{flow.NoAnswer}, flow.Unknown, "is waiting for you to open"},
		{state.KindSecret, demoSlot, []flow.Event{flow.ClientAccept}, flow.Consented, "You agreed in your client; the request for your Demo API key is waiting"},
		{state.KindSecret, demoSlot, []flow.Event{flow.BrowserOpen}, flow.InProgress, "The page for your Demo API key is open in your browser"},
		{state.KindSecret, demoSlot, []flow.Event{flow.BrowserOpen, flow.VerifyFailed}, flow.Failed, "The last attempt for your Demo API key failed; you can try again at https://urlflow.test/e/"},
		{state.KindSecret, demoSlot, []flow.Event{flow.ClientDecline}, flow.Declined, "The request for your Demo API key was declined; nothing was stored."},
		{state.KindSecret, demoSlot, []flow.Event{flow.CancelRequested}, flow.Cancelled, "The request for your Demo API key was cancelled; nothing was stored."},
		{state.KindOAuth, acme, []flow.Event{flow.ClientCancel}, flow.Cancelled, "The request to connect your Acme account was cancelled; nothing was connected."},
		{state.KindOAuth, acme, []flow.Event{flow.BrowserOpen}, flow.InProgress, "The page to connect your Acme account is open in your browser"},
		{state.KindSecret, "retired_slot", []flow.Event{flow.ClientDecline}, flow.Declined, "The request for your retired_slot was declined"},
		{state.KindOAuth, "retired_provider", []flow.Event{flow.ClientDecline}, flow.Declined, "The request to connect your retired_provider account was declined"},
	}
	for _, tt := range tests {
		e := f.create(alice, tt.kind, tt.target)
		f.apply(e.ID, tt.events...)
		res := c.call("elicitation_status", map[string]any{"elicitationId": e.ID})
		if v := viewOf(t, res); v.State != tt.want || !strings.Contains(textOf(res), tt.says) {
			t.Errorf("%s %s: %s %q, want it to say %q", tt.target, tt.want, v.State, textOf(res), tt.says)
		}
	}

	e := f.create(alice, state.KindSecret, demoSlot)
	f.passDeadline(e.ID)
	res := c.call("elicitation_status", map[string]any{"elicitationId": e.ID})
	if v := viewOf(t, res); v.State != flow.Expired || textOf(res) != "The request for your Demo API key expired; nothing was stored." {
		t.Errorf("expired: %s %q", v.State, textOf(res))
	}
}

func TestToolsSayTheStoreIsUnavailableWithoutDetail(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.connect(alice, clientConfig{urlMode: true})
	id := f.create(alice, state.KindSecret, demoSlot).ID
	f.redis.Stop()

	for tool, args := range map[string]map[string]any{
		"set_secret":         {"name": demoSlot},
		"call_api":           apiCall(demoSlot, "GET", "/whoami"),
		"connect":            {"provider": acme},
		"list_connections":   {},
		"disconnect":         {"name": demoSlot},
		"elicitation_status": {"elicitationId": id},
		"cancel_elicitation": {"elicitationId": id},
	} {
		res := c.call(tool, args)
		if !res.IsError || textOf(res) != errUnavailable.Error() {
			t.Errorf("%s: isError=%v %q", tool, res.IsError, textOf(res))
		}
	}
	nothingIn(t, c.elicitations, "elicitation/create")
}

// TestCancelOfAnElicitationGoneSinceItWasSeenReadsAsUnknown: cancel_elicitation starts
// from the copy this replica saw; a record deleted since is unknown, not a store failure.
func TestCancelOfAnElicitationGoneSinceItWasSeenReadsAsUnknown(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.connect(alice, clientConfig{})
	id := openLink(t, f, c, demoSlot)
	rdb := f.redis.Client(t)
	keys, err := rdb.Keys(f.ctx, "urlflow:*:e:"+id).Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("the record of %s: %v %v", id, keys, err)
	}
	if err := rdb.Del(f.ctx, keys[0]).Err(); err != nil {
		t.Fatal(err)
	}
	res := c.call("cancel_elicitation", map[string]any{"elicitationId": id})
	if v := viewOf(t, res); res.IsError || v.State != flow.Unknown || !strings.Contains(textOf(res), "No request with that ID") {
		t.Fatalf("isError=%v state %s %q, want the answer for an unknown elicitation", res.IsError, v.State, textOf(res))
	}
}
