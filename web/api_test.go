package web

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/urlflow/urlflow/forget"
	"github.com/urlflow/urlflow/oauth/identity"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/audit"
	"github.com/urlflow/urlflow/state/flow"
)

func TestStatusAnswersTheOwnerWithTheHistory(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	e := f.newFlow(t, "alice")
	f.browser(t, "alice").open(e.ID)

	got := f.api(t, http.MethodGet, "/api/v1/elicitations/"+e.ID, f.token(t, "alice"), "")

	var v flow.View
	got.decode(t, &v)
	if got.Status != http.StatusOK || v.ID != e.ID || v.State != flow.InProgress || v.Kind != state.KindSecret ||
		v.Target != demoSlot || v.URL != f.URL+"/e/"+e.ID || !v.ExpiresAt.Equal(e.ExpiresAt) {
		t.Errorf("answered %d %+v, want 200 with the running elicitation and its URL", got.Status, v)
	}
	if evs := events(v.History); !slices.Equal(evs, []flow.Event{flow.Created, flow.BrowserOpen}) {
		t.Errorf("history %v, want created, browser_open", evs)
	}
}

func TestAnythingThatIsNotTheCallersElicitationReadsAsUnknown(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	alices := f.newFlow(t, "alice")
	before := f.snapshot(t, alices.ID)
	bob := f.token(t, "bob")
	for _, tc := range []struct{ name, id string }{
		{"another user's", alices.ID},
		{"well formed, never created", rand.Text()},
		{"malformed", "not-an-id"},
		{"lower case", strings.ToLower(alices.ID)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, r := range []struct{ method, path, body string }{
				{http.MethodGet, "", ""},
				{http.MethodPost, "/cancel", ""},
				{http.MethodPost, "/retry", ""},
				{http.MethodPost, "/retry", `{"new": true}`},
				{http.MethodPost, "/retry", "not JSON"},
			} {
				got := f.api(t, r.method, "/api/v1/elicitations/"+tc.id+r.path, bob, r.body)
				var body map[string]any
				got.decode(t, &body)
				if got.Status != http.StatusNotFound || len(body) != 2 || body["id"] != tc.id || body["state"] != "unknown" {
					t.Errorf("%s %s: %d %v, want 404 {id, state: unknown}", r.method, r.path, got.Status, body)
				}
			}
		})
	}
	f.wantUnchanged(t, alices.ID, before)
}

func TestCancelEndsARunningFlowAndRefusesAnEndedOne(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	for _, tc := range []struct {
		name   string
		setup  []flow.Event
		status int
		want   flow.State
	}{
		{"pending", nil, http.StatusOK, flow.Cancelled},
		{"consented", []flow.Event{flow.ClientAccept}, http.StatusOK, flow.Cancelled},
		{"in progress", []flow.Event{flow.BrowserOpen}, http.StatusOK, flow.Cancelled},
		{"failed", []flow.Event{flow.BrowserOpen, flow.VerifyFailed}, http.StatusOK, flow.Cancelled},
		{"unknown", []flow.Event{flow.NoAnswer}, http.StatusOK, flow.Cancelled},
		{"declined", []flow.Event{flow.ClientDecline}, http.StatusConflict, flow.Declined},
		{"cancelled", []flow.Event{flow.ClientCancel}, http.StatusConflict, flow.Cancelled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := f.newFlow(t, "alice")
			for _, ev := range tc.setup {
				f.apply(t, e.ID, ev, state.ActorSystem)
			}
			from := f.get(t, e.ID).State

			got := f.api(t, http.MethodPost, "/api/v1/elicitations/"+e.ID+"/cancel", f.token(t, "alice"), "")

			var v flow.View
			got.decode(t, &v)
			if got.Status != tc.status || v.State != tc.want || v.ID != e.ID {
				t.Errorf("answered %d in state %s, want %d in %s", got.Status, v.State, tc.status, tc.want)
			}
			f.wantState(t, e.ID, tc.want)
			last := f.lastEntry(t, e.ID)
			if last.Event != flow.CancelRequested || last.Actor != state.ActorUser || last.From != from || last.To != tc.want {
				t.Errorf("last history entry %+v, want cancel by the user from %s to %s", last, from, tc.want)
			}
			if len(v.History) == 0 || v.History[len(v.History)-1].Event != flow.CancelRequested {
				t.Error("the answer's history does not end with the cancel")
			}
		})
	}
}

func TestCancelOfACompleteFlowChangesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	e := f.newFlow(t, "alice")
	b := f.browser(t, "alice")
	b.submit(e.ID, b.continueToForm(e.ID), validKey).want(t, http.StatusOK)

	got := f.api(t, http.MethodPost, "/api/v1/elicitations/"+e.ID+"/cancel", f.token(t, "alice"), "")

	var v flow.View
	got.decode(t, &v)
	if got.Status != http.StatusConflict || v.State != flow.Complete || v.URL != "" {
		t.Errorf("answered %d %+v, want 409 complete without a URL", got.Status, v)
	}
	if _, value := f.storedSecret(t, "alice", demoSlot); value != validKey {
		t.Error("the credential changed")
	}
}

// TestAnOperatorReadsWhatTheListingShowsOperators: one elicitation read by an operator has
// its user, client, era, replica and session, as a listing shows operators; its user reads
// it without them.
func TestAnOperatorReadsWhatTheListingShowsOperators(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	e := f.newFlow(t, "alice", func(n *flow.NewElicitation) { n.SessionID, n.Replica = "session-1", "replica-a" })
	var op flow.Listed
	f.api(t, http.MethodGet, "/api/v1/elicitations/"+e.ID, f.operatorToken, "").decode(t, &op)
	if op.User == nil || op.User.Subject != "alice" || op.Client.Name != "probe-client" || op.Client.Version != "1.2.3" ||
		op.Era != "2025-11-25" || op.Replica != "replica-a" || op.Session != "session-1" || len(op.History) != 1 {
		t.Errorf("the operator read %+v", op)
	}
	raw := f.api(t, http.MethodGet, "/api/v1/elicitations/"+e.ID, f.token(t, "alice"), "")
	for _, field := range []string{`"user"`, `"session"`, "session-1"} {
		if strings.Contains(raw.Body, field) {
			t.Errorf("alice reads %s in %s", field, raw.Body)
		}
	}
}

