package web

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/urlflow/urlflow/ask"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/flow"
	"github.com/urlflow/urlflow/state/once"
	"github.com/urlflow/urlflow/state/ratelimit"
	"github.com/urlflow/urlflow/web/api"
	"github.com/urlflow/urlflow/web/limits"
)

// createWithKey sends a create as service for the user of userToken with an
// Idempotency-Key header.
func (f *fixture) createWithKey(t *testing.T, service, userToken, key, body string) answer {
	t.Helper()
	return f.send(t, nil, request{method: http.MethodPost, path: "/api/v1/elicitations", token: f.serviceKeys[service],
		header:      http.Header{api.UserTokenHeader: {userToken}, api.IdempotencyHeader: {key}},
		body:        strings.NewReader(body),
		contentType: "application/json"})
}

// createAnswerOf decodes a create answer.
func createAnswerOf(t *testing.T, got answer) api.CreateAnswer {
	t.Helper()
	var a api.CreateAnswer
	got.decode(t, &a)
	return a
}

func TestARetriedCreateWithAnIdempotencyKeyGetsTheFirstAnswer(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	alice := f.userTokenFor(t, "alice", weather)
	first := created(t, f.createWithKey(t, weather, alice, "order-1", createDemoKey), http.StatusCreated)
	// Ended, the flow is no longer reused by a create; the key still answers with it.
	f.asService(t, weather, http.MethodPost, "/api/v1/elicitations/"+first.ID+"/cancel", "", "").want(t, http.StatusOK)

	again := f.createWithKey(t, weather, alice, `"order-1"`, createDemoKey) // quoted, as a structured field
	if a := createAnswerOf(t, again); again.Status != http.StatusCreated || a.Status != api.StatusEnded || a.Elicitation == nil ||
		a.Elicitation.ID != first.ID || a.Elicitation.State != flow.Cancelled || again.Location() != "/api/v1/elicitations/"+first.ID {
		t.Errorf("the retried create answered %d %s at %q, want the first elicitation as it now stands: ended", again.Status, again.Body, again.Location())
	}
	if fresh := created(t, f.createWithKey(t, weather, alice, "order-2", createDemoKey), http.StatusCreated); fresh.ID == first.ID {
		t.Error("a new key got the first answer")
	}

	// The same key for another request, or for another user, is refused and creates nothing.
	f.createWithKey(t, weather, alice, "order-1", `{"slot": "demo_api_key", "message": "other"}`).want(t, http.StatusUnprocessableEntity, "another request")
	f.createWithKey(t, weather, f.userTokenFor(t, "bob", weather), "order-1", createDemoKey).want(t, http.StatusUnprocessableEntity)
	if n := len(f.keys(t, "*open:*")); n != 1 {
		t.Errorf("%d open elicitations, want order-2's alone", n)
	}
	// Keys are per service: another service's order-1 is its own.
	if v := created(t, f.createWithKey(t, calendar, f.userTokenFor(t, "alice", calendar), "order-1", createDemoKey), http.StatusCreated); v.ID == first.ID || v.Service != calendar {
		t.Errorf("calendar's order-1 answered %+v", v)
	}

	// While the first request with a key is being answered, the same request waits its turn.
	var req api.CreateRequest
	if err := json.Unmarshal([]byte(createDemoKey), &req); err != nil {
		t.Fatal(err)
	}
	_, _, err := once.New(f.redis.Client(t)).Do(t.Context(), weather, "busy", api.CreateDigest(f.user("alice"), req),
		func(context.Context) (once.Answer, error) {
			f.createWithKey(t, weather, alice, "busy", createDemoKey).want(t, http.StatusConflict, "still being answered")
			return once.Answer{}, nil
		})
	if err != nil {
		t.Fatal(err)
	}

	for _, bad := range []string{"", strings.Repeat("k", 256), "two words", `"unclosed`} {
		f.createWithKey(t, weather, alice, bad, createDemoKey).want(t, http.StatusBadRequest, api.IdempotencyHeader)
	}
}

