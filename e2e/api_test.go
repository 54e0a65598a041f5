package e2e

import (
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"path"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/urlflow/urlflow/internal/redistest"
)

// The recovery API (README, "Recovery: status, retry, cancel") in every state a flow can
// reach from outside, for the owner, another user, an operator and nobody; and the MCP
// tools that offer the same operations.

// fullView is the recovery API's view of an elicitation with its times.
type fullView struct {
	elicitation
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// apiAnswer is a raw answer of the recovery API.
type apiAnswer struct {
	status int
	header http.Header
	body   []byte
}

// view decodes the answer as an elicitation.
func (a apiAnswer) view(t *testing.T) fullView {
	t.Helper()
	var v fullView
	if err := json.Unmarshal(a.body, &v); err != nil {
		t.Fatalf("status %d, not an elicitation: %v\n%s", a.status, err, a.body)
	}
	return v
}

// object decodes the answer as a JSON object.
func (a apiAnswer) object(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(a.body, &m); err != nil {
		t.Fatalf("status %d, not a JSON object: %v\n%s", a.status, err, a.body)
	}
	return m
}

// api sends method path to s with a bearer token (none if empty) and a raw body (none if
// empty).
func (s *server) api(method, path, token, body string) apiAnswer {
	s.t.Helper()
	auth := ""
	if token != "" {
		auth = "Bearer " + token
	}
	return s.apiAuth(method, path, auth, body)
}

// apiAuth sends method path to s with the Authorization header auth (none if empty).
func (s *server) apiAuth(method, path, auth, body string) apiAnswer {
	s.t.Helper()
	header := http.Header{}
	if auth != "" {
		header.Set("Authorization", auth)
	}
	return s.apiRequest(method, path, header, body)
}

// apiRequest sends method path to s with header and a JSON body (none if empty).
func (s *server) apiRequest(method, path string, header http.Header, body string) apiAnswer {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.BaseURL+path, r)
	if err != nil {
		s.t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatalf("%s %s: read the answer: %v", method, path, err)
	}
	return apiAnswer{status: resp.StatusCode, header: resp.Header, body: data}
}

// elicitationPath is the recovery API path of elicitation id.
func elicitationPath(id string) string { return "/api/v1/elicitations/" + id }

// askErrorStyle calls set_secret on an error-style server and returns the URL elicitation
// of its −32042 answer.
func askErrorStyle(t *testing.T, c *client) *sdk.ElicitParams {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := c.Call(ctx, "set_secret", map[string]any{"name": "demo_api_key"})
	return urlElicitationRequired(t, err)[0]
}

// randomID returns a well-formed elicitation ID (26 characters of A-Z2-7) that nobody has.
func randomID() string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	b := make([]byte, 26)
	for i := range b {
		b[i] = alphabet[rand.IntN(len(alphabet))]
	}
	return string(b)
}

// requireUnchanged checks that after is before with nothing changed but the history entries
// added, each an event that left the state as it was.
func requireUnchanged(t *testing.T, before, after elicitation, added ...string) {
	t.Helper()
	if after.State != before.State || after.RetriedBy != before.RetriedBy || after.RetryOf != before.RetryOf {
		t.Fatalf("state %s (retriedBy %q), want %s (retriedBy %q) unchanged", after.State, after.RetriedBy, before.State, before.RetriedBy)
	}
	// The history gained exactly the added events: as new entries, or counted on the newest
	// entry when it is the same event (the history collapses repeats).
	if want := append(before.events(), added...); !slices.Equal(after.events(), want) || len(after.History) < len(before.History) {
		t.Fatalf("history %v, want %v followed by %v", after.events(), before.events(), added)
	}
	for i, h := range before.History {
		a := after.History[i]
		a.Count, h.Count = 0, 0 // the newest entry may count more of the same event
		if a != h {
			t.Fatalf("history entry %d changed from %+v to %+v", i, h, after.History[i])
		}
	}
	for _, h := range after.History[len(before.History):] {
		if h.From != before.State || h.To != before.State {
			t.Fatalf("added history entry %+v, want it from %s to %s", h, before.State, before.State)
		}
	}
}