// TestAnOperatorNamesAnElicitationByTheBeginningOfItsID: eight or more characters of an ID
// name it for an operator, in any case and for any action; a beginning that several IDs
// share is refused with them; for anyone else, a beginning names nothing.
func TestAnOperatorNamesAnElicitationByTheBeginningOfItsID(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	e := f.newFlow(t, "alice")
	for _, prefix := range []string{e.ID[:flow.MinPrefix], strings.ToLower(e.ID[:12])} {
		var v flow.Listed
		got := f.api(t, http.MethodGet, "/api/v1/elicitations/"+prefix, f.operatorToken, "")
		if got.decode(t, &v); got.Status != http.StatusOK || v.ID != e.ID {
			t.Errorf("GET %s: %d %s", prefix, got.Status, got.Body)
		}
	}
	f.api(t, http.MethodGet, "/api/v1/elicitations/"+e.ID[:flow.MinPrefix-1], f.operatorToken, "").want(t, http.StatusNotFound, "unknown")
	f.api(t, http.MethodGet, "/api/v1/elicitations/"+e.ID[:12], f.token(t, "alice"), "").want(t, http.StatusNotFound, "unknown")
	cancel := f.api(t, http.MethodPost, "/api/v1/elicitations/"+e.ID[:10]+"/cancel", f.operatorToken, `{"reason": "by its beginning"}`)
	if cancel.Status != http.StatusOK || f.get(t, e.ID).State != flow.Cancelled {
		t.Errorf("cancel by the beginning of the ID: %d %s", cancel.Status, cancel.Body)
	}

	twins := []string{"QQQQQQQQQQ" + strings.Repeat("A", 54), "QQQQQQQQQQ" + strings.Repeat("B", 54)}
	for i, id := range twins { // two entries of the listing index that share ten characters
		key := fmt.Sprintf("%s{flows:%d}:all", state.KeyPrefix, i)
		if err := f.redis.Client(t).ZAdd(t.Context(), key, redis.Z{Member: "1764649587413:" + id}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	var ambiguous struct {
		Error      string
		Candidates []string
	}
	got := f.api(t, http.MethodGet, "/api/v1/elicitations/QQQQQQQQ", f.operatorToken, "")
	if got.decode(t, &ambiguous); got.Status != http.StatusBadRequest || !slices.Equal(ambiguous.Candidates, twins) ||
		!strings.Contains(ambiguous.Error, "give more of the ID") {
		t.Errorf("an ambiguous beginning: %d %s", got.Status, got.Body)
	}
}

func TestAnOperatorReadsAndCancelsAnyonesElicitation(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	e := f.newFlow(t, "alice")

	status := f.api(t, http.MethodGet, "/api/v1/elicitations/"+e.ID, f.operatorToken, "")
	var v flow.View
	status.decode(t, &v)
	if status.Status != http.StatusOK || v.ID != e.ID || len(v.History) != 1 {
		t.Errorf("status answered %d %+v, want 200 with the history", status.Status, v)
	}

	path := "/api/v1/elicitations/" + e.ID + "/cancel"
	before := f.snapshot(t, e.ID)
	f.api(t, http.MethodPost, path, f.operatorToken, "").want(t, http.StatusBadRequest, "reason")
	f.api(t, http.MethodPost, path, f.operatorToken, `{"reason": "   "}`).want(t, http.StatusBadRequest, "reason")
	f.api(t, http.MethodPost, path, f.readOnlyToken, `{"reason": "looks stuck"}`).want(t, http.StatusForbidden, "read")
	f.wantUnchanged(t, e.ID, before)

	cancel := f.api(t, http.MethodPost, path, f.operatorToken, `{"reason": "user asked on the helpdesk\u0007 (ticket 42)"}`)
	cancel.decode(t, &v)
	if cancel.Status != http.StatusOK || v.State != flow.Cancelled {
		t.Errorf("cancel answered %d %s, want 200 cancelled", cancel.Status, v.State)
	}
	last := f.lastEntry(t, e.ID)
	if op, _ := identity.NewOperators([]string{f.operatorToken}, nil).Match(f.operatorToken); last.Actor != state.ActorOperator ||
		last.Event != flow.CancelRequested || last.By != op.Name || last.Reason != "user asked on the helpdesk (ticket 42)" {
		t.Errorf("last history entry %+v, want a cancel by operator %q with the reason, cleaned", last, op.Name)
	}
	unknown := f.api(t, http.MethodGet, "/api/v1/elicitations/"+rand.Text(), f.operatorToken, "")
	if unknown.Status != http.StatusNotFound {
		t.Errorf("an unknown ID answered %d to the operator, want 404", unknown.Status)
	}
}

func TestRetryOfARunningFlowAnswersItsURL(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	e := f.newFlow(t, "alice")
	before := f.snapshot(t, e.ID)
	for _, body := range []string{"", "  ", `{}`, `{"new": true}`} {
		got := f.api(t, http.MethodPost, "/api/v1/elicitations/"+e.ID+"/retry", f.token(t, "alice"), body)
		var v flow.View
		got.decode(t, &v)
		if got.Status != http.StatusOK || v.ID != e.ID || v.State != flow.Pending || v.URL != f.URL+"/e/"+e.ID {
			t.Errorf("body %q: answered %d %+v, want 200 with the URL", body, got.Status, v)
		}
	}
	f.wantUnchanged(t, e.ID, before)
}

func TestRetryOfAnEndedFlowSendsTheNotificationAgainToALiveSession(t *testing.T) {
	t.Parallel()
	// The stand-in notifier writes every requeued notification, as the MCP server does for
	// a session whose stream is connected.
	f := newFixture(t, fixtureOptions{notifier: func(ctx context.Context, s *flow.Store, n flow.Notice) {
		if n.What == flow.NoticeRequeue {
			s.Deliveries().Record(ctx, n.ID, flow.SessionStream, nil)
		}
	}})
	session := f.liveSession(t, "alice")
	e := f.newFlow(t, "alice", inSession(session))
	f.apply(t, e.ID, flow.ClientDecline, state.ActorClient)

	got := f.api(t, http.MethodPost, "/api/v1/elicitations/"+e.ID+"/retry", f.token(t, "alice"), "")

	var v flow.View
	got.decode(t, &v)
	if got.Status != http.StatusOK || v.State != flow.Declined || v.Delivery.Attempts != 1 || v.Delivery.WrittenAt == nil {
		t.Errorf("answered %d %+v, want 200 with the delivery written", got.Status, v)
	}
	h := events(f.history(t, e.ID))
	if !slices.Contains(h, flow.NotifyRequeued) || h[len(h)-1] != flow.Notified {
		t.Errorf("history %v, want notify_requeued then notified", h)
	}
}

func TestRetryReportsADeliveryThatFailed(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{notifier: func(ctx context.Context, s *flow.Store, n flow.Notice) {
		if n.What == flow.NoticeRequeue {
			s.Deliveries().Record(ctx, n.ID, flow.SessionStream, errors.New("the stream is not connected"))
		}
	}})
	session := f.liveSession(t, "alice")
	e := f.newFlow(t, "alice", inSession(session))
	f.apply(t, e.ID, flow.CancelRequested, state.ActorUser)

	got := f.api(t, http.MethodPost, "/api/v1/elicitations/"+e.ID+"/retry", f.operatorToken, `{"reason": "client says it saw nothing"}`)

	var v flow.View
	got.decode(t, &v)
	if got.Status != http.StatusOK || v.Delivery.Attempts != 1 || v.Delivery.WrittenAt != nil || v.Delivery.LastError != "the stream is not connected" {
		t.Errorf("answered %d %+v, want 200 with the failed attempt", got.Status, v.Delivery)
	}
	if entry := f.history(t, e.ID); !slices.ContainsFunc(entry, func(e flow.Entry) bool {
		return e.Event == flow.NotifyRequeued && e.Actor == state.ActorOperator && e.Reason == "client says it saw nothing"
	}) {
		t.Errorf("history %v has no notify_requeued by the operator", events(entry))
	}
}

func TestRetryOfAnEndedFlowWithoutALiveSessionIsAConflict(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	for _, tc := range []struct {
		name    string
		session string
		says    string
	}{
		{"session ended", "gone-" + rand.Text(), "the client session that started this request has ended"},
		{"no session", "", "this request has no client session to notify"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := f.newFlow(t, "alice", inSession(tc.session))
			f.apply(t, e.ID, flow.ClientDecline, state.ActorClient)
			before := f.snapshot(t, e.ID)

			got := f.api(t, http.MethodPost, "/api/v1/elicitations/"+e.ID+"/retry", f.token(t, "alice"), "")

			var body struct {
				Error string `json:"error"`
				flow.View
			}
			got.decode(t, &body)
			if got.Status != http.StatusConflict || !strings.HasPrefix(body.Error, tc.says) || body.State != flow.Declined || body.ID != e.ID {
				t.Errorf("answered %d %q in %s, want 409 %q", got.Status, body.Error, body.State, tc.says)
			}
			f.wantUnchanged(t, e.ID, before)
		})
	}
}

