package delegate_test

import (
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/urlflow/urlflow/delegate"
)

// Require, the one call in a tool handler, for each kind of client: a 2025-11-25 client
// with URL mode in push style and in error style, a 2026-07-28 client, and a client
// without URL mode. Each test is a real go-sdk client over HTTP, weather (a go-sdk server
// using package delegate) and urlflow dev; the user finishes in a browser.

func TestAPushClientIsAskedWithElicitationCreateAndGetsTheCredentialInOneCall(t *testing.T) {
	t.Parallel()
	u := startUrlflow(t)
	w := startWeather(t, u, delegate.Options{})
	token := u.userToken("alice")
	alice := w.connect(t, clientOptions{Token: token, URLMode: true})

	call := alice.callAsync(&mcp.CallToolParams{Name: "forecast", Arguments: forecast})
	asked := alice.nextElicitation(30 * time.Second)
	if asked.Mode != "url" || !strings.HasPrefix(asked.URL, u.URL+"/e/") || asked.ElicitationID != idOf(asked.URL) ||
		!strings.Contains(asked.Message, "demo_api_key") {
		t.Fatalf("elicitation/create %+v, want urlflow's URL and the elicitation's ID", asked)
	}
	key := demoKey()
	newPerson(t, u, "alice").completeSecret(asked.URL, key)
	wantForecast(t, await(t, call, time.Minute))
	// weather forwards the end to its own session with the client.
	alice.waitCompletion(asked.ElicitationID, 5*time.Second)

	// The client's accept went to urlflow as consent (the flow completed by the browser).
	answers := w.API.calls("POST /api/v1/elicitations/" + asked.ElicitationID + "/answer")
	if len(answers) != 1 || answers[0].Body != `{"action":"accept"}` {
		t.Errorf("answers reported to urlflow: %+v", answers)
	}
	// Stored for weather: the next call asks nothing.
	wantForecast(t, alice.callOK("forecast", forecast))
	if len(alice.Elicitations) != 0 {
		t.Error("the second call asked the user again")
	}
	for what, secret := range map[string]string{"the key": key, "the user's token": token} {
		if strings.Contains(w.Log.String(), secret) {
			t.Errorf("the client logged %s", what)
		}
	}
}

func TestAPushClientThatDeclinesOrCancelsGetsThatOutcomeAndNothingIsStored(t *testing.T) {
	t.Parallel()
	u := startUrlflow(t)
	w := startWeather(t, u, delegate.Options{})
	for action, want := range map[string]string{"decline": "declined", "cancel": "cancelled"} {
		t.Run(action, func(t *testing.T) {
			t.Parallel()
			c := w.connect(t, clientOptions{Token: u.userToken("user-" + action), URLMode: true, Answer: action})
			res := c.callOK("forecast", forecast)
			asked := c.nextElicitation(time.Second)
			got := structured(t, res)
			if res.IsError || got["status"] != want || got["state"] != want || got["elicitationId"] != asked.ElicitationID ||
				!strings.Contains(text(res), "Nothing was stored") {
				t.Fatalf("after the client's %s: %v %q", action, got, text(res))
			}
			if state := u.elicitation(asked.ElicitationID); state != want {
				t.Errorf("urlflow says %s, want %s", state, want)
			}
		})
	}
}

func TestAnErrorStyleClientGetsMinus32042AndFollowForwardsTheCompletionToItsSession(t *testing.T) {
	t.Parallel()
	u := startUrlflow(t)
	w := startWeather(t, u, delegate.Options{Style: delegate.StyleError})
	w.follow(t)
	bob := w.connect(t, clientOptions{Token: u.userToken("bob"), URLMode: true})

	_, err := bob.call("forecast", forecast)
	asked := urlElicitationRequired(t, err) // a protocol error, not an isError result
	if asked.Mode != "url" || !strings.HasPrefix(asked.URL, u.URL+"/e/") || asked.ElicitationID != idOf(asked.URL) {
		t.Fatalf("-32042 with %+v, want urlflow's URL and the elicitation's ID", asked)
	}
	if len(bob.Elicitations) != 0 {
		t.Error("an error-style call sent elicitation/create")
	}
	// Asked again before finishing: the same flow.
	_, err = bob.call("forecast", forecast)
	if again := urlElicitationRequired(t, err); again.ElicitationID != asked.ElicitationID {
		t.Errorf("a second call started elicitation %s, want %s again", again.ElicitationID, asked.ElicitationID)
	}
	newPerson(t, u, "bob").completeSecret(asked.URL, demoKey())
	bob.waitCompletion(asked.ElicitationID, 20*time.Second)
	bob.noCompletion(500 * time.Millisecond) // once, although two calls were owed it
	wantForecast(t, bob.callOK("forecast", forecast))
}

