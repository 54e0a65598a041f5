package web

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/credentials"
	"github.com/urlflow/urlflow/state/flow"
	"github.com/urlflow/urlflow/upstream"
	"github.com/urlflow/urlflow/web/api"
)

const createDemoKey = `{"slot": "demo_api_key", "message": "Weather needs your demo key.", "client": {"name": "probe-client", "version": "1.2.3"}}`

// created decodes a create answer that must carry an elicitation.
func created(t *testing.T, got answer, status int) flow.View {
	t.Helper()
	var a api.CreateAnswer
	got.decode(t, &a)
	if got.Status != status || a.Status != api.StatusActionRequired || a.Elicitation == nil || a.Credential != nil {
		t.Fatalf("create answered %d %s, want %d with an elicitation", got.Status, got.Body, status)
	}
	return *a.Elicitation
}

func TestAServiceCreatesAFlowForTheUserItsTokenProvesAndAloneReadsIt(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	got := f.asService(t, weather, http.MethodPost, "/api/v1/elicitations", f.userTokenFor(t, "alice", weather), createDemoKey)

	v := created(t, got, http.StatusCreated)
	if got.Location() != "/api/v1/elicitations/"+v.ID || v.State != flow.Pending || v.Service != weather ||
		v.Target != demoSlot || v.URL != f.URL+"/e/"+v.ID {
		t.Errorf("created %+v at %q, want a pending flow of weather for the demo slot with its URL", v, got.Location())
	}
	e := f.get(t, v.ID)
	if e.User != f.user("alice") || e.Purpose != "Weather needs your demo key." || e.Client.Name != "probe-client" {
		t.Errorf("stored %+v, want alice's, with the service's message and the client it named", e)
	}
	if h := f.history(t, v.ID); len(h) != 1 || h[0].Actor != state.ActorService {
		t.Errorf("history %+v, want one entry by the service", h)
	}

	again := created(t, f.asService(t, weather, http.MethodPost, "/api/v1/elicitations", f.userTokenFor(t, "alice", weather), createDemoKey), http.StatusOK)
	if again.ID != v.ID {
		t.Errorf("asking again made %s, want the running %s reused", again.ID, v.ID)
	}

	for _, tc := range []struct {
		name   string
		get    func() answer
		status int
	}{
		{"the service", func() answer { return f.asService(t, weather, http.MethodGet, "/api/v1/elicitations/"+v.ID, "", "") }, http.StatusOK},
		{"its user", func() answer { return f.api(t, http.MethodGet, "/api/v1/elicitations/"+v.ID, f.token(t, "alice"), "") }, http.StatusOK},
		{"an operator", func() answer { return f.api(t, http.MethodGet, "/api/v1/elicitations/"+v.ID, f.operatorToken, "") }, http.StatusOK},
		{"another service", func() answer { return f.asService(t, calendar, http.MethodGet, "/api/v1/elicitations/"+v.ID, "", "") }, http.StatusNotFound},
		{"another service cancelling", func() answer {
			return f.asService(t, calendar, http.MethodPost, "/api/v1/elicitations/"+v.ID+"/cancel", "", "")
		}, http.StatusNotFound},
		{"another user", func() answer { return f.api(t, http.MethodGet, "/api/v1/elicitations/"+v.ID, f.token(t, "bob"), "") }, http.StatusNotFound},
	} {
		if got := tc.get(); got.Status != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.name, got.Status, got.Body, tc.status)
		}
	}
	f.wantState(t, v.ID, flow.Pending)
}

func TestWhatAServiceSaysIsCleanedWhereItEnters(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	v := created(t, f.asService(t, weather, http.MethodPost, "/api/v1/elicitations", f.userTokenFor(t, "alice", weather),
		`{"slot": "demo_api_key", "message": "Pay \u202eyrgent\n\nnow", "client": {"name": "Claude\u200b Code\u0007", "version": "2.1\n"}}`),
		http.StatusCreated)
	e := f.get(t, v.ID)
	if e.Purpose != "Pay yrgent now" || e.Client.Name != "Claude Code" || e.Client.Version != "2.1" {
		t.Errorf("kept purpose %q and client %+v, want them cleaned", e.Purpose, e.Client)
	}
	if h := f.history(t, v.ID); h[0].Reason != e.Purpose {
		t.Errorf("the history keeps %q, want the cleaned purpose", h[0].Reason)
	}
}