func TestANewAttemptOfAFlowThatEndedWithoutSuccessIsLinkedBothWays(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	for _, tc := range []struct {
		name string
		end  func(t *testing.T, id string)
	}{
		{"declined", func(t *testing.T, id string) { f.apply(t, id, flow.ClientDecline, state.ActorClient) }},
		{"cancelled", func(t *testing.T, id string) { f.apply(t, id, flow.CancelRequested, state.ActorUser) }},
		{"expired", func(t *testing.T, id string) { f.clock.Advance(11 * time.Minute) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := f.newFlow(t, "alice", inSession("session-"+tc.name))
			tc.end(t, old.ID)
			ended := f.get(t, old.ID).State
			if ended != flow.State(tc.name) {
				t.Fatalf("the flow is %s, want %s", ended, tc.name)
			}

			got := f.api(t, http.MethodPost, "/api/v1/elicitations/"+old.ID+"/retry", f.token(t, "alice"), `{"new": true}`)

			var next flow.View
			got.decode(t, &next)
			if got.Status != http.StatusCreated || next.ID == old.ID || next.RetryOf != old.ID || next.State != flow.Pending ||
				next.URL != f.URL+"/e/"+next.ID || got.Header.Get("Location") != "/api/v1/elicitations/"+next.ID {
				t.Fatalf("answered %d %+v (Location %q), want 201 with a new pending attempt", got.Status, next, got.Header.Get("Location"))
			}
			if o := f.get(t, old.ID); o.RetriedBy != next.ID || o.State != ended {
				t.Errorf("the old attempt is %s with retriedBy %q, want %s with %q", o.State, o.RetriedBy, ended, next.ID)
			}
			n := f.get(t, next.ID)
			if n.User != f.user("alice") || n.Purpose != old.Purpose || n.Target != old.Target || n.SessionID != old.SessionID {
				t.Errorf("the new attempt %+v is not for the same user, purpose, slot and session", n)
			}
			if !n.ExpiresAt.After(f.clock.Now().Add(9 * time.Minute)) {
				t.Errorf("the new attempt expires at %s, want the configured 10 minutes", n.ExpiresAt)
			}

			again := f.api(t, http.MethodPost, "/api/v1/elicitations/"+old.ID+"/retry", f.token(t, "alice"), `{"new": true}`)
			var conflict struct {
				Error string `json:"error"`
				flow.View
			}
			again.decode(t, &conflict)
			if again.Status != http.StatusConflict || conflict.Error != "this request was already retried as "+next.ID || conflict.RetriedBy != next.ID {
				t.Errorf("a second new attempt answered %d %q, want 409 naming the first", again.Status, conflict.Error)
			}
		})
	}
}