// requireView checks the parts of v that every answer about elicitation id in state want
// must have: kind, target, times, history, and the URL exactly while it runs.
func requireView(t *testing.T, v fullView, id, want, url string) {
	t.Helper()
	if v.ID != id || v.State != want || v.Kind != "secret" || v.Target != "demo_api_key" {
		t.Fatalf("elicitation %+v, want id %s state %s kind secret target demo_api_key", v.elicitation, id, want)
	}
	if v.CreatedAt.IsZero() || !v.ExpiresAt.After(v.CreatedAt) || v.UpdatedAt.Before(v.CreatedAt) {
		t.Fatalf("times: created %s updated %s expires %s", v.CreatedAt, v.UpdatedAt, v.ExpiresAt)
	}
	if len(v.History) == 0 || v.History[0].Event != "created" {
		t.Fatalf("history %v does not start with created", v.events())
	}
	running := want == "pending" || want == "consented" || want == "in_progress" || want == "failed" || want == "unknown"
	switch {
	case running && v.URL != url:
		t.Fatalf("url %q while %s, want %q", v.URL, want, url)
	case !running && v.URL != "":
		t.Fatalf("url %q although the flow has ended (%s)", v.URL, want)
	}
}

func TestRecoveryAPIInEveryRunningState(t *testing.T) {
	t.Parallel()
	cases := []struct {
		state  string
		style  string
		answer string
		// start brings a new elicitation on its way to state and returns its URL and, for a
		// push-style call that waits for the flow, that call.
		start func(t *testing.T, s *server, c *client) (string, <-chan callResult)
	}{
		{"pending", "error", "", func(t *testing.T, s *server, c *client) (string, <-chan callResult) {
			return askErrorStyle(t, c).URL, nil
		}},
		{"consented", "push", "accept", func(t *testing.T, s *server, c *client) (string, <-chan callResult) {
			call := c.callAsync("set_secret", map[string]any{"name": "demo_api_key"})
			return c.nextElicitation(30 * time.Second).URL, call
		}},
		{"in_progress", "error", "", func(t *testing.T, s *server, c *client) (string, <-chan callResult) {
			url := askErrorStyle(t, c).URL
			if page := newFormBrowser(t, s, "dev").open(url); page.Status != http.StatusOK {
				t.Fatalf("the owner opening the link got %d: %s", page.Status, page.Text())
			}
			return url, nil
		}},
		{"unknown", "push", "fail", func(t *testing.T, s *server, c *client) (string, <-chan callResult) {
			call := c.callAsync("set_secret", map[string]any{"name": "demo_api_key"})
			return c.nextElicitation(30 * time.Second).URL, call
		}},
	}
	for _, tc := range cases {
		t.Run(tc.state, func(t *testing.T) {
			t.Parallel()
			rs := redistest.Start(t)
			s := startServer(t, serverConfig{Redis: rs, Style: tc.style})
			c := connect(t, s, clientConfig{Token: s.Token, URLMode: true, Answer: tc.answer})
			url, call := tc.start(t, s, c)
			id := path.Base(url)
			p := elicitationPath(id)
			s.waitState(id, s.Token, tc.state, 10*time.Second)

			got := s.api(http.MethodGet, p, s.Token, "")
			if got.status != http.StatusOK {
				t.Fatalf("GET: %d %s", got.status, got.body)
			}
			before := got.view(t)
			requireView(t, before, id, tc.state, url)

			op := s.api(http.MethodGet, p, s.OperatorToken, "")
			if op.status != http.StatusOK {
				t.Fatalf("operator GET: %d %s", op.status, op.body)
			}
			if v := op.view(t); v.State != tc.state || !reflect.DeepEqual(v.History, before.History) {
				t.Fatalf("the operator sees state %s history %v, the owner %s %v", v.State, v.events(), tc.state, before.events())
			}

			// A running flow is retried by opening its link again, with or without "new".
			for _, body := range []string{"", `{}`, `{"new": false}`, `{"new": true}`} {
				r := s.api(http.MethodPost, p+"/retry", s.Token, body)
				if r.status != http.StatusOK {
					t.Fatalf("retry with body %q: %d %s", body, r.status, r.body)
				}
				requireView(t, r.view(t), id, tc.state, url)
				if v := r.view(t); v.RetriedBy != "" {
					t.Fatalf("retry with body %q of a running flow started another one: %s", body, v.RetriedBy)
				}
			}
			bad := s.api(http.MethodPost, p+"/retry", s.Token, `{"new": tru`)
			if bad.status != http.StatusBadRequest || !strings.Contains(str(bad.object(t), "error"), `{"new": true}`) {
				t.Fatalf("retry with malformed JSON: %d %s", bad.status, bad.body)
			}
			requireUnchanged(t, before.elicitation, s.status(id, s.Token))

			cancelled := s.api(http.MethodPost, p+"/cancel", s.Token, "")
			if cancelled.status != http.StatusOK {
				t.Fatalf("cancel: %d %s", cancelled.status, cancelled.body)
			}
			v := cancelled.view(t)
			requireView(t, v, id, "cancelled", url)
			// The newest entry, but for the delivery of the completion notification, which
			// may already follow it: the notifier works while the answer is read.
			last := v.History[len(v.History)-1]
			for i := len(v.History) - 1; i > 0 && last.Event == "notified"; i-- {
				last = v.History[i-1]
			}
			if last.Event != "cancel" || last.Actor != "user" || last.From != tc.state || last.To != "cancelled" {
				t.Fatalf("the cancel is recorded as %+v", last)
			}
			c.waitCompletion(id, 30*time.Second)
			if call != nil {
				if res := await(t, call, time.Minute); str(structured(t, res), "status") != "cancelled" {
					t.Fatalf("the waiting set_secret answered: %s", text(res))
				}
			}

			again := s.api(http.MethodPost, p+"/cancel", s.Token, "")
			if again.status != http.StatusConflict || again.view(t).State != "cancelled" {
				t.Fatalf("second cancel: %d %s, want 409 cancelled", again.status, again.body)
			}
		})
	}
}