func TestWhatAServiceCollectsIsItsOwn(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	alice := f.userTokenFor(t, "alice", weather)
	v := created(t, f.asService(t, weather, http.MethodPost, "/api/v1/elicitations", alice, createDemoKey), http.StatusCreated)
	b := f.browser(t, "alice")
	consent := b.open(v.ID)
	consent.want(t, http.StatusOK, "Weather MCP", "Verified by urlflow", "probe-client", "Self-reported by the client",
		"Weather needs your demo key.")
	form := b.continueToForm(v.ID)
	b.submit(v.ID, form, validKey).want(t, http.StatusOK)
	f.wantState(t, v.ID, flow.Complete)

	name := credentials.Name(weather, demoSlot)
	if _, secret := f.storedSecret(t, "alice", name); secret != validKey {
		t.Errorf("weather's credential holds %q", secret)
	}
	f.wantNoCredential(t, "alice", demoSlot) // urlflow's own tools do not see it

	got := f.asService(t, weather, http.MethodPost, "/api/v1/elicitations", alice, createDemoKey)
	var a api.CreateAnswer
	got.decode(t, &a)
	if got.Status != http.StatusOK || a.Status != api.StatusStored || a.Elicitation != nil || a.Credential == nil ||
		a.Credential.Name != demoSlot || a.Credential.Service != weather {
		t.Errorf("asking again answered %d %s, want 200 stored with weather's credential", got.Status, got.Body)
	}
	if strings.Contains(got.Body, validKey) {
		t.Error("the answer carries the secret")
	}
	replace := created(t, f.asService(t, weather, http.MethodPost, "/api/v1/elicitations", alice,
		`{"slot": "demo_api_key", "replace": true}`), http.StatusCreated)
	if !f.get(t, replace.ID).Replace {
		t.Error("replace: the new flow does not replace")
	}

	other := created(t, f.asService(t, calendar, http.MethodPost, "/api/v1/elicitations", f.userTokenFor(t, "alice", calendar), createDemoKey), http.StatusCreated)
	if other.Service != calendar {
		t.Errorf("calendar's flow names %q", other.Service)
	}
}

func TestAServiceRequestThatIsRefusedCreatesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	alice := f.userTokenFor(t, "alice", weather)
	for _, tc := range []struct {
		name      string
		service   string
		userToken string
		body      string
		status    int
		says      string
	}{
		{"a user token for urlflow", weather, f.token(t, "alice"), createDemoKey, http.StatusUnauthorized, "wrong audience"},
		{"a user token for another service", weather, f.userTokenFor(t, "alice", calendar), createDemoKey, http.StatusUnauthorized, "wrong audience"},
		{"a user token that is not one", weather, "not-a-token", createDemoKey, http.StatusUnauthorized, "not valid"},
		{"no user token", weather, "", createDemoKey, http.StatusUnauthorized, api.UserTokenHeader},
		{"a named user, not trusted to name", weather, "", `{"slot": "demo_api_key", "user": "alice"}`, http.StatusForbidden, "may not name users"},
		{"a named user and a token", directory, f.userTokenFor(t, "alice", directory), `{"slot": "demo_api_key", "user": "alice"}`, http.StatusBadRequest, "not both"},
		{"an unknown slot", weather, alice, `{"slot": "nope"}`, http.StatusForbidden, "may not use"},
		{"a provider it may not use", weather, alice, `{"provider": "acme"}`, http.StatusForbidden, "may not use"},
		{"slot and provider", weather, alice, `{"slot": "demo_api_key", "provider": "acme"}`, http.StatusBadRequest, "one of"},
		{"neither", weather, alice, `{}`, http.StatusBadRequest, "one of"},
		{"scopes for a slot", weather, alice, `{"slot": "demo_api_key", "scopes": ["x"]}`, http.StatusBadRequest, "scopes"},
		{"an unknown field", weather, alice, `{"slot": "demo_api_key", "secret": "x"}`, http.StatusBadRequest, "unknown field"},
		{"a long message", weather, alice, `{"slot": "demo_api_key", "message": "` + strings.Repeat("a", api.MaxMessage+1) + `"}`, http.StatusBadRequest, "message"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := f.asService(t, tc.service, http.MethodPost, "/api/v1/elicitations", tc.userToken, tc.body)
			got.want(t, tc.status, tc.says)
		})
	}
	for _, tc := range []struct {
		name, token string
		status      int
	}{
		{"a user", f.token(t, "alice"), http.StatusForbidden},
		{"a user's token for the service, as authentication", alice, http.StatusUnauthorized},
		{"a key that is not one", "urlflow_sk_" + strings.Repeat("A", 52), http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.api(t, http.MethodPost, "/api/v1/elicitations", tc.token, createDemoKey).want(t, tc.status)
		})
	}
	t.Run("not JSON", func(t *testing.T) {
		got := f.send(t, nil, request{method: http.MethodPost, path: "/api/v1/elicitations", token: f.serviceKeys[weather],
			header: http.Header{api.UserTokenHeader: {alice}}, body: strings.NewReader(`{"slot": "demo_api_key"}`)})
		got.want(t, http.StatusUnsupportedMediaType, "application/json")
	})
	for _, name := range []string{credentials.Name(weather, demoSlot), credentials.Name(calendar, demoSlot), demoSlot} {
		if _, err := f.store.OpenFor(t.Context(), f.user("alice"), state.KindSecret, name, ""); !errors.Is(err, state.ErrNotFound) {
			t.Errorf("a flow for %s exists (%v), want none", name, err)
		}
	}
}