// keys returns the Redis keys that match pattern.
func (f *fixture) keys(t *testing.T, pattern string) []string {
	t.Helper()
	keys, err := f.redis.Client(t).Keys(t.Context(), pattern).Result()
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// resumeBody is a create that continues requestState with the client's action.
func resumeBody(call, requestState, action string) string {
	body := map[string]any{"slot": demoSlot, "call": call, "requestState": requestState}
	if action != "" {
		body["action"] = action
	}
	b, _ := json.Marshal(body)
	return string(b)
}

func TestA2026ServiceGoesOnWithTheRequestStateUrlflowSigned(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	alice := f.userTokenFor(t, "alice", weather)
	const call = "get_forecast:digest-of-arguments"
	first := createAnswerOf(t, f.asService(t, weather, http.MethodPost, "/api/v1/elicitations", alice,
		`{"slot": "demo_api_key", "call": "`+call+`"}`))
	if first.RequestState == "" || first.Elicitation == nil {
		t.Fatalf("the create answered %+v, want a requestState", first)
	}
	id := first.Elicitation.ID

	// The client's retry: its accept is recorded as consent, and the flow goes on.
	got := f.asService(t, weather, http.MethodPost, "/api/v1/elicitations", alice, resumeBody(call, first.RequestState, "accept"))
	next := createAnswerOf(t, got)
	if got.Status != http.StatusOK || next.Status != api.StatusActionRequired || next.Elicitation.ID != id || next.RequestState == "" {
		t.Fatalf("the retry answered %d %s, want the same elicitation, still to do", got.Status, got.Body)
	}
	f.wantState(t, id, flow.Consented)
	if last := f.lastEntry(t, id); last.Event != flow.ClientAccept || last.Actor != state.ActorClient || !strings.Contains(last.Reason, "weather reports") {
		t.Errorf("the accept is recorded as %+v", last)
	}

	// Anything but this service's own requestState for this user, slot and call changes nothing.
	before := f.snapshot(t, id)
	payload, mac, _ := strings.Cut(first.RequestState, ".")
	for _, tc := range []struct {
		name, service, token, body, why string
	}{
		{"another call", weather, alice, resumeBody("delete_everything", first.RequestState, "decline"), "another call"},
		{"altered", weather, alice, resumeBody(call, payload+"x."+mac, "decline"), "not issued by this server"},
		{"another user", weather, f.userTokenFor(t, "bob", weather), resumeBody(call, first.RequestState, "decline"), "another user"},
		{"another service", calendar, f.userTokenFor(t, "alice", calendar), resumeBody(call, first.RequestState, "decline"), "another service"},
		{"another slot", weather, alice, resumeBody(call, f.asker.Issue(f.get(t, id), ask.ServiceBinding(weather, state.KindSecret, "other_slot", call)), "decline"), "another slot"},
		{"expired", weather, alice, resumeBody(call, f.asker.Issue(&flow.Elicitation{ID: id, User: f.user("alice")}, ask.ServiceBinding(weather, state.KindSecret, demoSlot, call)), "decline"), "expired"},
		{"an action alone", weather, alice, `{"slot": "demo_api_key", "action": "decline"}`, "send it with that requestState"},
		{"a strange action", weather, alice, resumeBody(call, first.RequestState, "maybe"), "accept, decline or cancel"},
	} {
		f.asService(t, tc.service, http.MethodPost, "/api/v1/elicitations", tc.token, tc.body).want(t, http.StatusBadRequest, tc.why)
		f.wantUnchanged(t, id, before)
	}

	b := f.browser(t, "alice")
	b.open(id)
	b.submit(id, b.continueToForm(id), validKey).want(t, http.StatusOK)
	got = f.asService(t, weather, http.MethodPost, "/api/v1/elicitations", alice, resumeBody(call, next.RequestState, ""))
	if done := createAnswerOf(t, got); got.Status != http.StatusOK || done.Status != api.StatusStored || done.Credential == nil || done.Credential.Service != weather {
		t.Errorf("the retry after completion answered %d %s, want stored", got.Status, got.Body)
	}

	// A flow the client declines ends, and the retry says so.
	again := createAnswerOf(t, f.asService(t, weather, http.MethodPost, "/api/v1/elicitations", alice, `{"slot": "demo_api_key", "replace": true}`))
	got = f.asService(t, weather, http.MethodPost, "/api/v1/elicitations", alice, resumeBody("", again.RequestState, "decline"))
	if ended := createAnswerOf(t, got); ended.Status != api.StatusEnded || ended.Elicitation.State != flow.Declined || ended.RequestState != "" {
		t.Errorf("the declining retry answered %d %s, want ended, declined", got.Status, got.Body)
	}
}

func TestAServiceReportsItsClientsAnswer(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	v := created(t, f.asService(t, weather, http.MethodPost, "/api/v1/elicitations", f.userTokenFor(t, "alice", weather), createDemoKey), http.StatusCreated)
	path := "/api/v1/elicitations/" + v.ID + "/answer"

	f.asService(t, weather, http.MethodPost, path, "", `{"action": "maybe"}`).want(t, http.StatusBadRequest, "accept, decline or cancel")
	f.asService(t, calendar, http.MethodPost, path, "", `{"action": "decline"}`).want(t, http.StatusNotFound)
	f.api(t, http.MethodPost, path, f.token(t, "alice"), `{"action": "decline"}`).want(t, http.StatusForbidden, "delegating service")
	f.wantState(t, v.ID, flow.Pending)

	var after flow.View
	got := f.asService(t, weather, http.MethodPost, path, "", `{"action": "accept"}`)
	got.decode(t, &after)
	if got.Status != http.StatusOK || after.State != flow.Consented {
		t.Errorf("accept answered %d %s, want consented (an accept is consent, never success)", got.Status, got.Body)
	}
	f.asService(t, weather, http.MethodPost, "/api/v1/elicitations/"+v.ID+"/cancel", "", "").want(t, http.StatusOK)
	f.asService(t, weather, http.MethodPost, path, "", `{"action": "accept"}`).want(t, http.StatusConflict, "already ended")
	f.wantState(t, v.ID, flow.Cancelled)
}

func TestAServiceOverItsRateLimitIsRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{rateLimits: limits.Rates{Services: ratelimit.Limit{Events: 2, Window: time.Minute}}})
	v := created(t, f.asService(t, weather, http.MethodPost, "/api/v1/elicitations", f.userTokenFor(t, "alice", weather), createDemoKey), http.StatusCreated)
	f.asService(t, weather, http.MethodGet, "/api/v1/elicitations/"+v.ID, "", "").want(t, http.StatusOK)
	before := f.snapshot(t, v.ID)
	over := f.asService(t, weather, http.MethodPost, "/api/v1/elicitations/"+v.ID+"/cancel", "", "")
	over.want(t, http.StatusTooManyRequests, "too many requests from the service weather")
	if over.Header.Get("Retry-After") == "" {
		t.Error("no Retry-After")
	}
	f.wantUnchanged(t, v.ID, before)
	// Each service has its own count, and users are not counted here.
	f.asService(t, calendar, http.MethodGet, "/api/v1/elicitations/"+v.ID, "", "").want(t, http.StatusNotFound)
	f.api(t, http.MethodGet, "/api/v1/elicitations/"+v.ID, f.token(t, "alice"), "").want(t, http.StatusOK)
	if n := f.counter(t, `urlflow_rate_limited_total{what="service"}`); n != 1 {
		t.Errorf("counted %d refusals, want 1", n)
	}
}

