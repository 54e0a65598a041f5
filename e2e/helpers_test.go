package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/urlflow/urlflow/internal/redistest"
)

// callResult is the outcome of a tool call made in the background.
type callResult struct {
	res *sdk.CallToolResult
	err error
}

// callAsync calls tool name in the background; the channel receives its outcome.
func (c *client) callAsync(name string, args map[string]any) <-chan callResult {
	out := make(chan callResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		res, err := c.Call(ctx, name, args)
		out <- callResult{res, err}
	}()
	return out
}

// await waits for a background call.
func await(t *testing.T, ch <-chan callResult, timeout time.Duration) *sdk.CallToolResult {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("tool call failed: %v", r.err)
		}
		return r.res
	case <-time.After(timeout):
		t.Fatalf("tool call did not return within %s", timeout)
		return nil
	}
}

// urlElicitationRequired returns the elicitations of a −32042 error.
func urlElicitationRequired(t testing.TB, err error) []*sdk.ElicitParams {
	t.Helper()
	ps, err := elicitationsOf(err)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// elicitationsOf returns the one elicitation of a −32042 error, or an error that says what
// err is instead.
func elicitationsOf(err error) ([]*sdk.ElicitParams, error) {
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != sdk.CodeURLElicitationRequired {
		return nil, fmt.Errorf("want a −32042 URL elicitation required error, got %v", err)
	}
	var data struct {
		Elicitations []*sdk.ElicitParams `json:"elicitations"`
	}
	if err := json.Unmarshal(rpcErr.Data, &data); err != nil || len(data.Elicitations) != 1 {
		return nil, fmt.Errorf("−32042 data: %s (%v)", rpcErr.Data, err)
	}
	return data.Elicitations, nil
}

// elicitation is the recovery API's view of an elicitation.
type elicitation struct {
	ID        string `json:"id"`
	State     string `json:"state"`
	Kind      string `json:"kind"`
	Target    string `json:"target"`
	URL       string `json:"url"`
	RetryOf   string `json:"retryOf"`
	RetriedBy string `json:"retriedBy"`
	Error     string `json:"error"`
	Delivery  struct {
		QueuedAt       *time.Time `json:"queuedAt"`
		WrittenAt      *time.Time `json:"writtenAt"`
		SessionEndedAt *time.Time `json:"sessionEndedAt"`
		SessionEnded   string     `json:"sessionEnded"`
		Attempts       int        `json:"attempts"`
		LastError      string     `json:"lastError"`
	} `json:"delivery"`
	History []struct {
		Event  string `json:"event"`
		Actor  string `json:"actor"`
		From   string `json:"from"`
		To     string `json:"to"`
		Reason string `json:"reason"`
		// Count is how many identical events in a row the entry stands for (0 means 1).
		Count int `json:"count"`
	} `json:"history"`
}

// events returns the history's events in order, an entry that counts repeated events once
// for each.
func (e elicitation) events() []string {
	var out []string
	for _, h := range e.History {
		for range max(h.Count, 1) {
			out = append(out, h.Event)
		}
	}
	return out
}

// status reads elicitation id through the API with token.
func (s *server) status(id, token string) elicitation {
	s.t.Helper()
	var e elicitation
	if code := s.getJSON("/api/v1/elicitations/"+id, token, &e); code != http.StatusOK {
		s.t.Fatalf("GET elicitation %s: status %d (%+v)", id, code, e)
	}
	return e
}

// waitState polls elicitation id through the API until it reaches want.
func (s *server) waitState(id, token, want string, timeout time.Duration) elicitation {
	s.t.Helper()
	return s.waitFor(id, token, "state "+want, timeout, func(e elicitation) bool { return e.State == want })
}

// waitFor polls elicitation id through the API until cond holds. Tests use it for changes
// that the outside world has no event for (a state reached as a side effect, a delivery
// recorded after it was written).
func (s *server) waitFor(id, token, what string, timeout time.Duration, cond func(elicitation) bool) elicitation {
	s.t.Helper()
	var e elicitation
	eventually(s.t, timeout, what+" of "+id, func() bool {
		e = s.status(id, token)
		return cond(e)
	})
	return e
}

// waitDelivered waits until the delivery of elicitation id is recorded as written. The
// notifier records it after writing, so a client can see the notification first.
func (s *server) waitDelivered(id, token string) elicitation {
	s.t.Helper()
	return s.waitFor(id, token, "written delivery", 10*time.Second,
		func(e elicitation) bool { return e.Delivery.WrittenAt != nil })
}

// eventually polls cond until it holds or timeout passes. Only for what the outside of a
// process offers no event for.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// requireEvents checks that the history holds want as a subsequence, in order.
func requireEvents(t *testing.T, e elicitation, want ...string) {
	t.Helper()
	got := e.events()
	i := 0
	for _, ev := range got {
		if i < len(want) && ev == want[i] {
			i++
		}
	}
	if i < len(want) {
		t.Fatalf("history %v does not contain %v in order", got, want)
	}
}

// requireNoCanary checks that the canary appears in none of the places given, nor in any
// Redis value.
func requireNoCanary(t *testing.T, rs *redistest.Server, places map[string]string) {
	t.Helper()
	for name, text := range places {
		if strings.Contains(text, canary) {
			t.Errorf("the secret appears in %s", name)
		}
	}
	ctx := context.Background()
	rdb := rs.Client(t)
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) == 0 {
		t.Fatal("Redis holds no keys: the check would prove nothing")
	}
	for _, k := range keys {
		var values []string
		switch typ := rdb.Type(ctx, k).Val(); typ {
		case "string":
			values = []string{rdb.Get(ctx, k).Val()}
		case "list":
			values = rdb.LRange(ctx, k, 0, -1).Val()
		case "set":
			values = rdb.SMembers(ctx, k).Val()
		case "zset":
			values = rdb.ZRange(ctx, k, 0, -1).Val()
		case "hash":
			for f, v := range rdb.HGetAll(ctx, k).Val() {
				values = append(values, f, v)
			}
		case "stream":
			for _, m := range rdb.XRange(ctx, k, "-", "+").Val() {
				for f, v := range m.Values {
					values = append(values, f, fmt.Sprint(v))
				}
			}
		default:
			t.Fatalf("key %s has type %s, which this check does not read", k, typ)
		}
		for _, v := range values {
			if strings.Contains(v, canary) {
				t.Errorf("the secret appears in clear in Redis key %s", k)
			}
		}
	}
}

// str returns m[key] as a string.
func str(m map[string]any, key string) string { return fmt.Sprint(m[key]) }

// startWithDev is the common start of a flow test: its own redis-server, urlflow dev in
// elicitation style, a go-sdk client with URL mode as the development user "dev", and that
// user at a browser.
func startWithDev(t *testing.T, style string) (*redistest.Server, *server, *client, *person) {
	t.Helper()
	rs := redistest.Start(t)
	s := startServer(t, serverConfig{Redis: rs, Style: style})
	c := connect(t, s, clientConfig{Token: s.Token, URLMode: true})
	return rs, s, c, newPerson(t, sharedBrowser(t), "dev")
}

// storeSecretByPages stores value as the demo key of b's user on an error-style server:
// set_secret (with replace when one is stored already) answers −32042, b enters value on
// the pages, and c receives the completion notification. It returns the elicitation's ID.
func storeSecretByPages(t testing.TB, c *client, b *formBrowser, value string, replace bool) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := c.Call(ctx, "set_secret", map[string]any{"name": "demo_api_key", "replace": replace})
	params := urlElicitationRequired(t, err)[0]
	b.completeSecret(params.URL, value)
	c.waitCompletion(params.ElicitationID, 30*time.Second)
	return params.ElicitationID
}