func TestAServiceKeyReachesTheAPIOnly(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	got := f.send(t, nil, request{method: http.MethodPost, path: "/mcp", token: f.serviceKeys[weather],
		body: strings.NewReader(`{}`), contentType: "application/json"})
	got.want(t, http.StatusUnauthorized)
	if len(f.mcp.reached()) != 0 {
		t.Error("a service key reached the MCP endpoint")
	}
}

func TestATrustedServiceNamesTheUserAndTheBrowserMustBeThatUser(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	v := created(t, f.asService(t, directory, http.MethodPost, "/api/v1/elicitations", "", `{"slot": "demo_api_key", "user": "alice"}`), http.StatusCreated)
	if e := f.get(t, v.ID); e.User != f.user("alice") {
		t.Errorf("the flow is %v's, want alice's", e.User)
	}
	f.browser(t, "bob").open(v.ID).want(t, http.StatusForbidden, "This link belongs to another account")
	f.browser(t, "alice").open(v.ID).want(t, http.StatusOK, "Directory MCP", "Verified by urlflow")
}

func TestStatusWaitsForTheFlowToEnd(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	v := created(t, f.asService(t, weather, http.MethodPost, "/api/v1/elicitations", f.userTokenFor(t, "alice", weather), createDemoKey), http.StatusCreated)

	start := time.Now()
	short := f.asService(t, weather, http.MethodGet, "/api/v1/elicitations/"+v.ID+"?wait=1", "", "")
	var running flow.View
	short.decode(t, &running)
	if short.Status != http.StatusOK || running.State != flow.Pending || time.Since(start) < time.Second {
		t.Errorf("wait=1 answered %d %s after %v, want pending after a second", short.Status, running.State, time.Since(start))
	}

	answers := make(chan answer, 1)
	go func() {
		answers <- f.asService(t, weather, http.MethodGet, "/api/v1/elicitations/"+v.ID+"?wait=30", "", "")
	}()
	time.Sleep(200 * time.Millisecond) // let the wait begin; it is fine if it begins later
	f.asService(t, weather, http.MethodPost, "/api/v1/elicitations/"+v.ID+"/cancel", "", "").want(t, http.StatusOK)
	select {
	case got := <-answers:
		var ended flow.View
		got.decode(t, &ended)
		if got.Status != http.StatusOK || ended.State != flow.Cancelled {
			t.Errorf("the wait answered %d %s, want cancelled", got.Status, got.Body)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the wait did not answer within 15s of the cancel")
	}
	if h := f.history(t, v.ID); h[len(h)-1].Actor != state.ActorService {
		t.Errorf("the cancel is recorded as %s, want service", h[len(h)-1].Actor)
	}
	for _, bad := range []string{"61", "-1", "x"} {
		f.asService(t, weather, http.MethodGet, "/api/v1/elicitations/"+v.ID+"?wait="+bad, "", "").want(t, http.StatusBadRequest, "wait")
	}
}

func TestDevTokensForAServiceResource(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	svc, _ := f.services.Lookup(weather)
	got := f.send(t, nil, request{method: http.MethodGet, path: "/dev/token?user=alice&resource=" + svc.Resource})
	var body map[string]string
	got.decode(t, &body)
	if got.Status != http.StatusOK {
		t.Fatalf("/dev/token answered %d %s", got.Status, got.Body)
	}
	if claims, err := f.dev.ForAudience(svc.Resource).Verify(t.Context(), body["token"]); err != nil || claims.User != f.user("alice") {
		t.Errorf("the token verifies as %v, %v; want alice for weather's resource", claims.User, err)
	}
	if _, err := f.dev.Verify(t.Context(), body["token"]); err == nil {
		t.Error("a token for a service's resource verifies for urlflow")
	}
	f.send(t, nil, request{method: http.MethodGet, path: "/dev/token?user=alice&resource=https://elsewhere.example/mcp"}).
		want(t, http.StatusBadRequest, "resource")

	// The demo service's key, for an example server next to urlflow dev; on loopback only.
	f.send(t, nil, request{method: http.MethodGet, path: "/dev/service-key"}).want(t, http.StatusOK, `"key":"urlflow_sk_DEMOKEYOFTHEFIXTURE"`)
	// With the service's resource, for its users' tokens (/dev/token?resource=).
	cal, _ := f.services.Lookup(calendar)
	f.send(t, nil, request{method: http.MethodGet, path: "/dev/service-key?service=" + calendar}).want(t, http.StatusOK, `"resource":"`+cal.Resource+`"`)
	f.send(t, nil, request{method: http.MethodGet, path: "/dev/service-key?service=weather"}).want(t, http.StatusNotFound, "no development service")
	f.send(t, nil, request{method: http.MethodGet, path: "/dev/service-key", host: "evil.example"}).want(t, http.StatusMisdirectedRequest)
}

// storeFor has user name complete a flow that service creates for the demo slot, with
// secret.
func (f *fixture) storeFor(t *testing.T, service, name, secret string) {
	t.Helper()
	v := created(t, f.asService(t, service, http.MethodPost, "/api/v1/elicitations", f.userTokenFor(t, name, service), createDemoKey), http.StatusCreated)
	b := f.browser(t, name)
	b.submit(v.ID, b.continueToForm(v.ID), secret).want(t, http.StatusOK)
	f.wantState(t, v.ID, flow.Complete)
}

// proxied decodes the answer of a proxy request that must have reached the API.
func proxied(t *testing.T, got answer) upstream.Response {
	t.Helper()
	var resp upstream.Response
	got.decode(t, &resp)
	if got.Status != http.StatusOK {
		t.Fatalf("proxy answered %d %s, want 200", got.Status, got.Body)
	}
	return resp
}

func TestAServiceUsesWhatItCollectedThroughTheProxyAndNothingElse(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	f.storeFor(t, weather, "alice", validKey)
	alice := f.userTokenFor(t, "alice", weather)

	resp := proxied(t, f.asService(t, weather, http.MethodPost, "/api/v1/proxy", alice,
		`{"slot": "demo_api_key", "method": "GET", "path": "/whoami"}`))
	if resp.Status != http.StatusOK || !strings.Contains(resp.Body, `"account"`) {
		t.Errorf("whoami through the proxy: %+v", resp)
	}
	echoed := f.asService(t, weather, http.MethodPost, "/api/v1/proxy", alice,
		`{"slot": "demo_api_key", "method": "POST", "path": "/echo", "query": {"q": "1"}, "body": "{\"a\": 1}"}`)
	if resp := proxied(t, echoed); resp.Status != http.StatusOK || !strings.Contains(resp.Body, `[redacted]`) ||
		strings.Contains(echoed.Body, validKey) {
		t.Errorf("echo through the proxy: %s, want the injected key redacted", echoed.Body)
	}
	if _, err := f.creds.Get(t.Context(), f.user("alice"), credentials.Name(weather, demoSlot)); err != nil {
		t.Fatal(err)
	}
	conns, err := f.creds.Connections(t.Context(), f.user("alice"), nil)
	if err != nil || len(conns) != 1 || conns[0].LastUsedAt == nil {
		t.Errorf("connections %+v, %v; want weather's, used", conns, err)
	}

	for _, tc := range []struct {
		name, service, userToken, body string
		status                         int
		says                           string
	}{
		{"another service's credential", calendar, f.userTokenFor(t, "alice", calendar),
			`{"slot": "demo_api_key", "method": "GET", "path": "/whoami"}`, http.StatusConflict, `"reason":"not_stored"`},
		{"another user's", weather, f.userTokenFor(t, "bob", weather),
			`{"slot": "demo_api_key", "method": "GET", "path": "/whoami"}`, http.StatusConflict, `"reason":"not_stored"`},
		{"no user token", weather, "", `{"slot": "demo_api_key", "method": "GET", "path": "/whoami"}`, http.StatusUnauthorized, api.UserTokenHeader},
		{"a token for urlflow", weather, f.token(t, "alice"), `{"slot": "demo_api_key", "method": "GET", "path": "/whoami"}`, http.StatusUnauthorized, "wrong audience"},
		{"a method the API does not allow", weather, alice, `{"slot": "demo_api_key", "method": "DELETE", "path": "/whoami"}`, http.StatusBadRequest, "method"},
		{"a path out of the API", weather, alice, `{"slot": "demo_api_key", "method": "GET", "path": "/../../e/x"}`, http.StatusBadRequest, "path"},
		{"a provider it may not use", weather, alice, `{"provider": "acme", "method": "GET", "path": "/"}`, http.StatusForbidden, "may not use"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.asService(t, tc.service, http.MethodPost, "/api/v1/proxy", tc.userToken, tc.body).want(t, tc.status, tc.says)
		})
	}
	f.api(t, http.MethodPost, "/api/v1/proxy", f.token(t, "alice"), `{"slot": "demo_api_key", "method": "GET", "path": "/whoami"}`).
		want(t, http.StatusForbidden, "only a delegating service")
}