func TestRecoveryAPIInEveryEndedState(t *testing.T) {
	t.Parallel()
	cases := []struct {
		state  string
		style  string
		answer string
		ttl    string
		// end brings a new elicitation to its end and returns its ID once the client has
		// seen its completion notification.
		end func(t *testing.T, s *server, c *client) string
		// newAttempt is the status of a retry with {"new": true}.
		newAttempt int
	}{
		{"complete", "error", "", "", func(t *testing.T, s *server, c *client) string {
			params := askErrorStyle(t, c)
			newFormBrowser(t, s, "dev").completeSecret(params.URL, canary)
			c.waitCompletion(params.ElicitationID, 30*time.Second)
			return params.ElicitationID
		}, http.StatusConflict},
		{"declined", "push", "decline", "", func(t *testing.T, s *server, c *client) string {
			id := str(structured(t, c.CallOK("set_secret", map[string]any{"name": "demo_api_key"})), "elicitationId")
			c.waitCompletion(id, 30*time.Second)
			return id
		}, http.StatusCreated},
		{"cancelled", "push", "cancel", "", func(t *testing.T, s *server, c *client) string {
			id := str(structured(t, c.CallOK("set_secret", map[string]any{"name": "demo_api_key"})), "elicitationId")
			c.waitCompletion(id, 30*time.Second)
			return id
		}, http.StatusCreated},
		{"expired", "error", "", "5s", func(t *testing.T, s *server, c *client) string {
			id := askErrorStyle(t, c).ElicitationID
			c.waitCompletion(id, 30*time.Second)
			return id
		}, http.StatusCreated},
	}
	for _, tc := range cases {
		t.Run(tc.state, func(t *testing.T) {
			t.Parallel()
			rs := redistest.Start(t)
			s := startServer(t, serverConfig{Redis: rs, Style: tc.style, TTL: tc.ttl})
			c := connect(t, s, clientConfig{Token: s.Token, URLMode: true, Answer: tc.answer})
			id := tc.end(t, s, c)
			p := elicitationPath(id)
			s.waitDelivered(id, s.Token)

			got := s.api(http.MethodGet, p, s.Token, "")
			if got.status != http.StatusOK {
				t.Fatalf("GET: %d %s", got.status, got.body)
			}
			before := got.view(t)
			requireView(t, before, id, tc.state, "")
			if before.Delivery.WrittenAt == nil || before.Delivery.Attempts < 1 {
				t.Fatalf("the first notification is not recorded: %+v", before.Delivery)
			}

			// Cancel changes nothing and says where the flow stands.
			cancel := s.api(http.MethodPost, p+"/cancel", s.Token, "")
			if cancel.status != http.StatusConflict || cancel.view(t).State != tc.state {
				t.Fatalf("cancel of a %s flow: %d %s, want 409 %s", tc.state, cancel.status, cancel.body, tc.state)
			}
			afterCancel := s.status(id, s.Token)
			requireUnchanged(t, before.elicitation, afterCancel, "cancel")

			// Retry sends the notification to the originating session again.
			retry := s.api(http.MethodPost, p+"/retry", s.Token, "")
			if retry.status != http.StatusOK {
				t.Fatalf("retry: %d %s", retry.status, retry.body)
			}
			d := retry.view(t).Delivery
			if d.Attempts <= before.Delivery.Attempts || d.WrittenAt == nil || !d.WrittenAt.After(*before.Delivery.WrittenAt) {
				t.Fatalf("retry answered delivery %+v; before it was %+v", d, before.Delivery)
			}
			c.waitCompletion(id, 30*time.Second)
			afterRetry := s.status(id, s.Token)
			if afterRetry.State != tc.state {
				t.Fatalf("after the retry the state is %s", afterRetry.State)
			}
			requireEvents(t, afterRetry, "cancel", "notify_requeued", "notified")

			bad := s.api(http.MethodPost, p+"/retry", s.Token, `{"new":`)
			if bad.status != http.StatusBadRequest || !strings.Contains(str(bad.object(t), "error"), `{"new": true}`) {
				t.Fatalf("retry with malformed JSON: %d %s", bad.status, bad.body)
			}
			requireUnchanged(t, afterRetry, s.status(id, s.Token))

			fresh := s.api(http.MethodPost, p+"/retry", s.Token, `{"new": true}`)
			if fresh.status != tc.newAttempt {
				t.Fatalf(`retry {"new": true} of a %s flow: %d %s, want %d`, tc.state, fresh.status, fresh.body, tc.newAttempt)
			}
			if tc.newAttempt == http.StatusConflict {
				if v := fresh.view(t); v.State != tc.state || v.Error == "" {
					t.Fatalf(`retry {"new": true} of a complete flow does not say why not: %s`, fresh.body)
				}
				requireUnchanged(t, afterRetry, s.status(id, s.Token))
				return
			}
			next := fresh.view(t)
			requireView(t, next, next.ID, "pending", s.BaseURL+"/e/"+next.ID)
			if next.ID == id || next.RetryOf != id {
				t.Fatalf("new attempt %s has retryOf %q, want %s", next.ID, next.RetryOf, id)
			}
			if loc := fresh.header.Get("Location"); loc != elicitationPath(next.ID) {
				t.Fatalf("Location %q, want %s", loc, elicitationPath(next.ID))
			}
			if linked := s.api(http.MethodGet, fresh.header.Get("Location"), s.Token, "").view(t); linked.ID != next.ID || linked.RetryOf != id {
				t.Fatalf("the Location leads to %+v", linked.elicitation)
			}
			old := s.status(id, s.Token)
			if old.State != tc.state || old.RetriedBy != next.ID {
				t.Fatalf("the old attempt is %s with retriedBy %q, want %s with %s", old.State, old.RetriedBy, tc.state, next.ID)
			}
			requireEvents(t, old, "retried")

			second := s.api(http.MethodPost, p+"/retry", s.Token, `{"new": true}`)
			if second.status != http.StatusConflict || !strings.Contains(second.view(t).Error, next.ID) {
				t.Fatalf(`second retry {"new": true}: %d %s, want 409 naming %s`, second.status, second.body, next.ID)
			}
			requireUnchanged(t, old, s.status(id, s.Token))
		})
	}
}

