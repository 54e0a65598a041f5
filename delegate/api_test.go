package delegate_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/oauth2"

	"github.com/urlflow/urlflow/delegate"
)

// Client's link to urlflow's API: its options, how it authenticates, how a create sent
// again is answered, and what it reports when urlflow refuses or cannot serve.

func TestNewWantsUrlflowsURLAndOneWayToAuthenticate(t *testing.T) {
	tokens := oauth2.StaticTokenSource(&oauth2.Token{AccessToken: "at"})
	for _, tc := range []struct {
		name string
		opts delegate.Options
		want string // in the error; "" for none
	}{
		{"a key", delegate.Options{URL: "https://urlflow.example", Key: "urlflow_sk_K"}, ""},
		{"a token source", delegate.Options{URL: "https://urlflow.example", TokenSource: tokens}, ""},
		{"http, with a path", delegate.Options{URL: "http://127.0.0.1:8080/urlflow", Key: "urlflow_sk_K"}, ""},
		{"no URL", delegate.Options{Key: "urlflow_sk_K"}, "URL"},
		{"a URL without a scheme", delegate.Options{URL: "urlflow.example", Key: "urlflow_sk_K"}, "URL"},
		{"a URL of another scheme", delegate.Options{URL: "ftp://urlflow.example", Key: "urlflow_sk_K"}, "URL"},
		{"a URL without a host", delegate.Options{URL: "https://", Key: "urlflow_sk_K"}, "URL"},
		{"neither key nor token source", delegate.Options{URL: "https://urlflow.example"}, "Key"},
		{"something else than a service key", delegate.Options{URL: "https://urlflow.example", Key: "sk_live_K"}, "urlflow_sk_"},
		{"both", delegate.Options{URL: "https://urlflow.example", Key: "urlflow_sk_K", TokenSource: tokens}, "not both"},
	} {
		c, err := delegate.New(tc.opts)
		switch {
		case tc.want == "" && (err != nil || c == nil):
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error about %s", tc.name, err, tc.want)
		case err != nil && strings.Contains(err.Error(), "sk_live_K"):
			t.Errorf("%s: the error repeats the key: %v", tc.name, err)
		}
	}
}

// countingTokens is a TokenSource that counts its tokens, or fails.
type countingTokens struct {
	token string
	fail  bool
	n     atomic.Int32
}

func (s *countingTokens) Token() (*oauth2.Token, error) {
	s.n.Add(1)
	if s.fail {
		return nil, errors.New("the issuer is down")
	}
	return &oauth2.Token{AccessToken: s.token}, nil
}

func TestATokenSourceAuthenticatesTheServerInsteadOfAKey(t *testing.T) {
	t.Parallel()
	u := startUrlflow(t)
	// urlflow takes the service's key where it takes its client's token: the source hands
	// it out, as a client credentials source hands out tokens.
	for _, tc := range []struct {
		name   string
		tokens *countingTokens
		want   string // in the result
	}{
		{"a token urlflow accepts", &countingTokens{token: u.Key}, "user_action_required"},
		{"a token urlflow refuses", &countingTokens{token: "not-a-token-of-weather"}, "urlflow: 401"},
		{"no token", &countingTokens{fail: true}, "the server's own token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := startWeather(t, u, delegate.Options{TokenSource: tc.tokens})
			c := w.connect(t, clientOptions{Token: u.userToken("user-" + strings.ReplaceAll(tc.name, " ", "-"))})
			res := c.callOK("forecast", forecast)
			if got := text(res) + " " + fmtStructured(t, res); !strings.Contains(got, tc.want) {
				t.Fatalf("%q, want %s", got, tc.want)
			}
			calls := w.API.calls("")
			for _, c := range calls {
				if c.Auth != "Bearer "+tc.tokens.token {
					t.Errorf("a request authenticated with %q", c.Auth)
				}
			}
			// Asked once per request, so that a caching source (oauth2.ReuseTokenSource) renews.
			if tc.tokens.fail && len(calls) != 0 || !tc.tokens.fail && int(tc.tokens.n.Load()) != len(calls) {
				t.Errorf("%d tokens for %d requests", tc.tokens.n.Load(), len(calls))
			}
		})
	}
}