func TestAProxyRequestCarryingTheSecretIsRefusedAndLocksIt(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	f.storeFor(t, weather, "alice", validKey)
	alice := f.userTokenFor(t, "alice", weather)
	var sent atomic.Int32
	f.whileVerifying(func(*http.Request) { sent.Add(1) })

	got := f.asService(t, weather, http.MethodPost, "/api/v1/proxy", alice,
		`{"slot": "demo_api_key", "method": "POST", "path": "/echo", "body": "is `+validKey+` right?"}`)
	got.want(t, http.StatusUnprocessableEntity, `"reason":"carried"`, "locked")
	if n := sent.Load(); n != 0 {
		t.Errorf("the demo API was called %d times, want none", n)
	}
	if strings.Contains(got.Body, validKey) || strings.Contains(f.logs.String(), validKey) {
		t.Fatal("the refusal or the log repeats the secret")
	}
	cred, _ := f.storedSecret(t, "alice", credentials.Name(weather, demoSlot))
	if !cred.Locked() || !strings.Contains(cred.LockReason, "a proxy request of the service weather") {
		t.Errorf("the credential is %+v, want it locked by weather's request", cred)
	}
	f.asService(t, weather, http.MethodPost, "/api/v1/proxy", alice, `{"slot": "demo_api_key", "method": "GET", "path": "/whoami"}`).
		want(t, http.StatusConflict, `"reason":"locked"`)
	again := created(t, f.asService(t, weather, http.MethodPost, "/api/v1/elicitations", alice, `{"slot": "demo_api_key"}`), http.StatusCreated)
	if e := f.get(t, again.ID); !e.Replace || e.Replaced == nil || e.Replaced.LockReason == "" {
		t.Errorf("the new flow %+v, want it to replace the locked secret and say why", e)
	}
}