func TestRetryOfAnEndedFlowSaysWhenItsSessionHasEnded(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	s := startServer(t, serverConfig{Redis: rs, Style: "push"})
	c := connect(t, s, clientConfig{Token: s.Token, URLMode: true, Answer: "decline"})
	id := str(structured(t, c.CallOK("set_secret", map[string]any{"name": "demo_api_key"})), "elicitationId")
	c.waitCompletion(id, 30*time.Second)
	before := s.waitDelivered(id, s.Token)

	c.session.Close()
	eventually(t, 10*time.Second, "urlflow notices that the session ended", func() bool {
		return strings.Contains(s.Output(), "mcp session ended")
	})
	retry := s.api(http.MethodPost, elicitationPath(id)+"/retry", s.Token, "")
	if v := retry.view(t); retry.status != http.StatusConflict || v.State != "declined" || !strings.Contains(v.Error, "session") {
		t.Fatalf("retry after the session ended: %d %s, want 409 saying the session has ended", retry.status, retry.body)
	}
	requireUnchanged(t, before, s.status(id, s.Token))
	// A new attempt is still possible; its client will have to ask again.
	if fresh := s.api(http.MethodPost, elicitationPath(id)+"/retry", s.Token, `{"new": true}`); fresh.status != http.StatusCreated {
		t.Fatalf(`retry {"new": true} after the session ended: %d %s`, fresh.status, fresh.body)
	}
}