// fmtStructured returns the structured content of res as JSON.
func fmtStructured(t testing.TB, res *mcp.CallToolResult) string {
	b, _ := json.Marshal(structured(t, res))
	return string(b)
}

func TestAskingAgainWhileTheFlowRunsGivesTheSameElicitation(t *testing.T) {
	t.Parallel()
	u := startUrlflow(t)
	w := startWeather(t, u, delegate.Options{})
	idOfCall := func(c *user, tool string) string {
		t.Helper()
		args := forecast
		if tool == "spare" {
			args = nil
		}
		res := c.callOK(tool, args)
		id, _ := structured(t, res)["elicitationId"].(string)
		if id == "" {
			t.Fatalf("%s: %q, want the user asked", tool, text(res))
		}
		return id
	}
	sam := w.connect(t, clientOptions{Token: u.userToken("sam")})
	first := idOfCall(sam, "forecast")
	if again := idOfCall(sam, "forecast"); again != first {
		t.Errorf("asked again: elicitation %s, want %s", again, first)
	}
	var statuses []int
	for _, c := range w.API.calls("POST /api/v1/elicitations") {
		statuses = append(statuses, c.Status)
	}
	if len(statuses) != 2 || statuses[0] != http.StatusCreated || statuses[1] != http.StatusOK {
		t.Errorf("creates answered %v, want 201 then 200 (the running one)", statuses)
	}
	if other := idOfCall(sam, "spare"); other == first {
		t.Error("another slot got the same elicitation")
	}
	if tess := idOfCall(w.connect(t, clientOptions{Token: u.userToken("tess")}), "forecast"); tess == first {
		t.Error("another user got the same elicitation")
	}

	// Calls at once: one flow.
	uma := w.connect(t, clientOptions{Token: u.userToken("uma")})
	ids := make([]string, 4)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Go(func() { ids[i] = idOfCall(uma, "forecast") })
	}
	wg.Wait()
	for _, id := range ids[1:] {
		if id != ids[0] {
			t.Fatalf("calls at once got elicitations %v, want one", ids)
		}
	}
}