func TestAServiceUsersTokenIsVerifiedOnceAndThenRemembered(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	bob := f.userTokenFor(t, "bob", weather) // a token no test request has sent yet
	before := f.serviceVerifies.Load()
	for range 3 {
		f.asService(t, weather, http.MethodPost, "/api/v1/proxy", bob, `{"slot": "demo_api_key", "method": "GET", "path": "/whoami"}`).
			want(t, http.StatusConflict, "not_stored")
	}
	if n := f.serviceVerifies.Load() - before; n != 1 {
		t.Errorf("three proxy calls with one user token verified it %d times, want once", n)
	}
}

// A JSON body is one JSON value, and nothing after it but white space: a body with a
// second value or other data after the first is refused with 400, on every endpoint of the
// API that reads one, and changes nothing.
func TestAJSONBodyWithTrailingDataIsRefusedAndChangesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	alice, keyholderAlice := f.userTokenFor(t, "alice", weather), f.userTokenFor(t, "alice", keyholder)
	f.storeFor(t, weather, "alice", validKey)
	f.storeFor(t, keyholder, "alice", validKey)
	running := created(t, f.asService(t, weather, http.MethodPost, "/api/v1/elicitations", alice, `{"slot": "demo_api_key", "replace": true}`), http.StatusCreated)
	declined := created(t, f.asService(t, calendar, http.MethodPost, "/api/v1/elicitations", f.userTokenFor(t, "alice", calendar), createDemoKey), http.StatusCreated)
	f.apply(t, declined.ID, flow.ClientDecline, state.ActorClient)
	before, err := f.store.Index().List(t.Context(), flow.ListQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var sent atomic.Int64
	f.whileVerifying(func(*http.Request) { sent.Add(1) })

	for _, trailer := range []string{`{"b": 2}`, ` garbage`, `]`, `"x"`, ` 1`, "\n{}"} {
		for _, tc := range []struct {
			name, service, token, path, body string
			id                               string // the elicitation that must not change
		}{
			{"create", weather, alice, "/api/v1/elicitations", `{"slot": "demo_api_key", "replace": true}`, running.ID},
			{"proxy", weather, alice, "/api/v1/proxy", `{"slot": "demo_api_key", "method": "GET", "path": "/whoami"}`, ""},
			{"release", keyholder, keyholderAlice, "/api/v1/release", `{"slot": "demo_api_key"}`, ""},
			{"answer", weather, alice, "/api/v1/elicitations/" + running.ID + "/answer", `{"action": "decline"}`, running.ID},
			{"cancel", weather, alice, "/api/v1/elicitations/" + running.ID + "/cancel", `{"reason": "no longer needed"}`, running.ID},
			{"retry", calendar, "", "/api/v1/elicitations/" + declined.ID + "/retry", `{"new": true}`, declined.ID},
		} {
			var was snapshot
			if tc.id != "" {
				was = f.snapshot(t, tc.id)
			}
			got := f.asService(t, tc.service, http.MethodPost, tc.path, tc.token, tc.body+trailer)
			if got.Status != http.StatusBadRequest || !strings.Contains(got.Body, "one JSON value") {
				t.Errorf("%s with %q after the body: %d %s, want 400 saying the body is one JSON value", tc.name, trailer, got.Status, got.Body)
			}
			if strings.Contains(got.Body, validKey) {
				t.Errorf("%s: the refusal carries the secret", tc.name)
			}
			if tc.id != "" {
				f.wantUnchanged(t, tc.id, was)
			}
		}
	}
	if n := sent.Load(); n != 0 {
		t.Errorf("the demo API was called %d times, want none", n)
	}
	if after, err := f.store.Index().List(t.Context(), flow.ListQuery{}); err != nil || len(after.Elicitations) != len(before.Elicitations) {
		t.Errorf("%d elicitations (%v), want the %d there were: nothing created", len(after.Elicitations), err, len(before.Elicitations))
	}

	// White space after the value is no data.
	f.asService(t, weather, http.MethodPost, "/api/v1/elicitations/"+running.ID+"/answer", alice, "{\"action\": \"accept\"} \r\n\t ").
		want(t, http.StatusOK, `"state":"consented"`)
}