func TestRecoveryAPIAnswersUnknownForAnythingNotTheCallers(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	s := startServer(t, serverConfig{Redis: rs, Style: "error"})
	alice := s.devToken("alice")
	bob := s.devToken("bob")
	own := askErrorStyle(t, connect(t, s, clientConfig{Token: alice, URLMode: true})).ElicitationID
	before := s.status(own, alice)

	ids := []struct {
		name, id, token string
	}{
		{"another user's", own, bob},
		{"malformed", "not-an-id", alice},
		{"malformed in lower case", strings.ToLower(own), alice},
		{"malformed one character too long", own + "A", alice},
		{"malformed outside the alphabet", "01890189018901890189018901", alice},
		{"well-formed but unknown", randomID(), alice},
		{"well-formed but unknown to an operator", randomID(), s.OperatorToken},
	}
	endpoints := []struct {
		name, method, suffix, body string
	}{
		{"status", http.MethodGet, "", ""},
		{"cancel", http.MethodPost, "/cancel", ""},
		{"retry", http.MethodPost, "/retry", ""},
		{"new attempt", http.MethodPost, "/retry", `{"new": true}`},
	}
	for _, tc := range ids {
		for _, ep := range endpoints {
			t.Run(tc.name+"/"+ep.name, func(t *testing.T) {
				a := s.api(ep.method, elicitationPath(tc.id)+ep.suffix, tc.token, ep.body)
				want := map[string]any{"id": tc.id, "state": "unknown"}
				if got := a.object(t); a.status != http.StatusNotFound || !reflect.DeepEqual(got, want) {
					t.Fatalf("%d %s, want 404 %v", a.status, a.body, want)
				}
			})
		}
	}
	requireUnchanged(t, before, s.status(own, alice))
}

