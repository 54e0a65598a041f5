package delegate_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/urlflow/urlflow/delegate"
)

// Credential.Call: the API's answer through urlflow's proxy, with the credential injected
// by urlflow and redacted from what comes back, and urlflow's refusals with the reason a
// tool acts on.

// storedFor has user name enter a new demo key through weather (a client without URL
// mode, the shortest way) and returns the key, the user's client and the credential
// weather's tool got.
func storedFor(t *testing.T, u *urlflow, w *weather, name string) (string, *user, *delegate.Credential) {
	t.Helper()
	token := u.userToken(name)
	c := w.connect(t, clientOptions{Token: token})
	link, _ := structured(t, c.callOK("forecast", forecast))["url"].(string)
	key := demoKey()
	newPerson(t, u, name).completeSecret(link, key)
	wantForecast(t, c.callOK("forecast", forecast))
	return key, c, w.credentialOf(t, token)
}

func TestCallPassesTheAPIsAnswerThroughWithTheCredentialRedacted(t *testing.T) {
	t.Parallel()
	u := startUrlflow(t)
	w := startWeather(t, u, delegate.Options{})
	key, _, cred := storedFor(t, u, w, "kim")
	ctx := testContext(t)

	resp, err := cred.Call(ctx, delegate.Request{Method: "POST", Path: "/echo", Query: map[string]string{"units": "metric"}, Body: `{"hello": "world"}`})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != http.StatusOK || resp.BodyEncoding != "text" || !strings.Contains(resp.Headers["Content-Type"], "json") {
		t.Fatalf("echo: %+v", resp)
	}
	for _, want := range []string{`"POST"`, "/echo", "units", "metric", "hello", "[redacted]"} {
		if !strings.Contains(resp.Body, want) {
			t.Errorf("the echo does not show %s: %s", want, resp.Body)
		}
	}
	if strings.Contains(resp.Body, key) {
		t.Error("the answer carries the key")
	}
	// Its own headers, a repeated parameter, a body that is not text.
	resp, err = cred.Call(ctx, delegate.Request{Method: "POST", Path: "/echo", Query: map[string]string{"tag": "a"},
		QueryValues: url.Values{"tag": {"b", "c"}}, Header: map[string]string{"X-Request-Id": "r-7"},
		Body: "\xff\x00bytes", ContentType: "application/octet-stream"})
	if err != nil {
		t.Fatal(err)
	}
	var echoed struct {
		Query   map[string][]string `json:"query"`
		Headers map[string]string   `json:"headers"`
	}
	if err := json.Unmarshal([]byte(resp.Body), &echoed); err != nil || !slices.Equal(echoed.Query["tag"], []string{"a", "b", "c"}) ||
		echoed.Headers["X-Request-Id"] != "r-7" || echoed.Headers["Content-Type"] != "application/octet-stream" || echoed.Headers["Content-Length"] != "7" {
		t.Errorf("the API saw %s (%v)", resp.Body, err)
	}
	// An answer of the API that is not a success is passed on as it is, not as an error.
	resp, err = cred.Call(ctx, delegate.Request{Method: "GET", Path: "/no-such-endpoint"})
	if err != nil || resp.Status != http.StatusNotFound || !strings.Contains(resp.Body, "no such endpoint") {
		t.Errorf("an unknown endpoint: %+v %v", resp, err)
	}
	// What the slot's configuration does not allow is urlflow's 400, and nothing is sent.
	for _, req := range []delegate.Request{{Method: "DELETE", Path: "/whoami"}, {Method: "GET", Path: "/../../healthz"}} {
		_, err := cred.Call(ctx, req)
		var apiErr *delegate.APIError
		if !errors.As(err, &apiErr) || apiErr.Status != http.StatusBadRequest || apiErr.Message == "" {
			t.Errorf("%s %s: %v, want urlflow's 400", req.Method, req.Path, err)
		}
	}
	for _, c := range w.API.calls("POST /api/v1/proxy") {
		if !c.UserToken || c.Auth != "Bearer "+u.Key {
			t.Errorf("a proxy call without the service key and the user's token: %+v", c)
		}
	}
}