// A proxy request selects response headers within the API's allow-list; one outside it is
// refused before anything is sent.
func TestAProxyRequestSelectsResponseHeaders(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	f.storeFor(t, weather, "alice", validKey)
	alice := f.userTokenFor(t, "alice", weather)
	got := proxied(t, f.asService(t, weather, http.MethodPost, "/api/v1/proxy", alice,
		`{"slot": "demo_api_key", "method": "GET", "path": "/whoami", "responseHeaders": ["x-demo-*", "date"]}`))
	if got.Headers["X-Demo-Account"] == "" || got.Headers["Date"] == "" || got.Headers["Content-Type"] == "" {
		t.Errorf("headers %v, want Content-Type, Date and X-Demo-Account", got.Headers)
	}
	got = proxied(t, f.asService(t, weather, http.MethodPost, "/api/v1/proxy", alice,
		`{"slot": "demo_api_key", "method": "GET", "path": "/whoami"}`))
	if _, ok := got.Headers["X-Demo-Account"]; ok || len(got.Headers) != 1 {
		t.Errorf("headers %v without asking, want Content-Type alone", got.Headers)
	}
	var sent atomic.Int64
	f.whileVerifying(func(*http.Request) { sent.Add(1) })
	f.asService(t, weather, http.MethodPost, "/api/v1/proxy", alice,
		`{"slot": "demo_api_key", "method": "GET", "path": "/whoami", "responseHeaders": ["Date", "Set-Cookie"]}`).
		want(t, http.StatusBadRequest, "entry 2 is not in the API's allow-list")
	if n := sent.Load(); n != 0 {
		t.Errorf("the demo API was called %d times for a refused request", n)
	}
}