// inputRequest returns the URL-mode input request of an input_required result.
func inputRequest(t testing.TB, res *mcp.CallToolResult) *mcp.ElicitParams {
	t.Helper()
	if !res.NeedsInput() || res.RequestState == "" || len(res.InputRequests) != 1 {
		t.Fatalf("want input_required with a requestState, got %+v %q", res, text(res))
	}
	p, ok := res.InputRequests["auth"].(*mcp.ElicitParams)
	if !ok {
		t.Fatalf("input requests %+v, want one elicitation", res.InputRequests)
	}
	return p
}

// retry is the retry of forecast after res, with the client's answer action.
func retry(res *mcp.CallToolResult, action string) *mcp.CallToolParams {
	return &mcp.CallToolParams{Name: "forecast", Arguments: forecast, RequestState: res.RequestState,
		InputResponses: mcp.InputResponseMap{"auth": &mcp.ElicitResult{Action: action}}}
}

func TestA20260728ClientGetsInputRequiredWithUrlflowsRequestStateUntilTheUserHasFinished(t *testing.T) {
	t.Parallel()
	u := startUrlflow(t)
	const retryWait = time.Second
	w := startWeather(t, u, delegate.Options{RetryWait: retryWait})
	carol := w.connect(t, clientOptions{Token: u.userToken("carol"), Version: "2026-07-28", URLMode: true, ManualRetry: true})

	first := carol.callOK("forecast", forecast)
	asked := inputRequest(t, first)
	// The 2026-07-28 URL-mode request: mode, url and message (no elicitationId: nothing
	// refers to it in this era, which has no completion notification).
	if asked.Mode != "url" || !strings.HasPrefix(asked.URL, u.URL+"/e/") || asked.Message == "" || asked.ElicitationID != "" {
		t.Fatalf("input request %+v, want the 2026-07-28 URL-mode request with urlflow's URL", asked)
	}
	creates := w.API.calls("POST /api/v1/elicitations")
	if len(creates) != 1 || !strings.Contains(creates[0].Body, `"call":"forecast:`) {
		t.Fatalf("creates %+v, want one bound to the call", creates)
	}

	// Retried before the user finished: it waits RetryWait, then asks for the same flow again.
	start := time.Now()
	second, err := carol.callWith(retry(first, "accept"))
	if err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited < retryWait-100*time.Millisecond {
		t.Errorf("the retry answered after %s, want it to wait %s for the user", waited, retryWait)
	}
	if again := inputRequest(t, second); again.URL != asked.URL {
		t.Fatalf("the retry asks for %s, want %s again", again.URL, asked.URL)
	}
	if state := u.elicitation(idOf(asked.URL)); state != "consented" {
		t.Errorf("after the client's accept urlflow says %s, want consented", state)
	}

	newPerson(t, u, "carol").completeSecret(asked.URL, demoKey())
	res, err := carol.callWith(retry(second, "accept"))
	if err != nil {
		t.Fatal(err)
	}
	wantForecast(t, res)
	if len(carol.Elicitations) != 0 {
		t.Error("a 2026-07-28 client was sent elicitation/create")
	}
}

func TestA20260728ClientThatRetriesOnItsOwnGetsTheCredentialInOneCall(t *testing.T) {
	t.Parallel()
	u := startUrlflow(t)
	w := startWeather(t, u, delegate.Options{RetryWait: 30 * time.Second})
	dana := w.connect(t, clientOptions{Token: u.userToken("dana"), Version: "2026-07-28", URLMode: true})
	call := dana.callAsync(&mcp.CallToolParams{Name: "forecast", Arguments: forecast})
	asked := dana.nextElicitation(30 * time.Second) // the go-sdk shows the input request, answers, retries
	// The retry is waiting for the user: she finishes, and the same call returns.
	newPerson(t, u, "dana").completeSecret(asked.URL, demoKey())
	wantForecast(t, await(t, call, time.Minute))
	if n := len(w.API.calls("POST /api/v1/elicitations")); n > 3 {
		t.Errorf("%d creates for one call, want the first, the retry and its answer", n)
	}
}

func TestA20260728RetryAnswersHowTheFlowEndedWithoutTheCredential(t *testing.T) {
	t.Parallel()
	u := startUrlflow(t)
	w := startWeather(t, u, delegate.Options{RetryWait: 5 * time.Second})
	for _, tc := range []struct {
		name   string
		action string                            // the client's answer on the retry
		before func(p *person, elicitURL string) // what the user does before the retry
		want   string
	}{
		{"the client declined", "decline", nil, "declined"},
		{"the client cancelled", "cancel", nil, "cancelled"},
		{"the user declined on the page", "accept", (*person).decline, "declined"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			name := "user-" + strings.ReplaceAll(tc.name, " ", "-")
			c := w.connect(t, clientOptions{Token: u.userToken(name), Version: "2026-07-28", URLMode: true, ManualRetry: true})
			first := c.callOK("forecast", forecast)
			asked := inputRequest(t, first)
			if tc.before != nil {
				tc.before(newPerson(t, u, name), asked.URL)
			}
			res, err := c.callWith(retry(first, tc.action))
			if err != nil {
				t.Fatal(err)
			}
			if got := structured(t, res); res.IsError || res.NeedsInput() || got["status"] != tc.want || got["state"] != tc.want {
				t.Fatalf("the retry: %v %q, want the honest %s", got, text(res), tc.want)
			}
		})
	}
}