func TestRecoveryAPIRequiresAValidBearerToken(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	s := startServer(t, serverConfig{Redis: rs, Style: "error"})
	id := askErrorStyle(t, connect(t, s, clientConfig{Token: s.Token, URLMode: true})).ElicitationID
	before := s.status(id, s.Token)

	parts := strings.Split(s.Token, ".")
	forged := parts[0] + "." + parts[1] + ".AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	metadata := s.BaseURL + "/.well-known/oauth-protected-resource/mcp"
	auths := []struct{ name, header string }{
		{"no token", ""},
		{"a made-up token", "Bearer not-a-token"},
		{"a token with a forged signature", "Bearer " + forged},
		{"the token in another scheme", "Basic " + s.Token},
		{"an empty bearer", "Bearer "},
	}
	endpoints := []struct{ method, suffix string }{
		{http.MethodGet, ""}, {http.MethodPost, "/cancel"}, {http.MethodPost, "/retry"},
	}
	for _, auth := range auths {
		for _, ep := range endpoints {
			t.Run(auth.name+"/"+ep.method+ep.suffix, func(t *testing.T) {
				a := s.apiAuth(ep.method, elicitationPath(id)+ep.suffix, auth.header, "")
				if a.status != http.StatusUnauthorized {
					t.Fatalf("%d %s, want 401", a.status, a.body)
				}
				challenge := a.header.Get("WWW-Authenticate")
				if !strings.HasPrefix(challenge, "Bearer ") || !strings.Contains(challenge, `resource_metadata="`+metadata+`"`) {
					t.Fatalf("WWW-Authenticate %q does not name resource_metadata %s", challenge, metadata)
				}
				if msg := str(a.object(t), "error"); !strings.Contains(msg, "bearer token") {
					t.Fatalf("the 401 says %q", msg)
				}
			})
		}
	}
	requireUnchanged(t, before, s.status(id, s.Token))

	// The challenge leads somewhere a client can read.
	var meta map[string]any
	if code := s.getJSON("/.well-known/oauth-protected-resource/mcp", "", &meta); code != http.StatusOK || meta["resource"] != s.MCPURL {
		t.Fatalf("resource metadata: %d %v, want resource %s", code, meta, s.MCPURL)
	}
}

func TestOperatorCanReadAndCancelAnyonesElicitation(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	s := startServer(t, serverConfig{Redis: rs, Style: "error"})
	alice := s.devToken("alice")
	c := connect(t, s, clientConfig{Token: alice, URLMode: true})
	params := askErrorStyle(t, c)
	id, p := params.ElicitationID, elicitationPath(params.ElicitationID)
	owner := s.status(id, alice)

	read := s.api(http.MethodGet, p, s.OperatorToken, "")
	if read.status != http.StatusOK {
		t.Fatalf("operator GET: %d %s", read.status, read.body)
	}
	v := read.view(t)
	requireView(t, v, id, "pending", params.URL)
	if !reflect.DeepEqual(v.History, owner.History) {
		t.Fatalf("the operator sees history %v, the owner %v", v.events(), owner.events())
	}
	if r := s.api(http.MethodPost, p+"/retry", s.OperatorToken, ""); r.status != http.StatusOK || r.view(t).URL != params.URL {
		t.Fatalf("operator retry of a running flow: %d %s", r.status, r.body)
	}

	if r := s.api(http.MethodPost, p+"/cancel", s.OperatorToken, ""); r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "reason") {
		t.Fatalf("operator cancel without a reason: %d %s, want 400 asking for one", r.status, r.body)
	}
	cancel := s.api(http.MethodPost, p+"/cancel", s.OperatorToken, `{"reason": "the user asked on the helpdesk"}`)
	if cancel.status != http.StatusOK || cancel.view(t).State != "cancelled" {
		t.Fatalf("operator cancel: %d %s", cancel.status, cancel.body)
	}
	c.waitCompletion(id, 30*time.Second)
	e := s.status(id, alice)
	if e.State != "cancelled" {
		t.Fatalf("the owner sees %s after the operator's cancel", e.State)
	}
	recorded := false
	for _, h := range e.History {
		if h.Event == "cancel" {
			recorded = true
			if h.Actor != "operator" || h.From != "pending" || h.To != "cancelled" || h.Reason != "the user asked on the helpdesk" {
				t.Fatalf("the operator's cancel is recorded as %+v", h)
			}
		}
	}
	if !recorded {
		t.Fatalf("the operator's cancel is not in the history %v", e.events())
	}
	if again := s.api(http.MethodPost, p+"/cancel", s.OperatorToken, `{"reason": "again"}`); again.status != http.StatusConflict || again.view(t).State != "cancelled" {
		t.Fatalf("operator's second cancel: %d %s", again.status, again.body)
	}
}