func TestAnAPIErrorSaysTheStatusTheMessageAndTheReason(t *testing.T) {
	for _, tc := range []struct {
		err  delegate.APIError
		want string
	}{
		{delegate.APIError{Status: 409, Message: "the user has no Demo API key stored for this service", Reason: "not_stored"},
			"urlflow: 409 the user has no Demo API key stored for this service (not_stored)"},
		{delegate.APIError{Status: 503, Message: "Service Unavailable"}, "urlflow: 503 Service Unavailable"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
}

func TestAnElicitationHasEndedOnlyInATerminalState(t *testing.T) {
	for state, ended := range map[string]bool{
		"complete": true, "declined": true, "cancelled": true, "expired": true,
		"pending": false, "consented": false, "in_progress": false, "failed": false, "unknown": false, "": false,
	} {
		if got := (&delegate.Elicitation{State: state}).Ended(); got != ended {
			t.Errorf("Ended() in %q = %v, want %v", state, got, ended)
		}
	}
}

// toolCall is a tools/call of forecast as the go-sdk hands it to a handler, from a client
// without URL mode, with args.
func toolCall(args string) *mcp.CallToolRequest {
	return &mcp.CallToolRequest{
		Params: &mcp.CallToolParamsRaw{Name: "forecast", Arguments: json.RawMessage(args)},
		Extra:  &mcp.RequestExtra{Header: http.Header{"Authorization": {"Bearer user-token"}}},
	}
}

// standIn is an httptest server in urlflow's place that records each request's body and
// answers with answer.
func standIn(t *testing.T, answer http.HandlerFunc) (*httptest.Server, *[]map[string]any) {
	var mu sync.Mutex
	var bodies []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		body["_path"], body["_auth"], body["_user"], body["_type"] = r.URL.Path, r.Header.Get("Authorization"),
			r.Header.Get("Urlflow-User-Token"), r.Header.Get("Content-Type")
		mu.Lock()
		bodies = append(bodies, body)
		mu.Unlock()
		answer(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &bodies
}

// These answers stand in for failures that urlflow cannot be made to produce.
func TestRequireReportsWhatUrlflowCouldNotServe(t *testing.T) {
	for _, tc := range []struct {
		name    string
		answer  http.HandlerFunc
		status  int    // of the *APIError; 0 for another error
		message string // in the error
	}{
		{"a 503 without urlflow's body", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "upstream connect error", http.StatusServiceUnavailable)
		}, http.StatusServiceUnavailable, "Service Unavailable"},
		{"a refusal", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusTooManyRequests)
			w.Write([]byte(`{"error": "over the service's rate limit"}`))
		}, http.StatusTooManyRequests, "over the service's rate limit"},
		{"a malformed answer", func(w http.ResponseWriter, _ *http.Request) {
			w.Write([]byte(`{"status": "stored"`))
		}, 0, "decode the answer"},
		{"a dropped connection", func(w http.ResponseWriter, _ *http.Request) {
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
		}, 0, "POST elicitations"},
	} {
		srv, _ := standIn(t, tc.answer)
		c, err := delegate.New(delegate.Options{URL: srv.URL, Key: "urlflow_sk_K"})
		if err != nil {
			t.Fatal(err)
		}
		cred, res, err := c.Require(t.Context(), toolCall(`{"city": "Paris"}`), delegate.Need{Slot: "demo_api_key"})
		var apiErr *delegate.APIError
		switch {
		case cred != nil || res != nil || err == nil || !strings.Contains(err.Error(), tc.message):
			t.Errorf("%s: %v %v %v", tc.name, cred, res, err)
		case tc.status != 0 && (!errors.As(err, &apiErr) || apiErr.Status != tc.status):
			t.Errorf("%s: %v, want an *APIError with %d", tc.name, err, tc.status)
		case tc.status == 0 && errors.As(err, &apiErr):
			t.Errorf("%s: %v, want an error reaching urlflow", tc.name, err)
		}
	}
}