func TestANewAttemptOfACompleteFlowIsAConflict(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	e := f.newFlow(t, "alice")
	b := f.browser(t, "alice")
	b.submit(e.ID, b.continueToForm(e.ID), validKey).want(t, http.StatusOK)
	before := f.snapshot(t, e.ID)

	got := f.api(t, http.MethodPost, "/api/v1/elicitations/"+e.ID+"/retry", f.token(t, "alice"), `{"new": true}`)

	var body struct {
		Error string `json:"error"`
		flow.View
	}
	got.decode(t, &body)
	if got.Status != http.StatusConflict || body.State != flow.Complete || !strings.Contains(body.Error, "complete") {
		t.Errorf("answered %d %+v, want 409 complete", got.Status, body)
	}
	f.wantUnchanged(t, e.ID, before)
}

func TestARetryBodyThatIsNotJSONIsABadRequest(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	e := f.newFlow(t, "alice")
	f.apply(t, e.ID, flow.ClientDecline, state.ActorClient)
	before := f.snapshot(t, e.ID)
	for _, body := range []string{"new", `{"new": "yes"}`, `{"new": true`, `{"reason": 42}`} {
		got := f.api(t, http.MethodPost, "/api/v1/elicitations/"+e.ID+"/retry", f.token(t, "alice"), body)
		var answer map[string]string
		got.decode(t, &answer)
		if got.Status != http.StatusBadRequest || !strings.Contains(answer["error"], `"new": true`) || !strings.Contains(answer["error"], `"reason"`) {
			t.Errorf("body %q: answered %d %v, want 400 saying what the body may be", body, got.Status, answer)
		}
	}
	f.wantUnchanged(t, e.ID, before)
	if f.get(t, e.ID).RetriedBy != "" {
		t.Error("a bad body started a new attempt")
	}
}