func TestARequestStateWorksOnlyForTheCallItWasGivenFor(t *testing.T) {
	t.Parallel()
	u := startUrlflow(t)
	w := startWeather(t, u, delegate.Options{RetryWait: time.Second})
	erin := w.connect(t, clientOptions{Token: u.userToken("erin"), Version: "2026-07-28", URLMode: true, ManualRetry: true})
	first := erin.callOK("forecast", forecast)
	inputRequest(t, first)

	for name, params := range map[string]*mcp.CallToolParams{
		"other arguments": {Name: "forecast", Arguments: map[string]any{"city": "Lyon"}, RequestState: first.RequestState,
			InputResponses: mcp.InputResponseMap{"auth": &mcp.ElicitResult{Action: "accept"}}},
		"an altered requestState": {Name: "forecast", Arguments: forecast, RequestState: first.RequestState + "x",
			InputResponses: mcp.InputResponseMap{"auth": &mcp.ElicitResult{Action: "accept"}}},
	} {
		res, err := erin.callWith(params)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !res.IsError || !strings.Contains(text(res), "urlflow: 400") {
			t.Errorf("%s: %+v %q, want urlflow's refusal as the tool's error", name, res, text(res))
		}
	}
	// The arguments' order is not part of the call.
	reordered := &mcp.CallToolParams{Name: "forecast", Arguments: map[string]any{"city": "Paris"}, RequestState: first.RequestState,
		InputResponses: mcp.InputResponseMap{"auth": &mcp.ElicitResult{Action: "accept"}}}
	res, err := erin.callWith(reordered)
	if err != nil || !res.NeedsInput() {
		t.Fatalf("the same call again: %+v %v", res, err)
	}
}

func TestAClientWithoutURLModeIsToldToOpenTheLinkInATextResult(t *testing.T) {
	t.Parallel()
	u := startUrlflow(t)
	w := startWeather(t, u, delegate.Options{})
	for _, tc := range []struct {
		name string
		opts clientOptions
	}{
		{"2025-11-25, no elicitation", clientOptions{}},
		{"2025-11-25, form mode only", clientOptions{FormOnly: true}},
		{"2026-07-28, no elicitation", clientOptions{Version: "2026-07-28"}},
		{"2026-07-28, form mode only", clientOptions{Version: "2026-07-28", FormOnly: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			name := "user-" + strings.NewReplacer(" ", "-", ",", "").Replace(tc.name)
			tc.opts.Token = u.userToken(name)
			c := w.connect(t, tc.opts)
			res := c.callOK("forecast", forecast)
			got := structured(t, res)
			link, _ := got["url"].(string)
			if res.IsError || res.NeedsInput() || got["status"] != "user_action_required" || !strings.HasPrefix(link, u.URL+"/e/") ||
				got["elicitationId"] != idOf(link) || got["expiresAt"] == nil {
				t.Fatalf("without URL mode: %v", got)
			}
			if !strings.Contains(text(res), link) || !strings.Contains(text(res), "call the tool again") {
				t.Errorf("the text does not tell the user what to do: %q", text(res))
			}
			if len(c.Elicitations) != 0 {
				t.Error("a client without URL mode was sent a URL elicitation")
			}
			newPerson(t, u, name).completeSecret(link, demoKey())
			wantForecast(t, c.callOK("forecast", forecast))
		})
	}
}

func TestRequireWithoutTheUsersTokenAsksUrlflowNothing(t *testing.T) {
	t.Parallel()
	u := startUrlflow(t)
	w := startWeather(t, u, delegate.Options{})
	c := w.connect(t, clientOptions{URLMode: true})
	res := c.callOK("forecast", forecast)
	if !res.IsError || !strings.Contains(text(res), "no bearer token") {
		t.Fatalf("without a token: %+v %q", res, text(res))
	}
	if calls := w.API.calls(""); len(calls) != 0 {
		t.Errorf("urlflow was asked %+v", calls)
	}
}

func TestRequireWithATokenForAnotherResourceIsRefusedByUrlflow(t *testing.T) {
	t.Parallel()
	u := startUrlflow(t)
	w := startWeather(t, u, delegate.Options{})
	// A token of the same user for urlflow itself proves nothing to weather.
	c := w.connect(t, clientOptions{Token: u.urlflowToken("frank"), URLMode: true})
	res := c.callOK("forecast", forecast)
	if !res.IsError || !strings.Contains(text(res), "urlflow: 401") || !strings.Contains(text(res), "audience") {
		t.Fatalf("with a token for urlflow: %+v %q", res, text(res))
	}
	if len(c.Elicitations) != 0 {
		t.Error("the user was asked anyway")
	}
}