// toolView decodes the structuredContent of an MCP tool result as the API's view.
func toolView(t *testing.T, res *sdk.CallToolResult) fullView {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var v fullView
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("structuredContent is not an elicitation: %s", b)
	}
	return v
}

// requireSameView checks that the tool and the API say the same about an elicitation.
func requireSameView(t *testing.T, tool, api fullView) {
	t.Helper()
	if tool.ID != api.ID || tool.State != api.State || tool.Kind != api.Kind || tool.Target != api.Target ||
		tool.URL != api.URL || !tool.CreatedAt.Equal(api.CreatedAt) || !tool.ExpiresAt.Equal(api.ExpiresAt) ||
		!reflect.DeepEqual(tool.History, api.History) {
		t.Fatalf("the tool says %+v\nthe API says %+v", tool, api)
	}
}

func TestStatusAndCancelToolsAnswerLikeTheAPI(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	s := startServer(t, serverConfig{Redis: rs, Style: "error"})
	alice := s.devToken("alice")
	bob := s.devToken("bob")
	ca := connect(t, s, clientConfig{Token: alice, URLMode: true})
	cb := connect(t, s, clientConfig{Token: bob, URLMode: true})
	params := askErrorStyle(t, ca)
	id := params.ElicitationID

	res := ca.CallOK("elicitation_status", map[string]any{"elicitationId": id})
	if res.IsError {
		t.Fatalf("status of a running flow is an error: %s", text(res))
	}
	requireSameView(t, toolView(t, res), s.api(http.MethodGet, elicitationPath(id), alice, "").view(t))
	if !strings.Contains(text(res), params.URL) {
		t.Fatalf("the status text does not give the link: %s", text(res))
	}
	before := s.status(id, alice)

	others := []struct {
		name  string
		c     *client
		token string
		id    string
	}{
		{"another user's", cb, bob, id},
		{"malformed", ca, alice, "not-an-id"},
		{"well-formed but unknown", ca, alice, randomID()},
	}
	for _, tc := range others {
		for _, tool := range []string{"elicitation_status", "cancel_elicitation"} {
			t.Run(tc.name+"/"+tool, func(t *testing.T) {
				res := tc.c.CallOK(tool, map[string]any{"elicitationId": tc.id})
				want := map[string]any{"id": tc.id, "state": "unknown"}
				if got := structured(t, res); !reflect.DeepEqual(got, want) {
					t.Fatalf("%s answered %v, want %v", tool, got, want)
				}
				if !strings.Contains(text(res), "unknown") {
					t.Fatalf("%s says: %s", tool, text(res))
				}
				if a := s.api(http.MethodGet, elicitationPath(tc.id), tc.token, ""); !reflect.DeepEqual(a.object(t), want) {
					t.Fatalf("the API answers %s", a.body)
				}
			})
		}
	}
	requireUnchanged(t, before, s.status(id, alice))

	res = ca.CallOK("cancel_elicitation", map[string]any{"elicitationId": id})
	v := toolView(t, res)
	if res.IsError || v.State != "cancelled" || v.URL != "" {
		t.Fatalf("cancel_elicitation of a running flow: isError=%v %s", res.IsError, text(res))
	}
	ca.waitCompletion(id, 30*time.Second)
	s.waitDelivered(id, alice)
	// Since the cancel, the notification has been recorded too.
	api := s.api(http.MethodGet, elicitationPath(id), alice, "").view(t)
	if len(v.History) > len(api.History) {
		t.Fatalf("the tool's history %v is longer than the API's %v", v.events(), api.events())
	}
	api.History = api.History[:len(v.History)]
	requireSameView(t, v, api)

	res = ca.CallOK("cancel_elicitation", map[string]any{"elicitationId": id})
	if !res.IsError || toolView(t, res).State != "cancelled" || !strings.Contains(text(res), "Nothing was cancelled") {
		t.Fatalf("cancel_elicitation of an ended flow: isError=%v %s", res.IsError, text(res))
	}
	if a := s.api(http.MethodPost, elicitationPath(id)+"/cancel", alice, ""); a.status != http.StatusConflict || a.view(t).State != "cancelled" {
		t.Fatalf("the API's cancel of the same: %d %s", a.status, a.body)
	}
	res = ca.CallOK("elicitation_status", map[string]any{"elicitationId": id})
	requireSameView(t, toolView(t, res), s.api(http.MethodGet, elicitationPath(id), alice, "").view(t))
}