// The stand-in answers as urlflow does; it shows the requests of Require and Call.
func TestRequireAndCallSendUrlflowWhatTheToolNeedsBoundToTheCall(t *testing.T) {
	srv, bodies := standIn(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/proxy") {
			w.Write([]byte(`{"status": 201, "headers": {"Content-Type": "application/json"}, "body": "{\"ok\": true}", "bodyEncoding": "text"}`))
			return
		}
		w.Write([]byte(`{"status": "stored", "credential": {"name": "github", "service": "weather"}}`))
	})
	c, err := delegate.New(delegate.Options{URL: srv.URL + "/urlflow", Key: "urlflow_sk_K"})
	if err != nil {
		t.Fatal(err)
	}
	need := delegate.Need{Provider: "github", Scopes: []string{"repo"}, Message: "Weather reads your repositories."}
	var calls []string
	for _, args := range []string{`{"city": "Paris", "days": 2}`, `{"days": 2, "city": "Paris"}`, `{"city": "Lyon", "days": 2}`} {
		cred, res, err := c.Require(t.Context(), toolCall(args), need)
		if err != nil || res != nil || cred == nil {
			t.Fatalf("Require with a stored credential: %v %v %v", cred, res, err)
		}
		calls = append(calls, (*bodies)[len(*bodies)-1]["call"].(string))
		if args == `{"city": "Lyon", "days": 2}` {
			resp, err := cred.Call(t.Context(), delegate.Request{Method: "POST", Path: "/user/repos", Query: map[string]string{"type": "owner"}, Body: `{"name": "w"}`,
				ResponseHeaders: []string{"Link", "X-RateLimit-*"}})
			if err != nil || resp.Status != http.StatusCreated || resp.Body != `{"ok": true}` || resp.Headers["Content-Type"] != "application/json" {
				t.Fatalf("Call: %+v %v", resp, err)
			}
		}
	}
	if !strings.HasPrefix(calls[0], "forecast:") || calls[0] != calls[1] || calls[0] == calls[2] {
		t.Errorf("calls %q: want the tool and its arguments, in any order", calls)
	}
	create, proxy := (*bodies)[0], (*bodies)[len(*bodies)-1]
	for name, want := range map[string]any{"_path": "/urlflow/api/v1/elicitations", "_auth": "Bearer urlflow_sk_K", "_user": "user-token",
		"_type": "application/json", "provider": "github", "message": need.Message} {
		if create[name] != want {
			t.Errorf("the create's %s is %v, want %v", name, create[name], want)
		}
	}
	if scopes, _ := create["scopes"].([]any); len(scopes) != 1 || scopes[0] != "repo" || create["slot"] != nil {
		t.Errorf("the create asks for %v %v, want the provider's scopes", create["scopes"], create["slot"])
	}
	for name, want := range map[string]any{"_path": "/urlflow/api/v1/proxy", "_user": "user-token", "provider": "github",
		"method": "POST", "path": "/user/repos", "body": `{"name": "w"}`} {
		if proxy[name] != want {
			t.Errorf("the proxy call's %s is %v, want %v", name, proxy[name], want)
		}
	}
	if q, _ := proxy["query"].(map[string]any); q["type"] != "owner" {
		t.Errorf("the proxy call's query is %v", proxy["query"])
	}
	if h, _ := proxy["responseHeaders"].([]any); len(h) != 2 || h[0] != "Link" || h[1] != "X-RateLimit-*" {
		t.Errorf("the proxy call's responseHeaders are %v", proxy["responseHeaders"])
	}
}

// urlflow's 429 waits what its rate limit's window has left (seconds at least): these
// stand-ins answer with the short and long waits a test can wait for.
func TestACreateOverTheRateLimitIsSentAgainWithItsIdempotencyKey(t *testing.T) {
	var keys []string
	var mu sync.Mutex
	calls := 0
	srv, _ := standIn(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		n := calls
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case n == 1:
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
			w.Write([]byte(`{"error": "over the service's rate limit"}`))
		case n <= 3:
			w.Write([]byte(`{"status": "stored", "credential": {"name": "demo_api_key"}}`))
		default:
			w.Header().Set("Retry-After", "3600")
			w.WriteHeader(http.StatusTooManyRequests)
			w.Write([]byte(`{"error": "over the service's rate limit"}`))
		}
	})
	c, err := delegate.New(delegate.Options{URL: srv.URL, Key: "urlflow_sk_K"})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if cred, res, err := c.Require(t.Context(), toolCall(`{"city": "Paris"}`), delegate.Need{Slot: "demo_api_key"}); cred == nil || res != nil || err != nil {
			t.Fatalf("Require: %v %v %v", cred, res, err)
		}
	}
	if len(keys) != 3 || keys[0] == "" || keys[0] != keys[1] || keys[1] == keys[2] {
		t.Errorf("Idempotency-Keys %q: want the first create's sent twice, the second's its own", keys)
	}
	// An hour's wait is not waited: the refusal comes back.
	start := time.Now()
	var apiErr *delegate.APIError
	if _, _, err := c.Require(t.Context(), toolCall(`{}`), delegate.Need{Slot: "demo_api_key"}); !errors.As(err, &apiErr) || apiErr.Status != http.StatusTooManyRequests {
		t.Errorf("Require over the limit for an hour: %v, want the 429", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("it waited %s", time.Since(start))
	}
}