// A proxy request of the service's own: headers, a repeated parameter, a binary body in
// base64 with its type; what the API may not be sent is refused before anything is read.
func TestAProxyRequestSendsTheServicesHeadersParametersAndBinaryBody(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	f.storeFor(t, weather, "alice", validKey)
	alice := f.userTokenFor(t, "alice", weather)
	binary := "\x00\x01caf\xc3\xa9\xff"
	got := proxied(t, f.asService(t, weather, http.MethodPost, "/api/v1/proxy", alice, `{"slot": "demo_api_key", "method": "POST", "path": "/echo",
		"query": {"tag": ["a", "b"], "one": "1"}, "headers": {"X-Request-Id": "r-42"},
		"body": "`+base64.StdEncoding.EncodeToString([]byte(binary))+`", "bodyEncoding": "base64", "contentType": "application/octet-stream"}`))
	var echoed struct {
		Query   map[string][]string `json:"query"`
		Headers map[string]string   `json:"headers"`
		Body    string              `json:"body"`
	}
	if err := json.Unmarshal([]byte(got.Body), &echoed); err != nil {
		t.Fatalf("echo %s: %v", got.Body, err)
	}
	if !slices.Equal(echoed.Query["tag"], []string{"a", "b"}) || !slices.Equal(echoed.Query["one"], []string{"1"}) ||
		echoed.Headers["X-Request-Id"] != "r-42" || echoed.Headers["Content-Type"] != "application/octet-stream" ||
		echoed.Headers["Content-Length"] != strconv.Itoa(len(binary)) {
		t.Errorf("the API saw %+v", echoed)
	}
	for body, want := range map[string]string{
		`{"slot": "demo_api_key", "method": "GET", "path": "/echo", "headers": {"Authorization": "Bearer x"}}`: "carries the credential",
		`{"slot": "demo_api_key", "method": "GET", "path": "/echo", "headers": {"Cookie": "s=1"}}`:             "allow_request_headers",
		`{"slot": "demo_api_key", "method": "GET", "path": "/echo", "headers": {"Host": "evil.example"}}`:      "belongs to the connection",
		`{"slot": "demo_api_key", "method": "POST", "path": "/echo", "body": "%%%", "bodyEncoding": "base64"}`: "not standard base64",
		`{"slot": "demo_api_key", "method": "POST", "path": "/echo", "body": "x", "bodyEncoding": "hex"}`:      "bodyEncoding",
		`{"slot": "demo_api_key", "method": "GET", "path": "/echo", "query": {"q": []}}`:                       "query",
	} {
		f.asService(t, weather, http.MethodPost, "/api/v1/proxy", alice, body).want(t, http.StatusBadRequest, want)
	}
	// A form of the secret in a header: refused, nothing sent, the secret locked.
	f.asService(t, weather, http.MethodPost, "/api/v1/proxy", alice,
		`{"slot": "demo_api_key", "method": "GET", "path": "/echo", "headers": {"X-Copy": "`+validKey+`"}}`).
		want(t, http.StatusUnprocessableEntity, `"reason":"carried"`, "headers")
	if cred, _ := f.storedSecret(t, "alice", credentials.Name(weather, demoSlot)); !cred.Locked() {
		t.Error("the secret is not locked")
	}
}
