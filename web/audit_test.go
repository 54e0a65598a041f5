package web

import (
	"bufio"
	"cmp"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/audit"
	"github.com/urlflow/urlflow/state/flow"
)

// exported reads GET /api/v1/audit?query as an operator.
func (f *fixture) exported(t *testing.T, query string) (answer, []audit.Event) {
	t.Helper()
	got := f.api(t, http.MethodGet, "/api/v1/audit?"+query, f.readOnlyToken, "")
	if got.Status != http.StatusOK {
		t.Fatalf("audit export answered %d: %s", got.Status, got.Body)
	}
	var events []audit.Event
	lines := bufio.NewScanner(strings.NewReader(got.Body))
	for lines.Scan() {
		var e audit.Event
		if err := json.Unmarshal(lines.Bytes(), &e); err != nil {
			t.Fatalf("line %q is not an event: %v", lines.Text(), err)
		}
		events = append(events, e)
	}
	return got, events
}

func TestTheAuditTrailHoldsAFullFlowAndNeverItsSecret(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	const canary = "demo_CANARYcanary0123456789XYZ"
	e := f.newFlow(t, "alice")
	b := f.browser(t, "alice")
	b.submit(e.ID, b.continueToForm(e.ID), canary).want(t, http.StatusOK)
	f.wantState(t, e.ID, flow.Complete)
	// Someone else opens the link, again and again: one event, then a count.
	mallory := f.browser(t, "mallory")
	for range 5 {
		mallory.open(e.ID)
	}
	f.api(t, http.MethodPost, "/api/v1/elicitations/"+e.ID+"/cancel", f.operatorToken, `{"reason": "checking the trail"}`).
		want(t, http.StatusConflict)
	f.server.opts.Audit.Flush(t.Context())

	got, events := f.exported(t, "since=1h")
	if ct := got.Header.Get("Content-Type"); ct != "application/x-ndjson" || strings.Contains(got.Body, canary) {
		t.Fatalf("Content-Type %q; the export holds the secret: %v", ct, strings.Contains(got.Body, canary))
	}
	var transitions []string
	seen := map[string]int{}
	for _, ev := range events {
		seen[ev.Event]++
		if ev.Event == audit.Transition && ev.Elicitation == e.ID {
			transitions = append(transitions, ev.From+"→"+ev.To+" ("+ev.Cause+")")
			if ev.User == nil || ev.User.Subject != "alice" || ev.Replica != "test-replica" || ev.Kind != "secret" || ev.Target != demoSlot {
				t.Errorf("transition event without its metadata: %+v", ev)
			}
		}
	}
	want := []string{"→pending (created)", "pending→in_progress (browser_open)", "in_progress→complete (verified)"}
	if !slices.Equal(transitions, want) {
		t.Errorf("transitions %v, want %v", transitions, want)
	}
	if seen[audit.CredentialStored] != 1 || seen[audit.SignedIn] < 2 {
		t.Errorf("events %v, want one credential stored and the sign-ins", seen)
	}
	var refused []audit.Event
	for _, ev := range events {
		if ev.Event == audit.IdentityRefused && ev.Elicitation == e.ID {
			refused = append(refused, ev)
		}
	}
	if len(refused) != 2 || refused[0].User.Subject != "mallory" || refused[1].Count != 4 || refused[1].LastAt.IsZero() {
		t.Errorf("mallory's five refusals are audited as %+v, want one event and one that counts the other 4", refused)
	}
	if !slices.IsSortedFunc(events, func(a, b audit.Event) int { return cmp.Compare(audit.ReceivedAt(a), audit.ReceivedAt(b)) }) ||
		audit.ReceivedAt(events[0]) == 0 {
		t.Error("the export is not in the order the trail received the events")
	}

	for _, tc := range []struct {
		name, token, query string
		status             int
	}{
		{"a user", f.token(t, "alice"), "since=1h", http.StatusForbidden},
		{"a service", f.serviceKeys[weather], "since=1h", http.StatusForbidden},
		{"no since", f.operatorToken, "", http.StatusBadRequest},
		{"a bad time", f.operatorToken, "since=yesterday", http.StatusBadRequest},
	} {
		if got := f.api(t, http.MethodGet, "/api/v1/audit?"+tc.query, tc.token, ""); got.Status != tc.status {
			t.Errorf("%s: answered %d, want %d", tc.name, got.Status, tc.status)
		}
	}
}

func TestAnOperatorsActionIsAuditedWithTheOperatorAndReason(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	e := f.newFlow(t, "alice")
	f.api(t, http.MethodPost, "/api/v1/elicitations/"+e.ID+"/cancel", f.operatorToken, `{"reason": "ticket 42"}`).want(t, http.StatusOK)
	var action, transition *audit.Event
	for _, ev := range f.audited(t, "alice") {
		switch {
		case ev.Event == audit.OperatorAction:
			action = &ev
		case ev.Event == audit.Transition && ev.To == string(flow.Cancelled):
			transition = &ev
		}
	}
	if action == nil || action.Actor != state.ActorOperator || !strings.HasPrefix(action.By, "token ") || action.Reason != "ticket 42" ||
		action.Cause != "cancel" || action.Elicitation != e.ID {
		t.Errorf("operator action audited as %+v", action)
	}
	if transition == nil || transition.Actor != state.ActorOperator || transition.By != action.By || transition.Reason != "ticket 42" {
		t.Errorf("the cancel is audited as %+v", transition)
	}
}

func TestRefusedTokensAndRateLimitsAreAuditedWithoutTheToken(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	const forged = "forged.CANARY.token"
	for range 3 {
		f.api(t, http.MethodGet, "/api/v1/elicitations", forged, "").want(t, http.StatusUnauthorized)
	}
	f.server.opts.Audit.Flush(t.Context())
	got, events := f.exported(t, "since=1h")
	if strings.Contains(got.Body, "CANARY") {
		t.Fatalf("the audit trail holds the token: %s", got.Body)
	}
	var refused []audit.Event
	for _, e := range events {
		if e.Event == audit.IdentityRefused {
			refused = append(refused, e)
		}
	}
	if len(refused) != 2 || !strings.HasPrefix(refused[0].Reason, "bearer token not valid") || refused[0].Address == "" || refused[1].Count != 2 {
		t.Errorf("three refused tokens audited as %+v, want one event and one counting 2 more", refused)
	}
}