func TestTheAPIWantsAValidBearerToken(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	e := f.newFlow(t, "alice")
	before := f.snapshot(t, e.ID)
	otherResource, err := identity.NewDev([]byte(rand.Text()), f.URL+"/elsewhere").Issue("alice")
	if err != nil {
		t.Fatal(err)
	}
	otherKey, err := identity.NewDev([]byte(rand.Text()), f.URL+"/mcp").Issue("alice")
	if err != nil {
		t.Fatal(err)
	}
	metadata := fmt.Sprintf(`Bearer resource_metadata=%q`, f.URL+"/.well-known/oauth-protected-resource/mcp")
	for _, tc := range []struct {
		name          string
		authorization string
	}{
		{"none", ""},
		{"not bearer", "Basic YWxpY2U6c2VjcmV0"},
		{"garbage", "Bearer not-a-token"},
		{"for another resource", "Bearer " + otherResource},
		{"signed with another key", "Bearer " + otherKey},
		{"three fields", "Bearer " + f.token(t, "alice") + " extra"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, r := range []struct{ method, path, body string }{
				{http.MethodGet, "", ""}, {http.MethodPost, "/cancel", ""}, {http.MethodPost, "/retry", ""},
				{http.MethodPost, "/retry", `{"new": true}`},
				{http.MethodPost, "/retry", "not JSON"}, // the token is checked before the body
			} {
				req := request{method: r.method, path: "/api/v1/elicitations/" + e.ID + r.path,
					header: http.Header{"Authorization": {tc.authorization}}}
				if r.body != "" {
					req.body, req.contentType = strings.NewReader(r.body), "application/json"
				}
				got := f.send(t, nil, req)
				var body map[string]string
				got.decode(t, &body)
				if !strings.HasPrefix(tc.authorization, "Bearer ") || strings.Count(tc.authorization, " ") > 1 {
					// No single bearer token: a challenge without an error code.
					if got.Status != http.StatusUnauthorized || got.Header.Get("WWW-Authenticate") != metadata || body["error"] != "a bearer token is required" {
						t.Errorf("%s %s: %d %q %v, want 401 with the resource metadata", r.method, r.path, got.Status, got.Header.Get("WWW-Authenticate"), body)
					}
					continue
				}
				got.wantRefusedToken(t, f.URL+"/.well-known/oauth-protected-resource/mcp")
			}
		})
	}
	f.wantUnchanged(t, e.ID, before)
}

func TestTheAPIWantsTheRequiredScopes(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{requiredScopes: []string{"urlflow", "profile"},
		scopes: map[string][]string{"alice": {"profile", "urlflow"}, "bob": {"profile"}}})
	alices := f.newFlow(t, "alice")
	bobs := f.newFlow(t, "bob")
	before := f.snapshot(t, bobs.ID)

	for _, path := range []string{"", "/cancel"} {
		method := http.MethodGet
		if path != "" {
			method = http.MethodPost
		}
		got := f.api(t, method, "/api/v1/elicitations/"+bobs.ID+path, f.token(t, "bob"), "")
		var body map[string]string
		got.decode(t, &body)
		want := fmt.Sprintf(`Bearer error="insufficient_scope", scope="urlflow profile", resource_metadata=%q`,
			f.URL+"/.well-known/oauth-protected-resource/mcp")
		if got.Status != http.StatusForbidden || got.Header.Get("WWW-Authenticate") != want || body["error"] != "the token lacks the scopes urlflow" {
			t.Errorf("%s %s without the scope: %d %q %v, want 403 insufficient_scope", method, path, got.Status, got.Header.Get("WWW-Authenticate"), body)
		}
	}
	f.wantUnchanged(t, bobs.ID, before)

	if got := f.api(t, http.MethodGet, "/api/v1/elicitations/"+alices.ID, f.token(t, "alice"), ""); got.Status != http.StatusOK {
		t.Errorf("with the scopes: %d, want 200", got.Status)
	}
	if got := f.api(t, http.MethodGet, "/api/v1/elicitations/"+bobs.ID, f.operatorToken, ""); got.Status != http.StatusOK {
		t.Errorf("an operator token: %d, want 200 (operators carry no scopes)", got.Status)
	}
}