func TestStatusToolWaitReturnsAsSoonAsTheFlowEnds(t *testing.T) {
	t.Parallel()
	t.Run("deadline", func(t *testing.T) {
		t.Parallel()
		rs := redistest.Start(t)
		s := startServer(t, serverConfig{Redis: rs, Style: "error", TTL: "5s"})
		c := connect(t, s, clientConfig{Token: s.Token, URLMode: true})
		id := askErrorStyle(t, c).ElicitationID

		start := time.Now()
		res := c.CallOK("elicitation_status", map[string]any{"elicitationId": id, "waitSeconds": 60})
		took := time.Since(start)
		if v := toolView(t, res); v.State != "expired" {
			t.Fatalf("after waiting the state is %s, want expired", v.State)
		}
		if took > 30*time.Second {
			t.Fatalf("the wait took %s although the flow expired after 5s", took)
		}
	})
	t.Run("completed in the browser", func(t *testing.T) {
		t.Parallel()
		rs := redistest.Start(t)
		s := startServer(t, serverConfig{Redis: rs, Style: "error"})
		c := connect(t, s, clientConfig{Token: s.Token, URLMode: true})
		params := askErrorStyle(t, c)

		call := c.callAsync("elicitation_status", map[string]any{"elicitationId": params.ElicitationID, "waitSeconds": 60})
		newFormBrowser(t, s, "dev").completeSecret(params.URL, canary)
		// Well before the 60 s the call asked for.
		if v := toolView(t, await(t, call, 30*time.Second)); v.State != "complete" {
			t.Fatalf("after waiting the state is %s, want complete", v.State)
		}
	})
}

// TestStatusToolCapsTheWait asks elicitation_status to wait an hour. The cap is 60 seconds
// (mcp.DefaultStatusWaitLimit, checked by the mcp package's own tests); here it is
// shortened to 2 seconds with a test-only setting.
func TestStatusToolCapsTheWait(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	s := startServer(t, serverConfig{Redis: rs, Style: "error", Env: []string{"URLFLOW_TEST_STATUS_WAIT_LIMIT=2s"}})
	c := connect(t, s, clientConfig{Token: s.Token, URLMode: true})
	id := askErrorStyle(t, c).ElicitationID

	start := time.Now()
	res := c.CallOK("elicitation_status", map[string]any{"elicitationId": id, "waitSeconds": 3600})
	took := time.Since(start)
	if v := toolView(t, res); res.IsError || v.State != "pending" {
		t.Fatalf("after the capped wait: isError=%v state %s", res.IsError, v.State)
	}
	if took < 2*time.Second || took > 30*time.Second {
		t.Fatalf("waitSeconds 3600 returned after %s, want the cap of 2s", took)
	}
}