func TestAServiceIsNotToldWhoElseOpenedItsUsersLink(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	v := created(t, f.asService(t, weather, http.MethodPost, "/api/v1/elicitations", f.userTokenFor(t, "alice", weather), createDemoKey), http.StatusCreated)
	f.browser(t, "mallory").open(v.ID).want(t, http.StatusForbidden)

	asService := f.asService(t, weather, http.MethodGet, "/api/v1/elicitations/"+v.ID, "", "")
	asService.want(t, http.StatusOK, "other_user_opened", "refused: opened by another user")
	if strings.Contains(asService.Body, "mallory") {
		t.Errorf("the service learns who opened the link: %s", asService.Body)
	}
	f.api(t, http.MethodGet, "/api/v1/elicitations/"+v.ID, f.token(t, "alice"), "").want(t, http.StatusOK, "mallory")
	f.api(t, http.MethodGet, "/api/v1/elicitations/"+v.ID, f.operatorToken, "").want(t, http.StatusOK, "mallory")
}

func TestAPIBodiesMustBeJSONAndAProxyRequestNamesItsPath(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	e := f.newFlow(t, "alice")
	f.apply(t, e.ID, flow.ClientDecline, state.ActorClient)
	retry := request{method: http.MethodPost, path: "/api/v1/elicitations/" + e.ID + "/retry", token: f.token(t, "alice")}
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded"} {
		retry.body, retry.contentType = strings.NewReader(`{"new": true}`), ct
		f.send(t, nil, retry).want(t, http.StatusUnsupportedMediaType, "application/json")
	}
	if got := f.get(t, e.ID); got.RetriedBy != "" {
		t.Errorf("a refused retry made %s", got.RetriedBy)
	}
	f.storeFor(t, weather, "alice", validKey)
	f.asService(t, weather, http.MethodPost, "/api/v1/proxy", f.userTokenFor(t, "alice", weather),
		`{"slot": "demo_api_key", "method": "GET"}`).want(t, http.StatusBadRequest, "path is required")
}

// The replay of a create whose flow has completed since names that elicitation as it now
// stands: status ended, state complete (the README's table of create answers); a create
// without the key answers stored.
func TestAReplayedCreateOfACompletedFlowAnswersEndedComplete(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	alice := f.userTokenFor(t, "alice", weather)
	first := created(t, f.createWithKey(t, weather, alice, "order-1", createDemoKey), http.StatusCreated)
	b := f.browser(t, "alice")
	b.submit(first.ID, b.continueToForm(first.ID), validKey).want(t, http.StatusOK)

	again := f.createWithKey(t, weather, alice, "order-1", createDemoKey)
	if a := createAnswerOf(t, again); again.Status != http.StatusCreated || a.Status != api.StatusEnded || a.Elicitation == nil ||
		a.Elicitation.ID != first.ID || a.Elicitation.State != flow.Complete || a.RequestState != "" || a.Credential != nil {
		t.Errorf("the replay answered %d %s, want 201, ended, the first elicitation complete", again.Status, again.Body)
	}
	f.asService(t, weather, http.MethodPost, "/api/v1/elicitations", alice, createDemoKey).want(t, http.StatusOK, `"status":"stored"`)
}