// refusal returns the *APIError of err, failing the test if it is not one.
func refusal(t *testing.T, err error) *delegate.APIError {
	t.Helper()
	var apiErr *delegate.APIError
	if !errors.As(err, &apiErr) {
		t.Fatalf("want urlflow's refusal, got %v", err)
	}
	return apiErr
}

func TestCallIsRefusedWithTheReasonAToolActsOn(t *testing.T) {
	t.Parallel()
	u := startUrlflow(t)
	w := startWeather(t, u, delegate.Options{})

	t.Run("carried, then locked", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		key, c, cred := storedFor(t, u, w, "lena")
		// A request that carries the credential is refused, nothing is sent, and the secret
		// is locked: the request may be a guess being checked.
		_, err := cred.Call(ctx, delegate.Request{Method: "POST", Path: "/echo", Body: "is it " + key + "?"})
		if r := refusal(t, err); r.Status != http.StatusUnprocessableEntity || r.Reason != "carried" ||
			!strings.Contains(r.Error(), "(carried)") || strings.Contains(r.Error(), key) {
			t.Fatalf("a request carrying the key: %v", r)
		}
		_, err = cred.Call(ctx, delegate.Request{Method: "GET", Path: "/whoami"})
		if r := refusal(t, err); r.Status != http.StatusConflict || r.Reason != "locked" {
			t.Fatalf("after the lock: %v", r)
		}
		// Require asks the user again: a new entry replaces the locked one.
		res := c.callOK("forecast", forecast)
		link, _ := structured(t, res)["url"].(string)
		if structured(t, res)["status"] != "user_action_required" || link == "" {
			t.Fatalf("a locked secret: %v, want the user asked again", structured(t, res))
		}
		newPerson(t, u, "lena").completeSecret(link, demoKey())
		wantForecast(t, c.callOK("forecast", forecast))
	})

	t.Run("not stored", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		_, _, cred := storedFor(t, u, w, "mona")
		// Mona removes what weather holds, with urlflow's own tool.
		mona := connectToUrlflow(t, u, u.urlflowToken("mona"))
		res, err := mona.CallTool(ctx, &mcp.CallToolParams{Name: "disconnect", Arguments: map[string]any{"name": "demo_api_key", "service": service}})
		if err != nil || res.IsError {
			t.Fatalf("disconnect: %+v %v", res, err)
		}
		_, err = cred.Call(ctx, delegate.Request{Method: "GET", Path: "/whoami"})
		if r := refusal(t, err); r.Status != http.StatusConflict || r.Reason != "not_stored" {
			t.Fatalf("after disconnect: %v", r)
		}
	})
}

// testContext returns a context that ends with the test, or after a minute.
func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// connectToUrlflow connects a go-sdk client with token to urlflow's own /mcp.
func connectToUrlflow(t *testing.T, u *urlflow, token string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1.0.0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	session, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: u.URL + "/mcp", HTTPClient: &http.Client{Transport: bearer(token)}},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect to urlflow: %v", err)
	}
	t.Cleanup(func() { session.Close() })
	return session
}

// A server whose configuration has release receives the secret its user stored, named by
// the credential it got from Require.
func TestReleaseGivesAServerWithReleaseTheSecretItself(t *testing.T) {
	t.Parallel()
	u := startUrlflow(t)
	w := startWeather(t, u, delegate.Options{})
	key, _, cred := storedFor(t, u, w, "lena")
	rel, err := cred.Release(testContext(t))
	if err != nil || rel.Secret != key || rel.Kind != "secret" || rel.Target != "demo_api_key" || rel.UserRef == "" || rel.AccessToken != "" {
		t.Fatalf("Release: %+v %v, want the secret stored", rel, err)
	}
	var refused *delegate.APIError
	if _, err := w.Client.Offline(rel.UserRef, delegate.Need{Slot: "demo_api_key"}).Release(testContext(t)); !errors.As(err, &refused) ||
		refused.Status != http.StatusForbidden || refused.Reason != "not_offline" {
		t.Errorf("a release by reference of a credential stored without offline: %v", err)
	}
}