func TestAnOperatorForgetsAUser(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	alices, bobs := f.newFlow(t, "alice"), f.newFlow(t, "bob")
	f.apply(t, alices.ID, flow.ClientAccept, state.ActorClient)
	alice := f.user("alice")
	body := func(subject, reason string) string {
		doc, _ := json.Marshal(map[string]string{"issuer": alice.Issuer, "subject": subject, "reason": reason})
		return string(doc)
	}
	const path = "/api/v1/users/forget"
	f.api(t, http.MethodPost, path, f.token(t, "alice"), body("alice", "me")).want(t, http.StatusForbidden, "operators")
	f.api(t, http.MethodPost, path, f.readOnlyToken, body("alice", "ticket 42")).want(t, http.StatusForbidden, "read")
	f.api(t, http.MethodPost, path, f.operatorToken, body("alice", "")).want(t, http.StatusBadRequest, "reason")
	f.api(t, http.MethodPost, path, f.operatorToken, body("", "ticket 42")).want(t, http.StatusBadRequest, "subject")
	f.api(t, http.MethodPost, path, f.operatorToken, body(" alice", "ticket 42")).want(t, http.StatusBadRequest, "subject")
	f.api(t, http.MethodPost, path, f.operatorToken, `{"subject": "alice", "reason": "x", "user": 1}`).want(t, http.StatusBadRequest, "user")
	f.wantState(t, alices.ID, flow.Consented)
	if len(f.audited(t, "alice")) == 0 {
		t.Fatal("the audit trail holds nothing about alice: the test would see nothing")
	}

	// Another forgetting rewriting the trail: a clear conflict, not a failure.
	for b := range audit.Buckets {
		f.redis.Client(t).Set(t.Context(), audit.Key(b)+":rewriting", "another", time.Minute)
	}
	f.api(t, http.MethodPost, path, f.operatorToken, body("alice", "erasure request 42")).want(t, http.StatusConflict, "run it again")
	if len(f.audited(t, "alice")) == 0 {
		t.Fatal("the trail was rewritten while another rewrite held it")
	}
	for b := range audit.Buckets {
		f.redis.Client(t).Del(t.Context(), audit.Key(b)+":rewriting")
	}

	answer := f.api(t, http.MethodPost, path, f.operatorToken, body("alice", "erasure request 42"))
	var r forget.Report
	answer.decode(t, &r)
	// The run that stopped erased the flow already; this one finishes the trail.
	if answer.Status != http.StatusOK || !strings.HasPrefix(r.Tombstone, "forgotten-") || r.AuditEvents == 0 {
		t.Fatalf("forget answered %d %+v; want 200 with the tombstone and the audit events", answer.Status, r)
	}
	if got := f.api(t, http.MethodGet, "/api/v1/elicitations/"+alices.ID, f.operatorToken, ""); got.Status != http.StatusNotFound {
		t.Errorf("alice's flow after she was forgotten: %d, want 404", got.Status)
	}
	f.wantState(t, bobs.ID, flow.Pending)
	if got := f.audited(t, "alice"); len(got) != 0 {
		t.Errorf("events about alice after she was forgotten: %+v", got)
	}
	events, err := f.trail.Read(t.Context(), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	last := events[len(events)-1]
	if last.Event != audit.UserForgotten || last.Actor != state.ActorOperator || last.User == nil || last.User.Subject != r.Tombstone ||
		!strings.HasPrefix(last.Reason, "erasure request 42") {
		t.Errorf("the last audit event is %+v; want the forgetting about the tombstone", last)
	}
}
