package delegate_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/urlflow/urlflow/delegate"
)

// Client.WebhookHandler, the endpoint of a service's webhook: it tells the owed client
// session that its user finished when urlflow's signed message arrives, answers a
// message it has verified before with 204 without acting twice, and refuses anything
// else without telling anyone.

func TestWebhookHandlerTellsTheOwedSessionWhenUrlflowsWebhookArrives(t *testing.T) {
	t.Parallel()
	u := startUrlflow(t)
	w := startWeather(t, u, delegate.Options{Style: delegate.StyleError}) // no Follow: the webhook alone
	v, err := delegate.NewWebhookVerifier(webhookSecret)
	if err != nil {
		t.Fatal(err)
	}
	handler := w.Client.WebhookHandler(v)
	u.Hooks.serve(handler)
	quinn := w.connect(t, clientOptions{Token: u.userToken("quinn"), URLMode: true})
	_, err = quinn.call("forecast", forecast)
	asked := urlElicitationRequired(t, err)

	newPerson(t, u, "quinn").completeSecret(asked.URL, demoKey())
	quinn.waitCompletion(asked.ElicitationID, 20*time.Second)
	// Two messages: the elicitation's ending, and the credential it stored.
	eventually(t, 5*time.Second, "the webhooks answered", func() bool { return len(u.Hooks.received()) >= 2 })
	var hooks []receivedHook
	for _, h := range u.Hooks.received() {
		if h.Status != http.StatusNoContent {
			t.Errorf("a webhook answered %d, want 204", h.Status)
		}
		if h.Header.Get(delegate.HeaderWebhookID) == "msg_"+asked.ElicitationID {
			hooks = append(hooks, h)
		}
	}
	if len(hooks) != 1 {
		t.Fatalf("webhooks of the elicitation received: %+v", hooks)
	}

	// urlflow sends a message again when it did not see the answer: 204 again, and the
	// session is not told twice.
	again := httptest.NewRecorder()
	handler.ServeHTTP(again, hookRequest(hooks[0].Header, hooks[0].Body))
	if again.Code != http.StatusNoContent {
		t.Errorf("the same message again: %d, want 204", again.Code)
	}
	quinn.noCompletion(300 * time.Millisecond)
	wantForecast(t, quinn.callOK("forecast", forecast))
}

// hookRequest is a webhook request with header and body.
func hookRequest(header http.Header, body []byte) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/urlflow-webhook", bytes.NewReader(body))
	for k, vs := range header {
		r.Header[k] = vs
	}
	return r
}

// signedHook returns the headers of message id sent at ts with body, signed with secret.
func signedHook(t testing.TB, secret, id string, ts time.Time, body []byte) http.Header {
	t.Helper()
	key, err := delegate.ParseSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set(delegate.HeaderWebhookID, id)
	h.Set(delegate.HeaderWebhookTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(delegate.HeaderWebhookSignature, delegate.SignWebhook(key, id, ts, body))
	return h
}

// brokenBody is a request body whose reading fails.
type brokenBody struct{}

func (brokenBody) Read([]byte) (int, error) { return 0, errors.New("the connection broke") }

// The messages below stand in for what urlflow cannot be made to send: forged, altered,
// stale and broken ones, and one signed by the test with the service's secret.
func TestWebhookHandlerRefusesWhatDoesNotVerifyAndTellsNoOne(t *testing.T) {
	t.Parallel()
	u := startUrlflow(t)
	w := startWeather(t, u, delegate.Options{Style: delegate.StyleError})
	v, err := delegate.NewWebhookVerifier(webhookSecret)
	if err != nil {
		t.Fatal(err)
	}
	handler := w.Client.WebhookHandler(v)
	rita := w.connect(t, clientOptions{Token: u.userToken("rita"), URLMode: true})
	_, err = rita.call("forecast", forecast)
	asked := urlElicitationRequired(t, err) // her session is owed the end of this flow
	id := asked.ElicitationID
	body := fmt.Appendf(nil, `{"type":"elicitation.complete","timestamp":"%s","data":{"elicitation":{"id":%q,"state":"complete","kind":"secret","target":"demo_api_key","service":"weather"}}}`,
		time.Now().UTC().Format(time.RFC3339), id)
	now := time.Now()
	otherSecret := "whsec_b3RoZXItc2VjcmV0LW9mLXR3ZW50eS1mb3VyLWJ5dGVz"

	for _, tc := range []struct {
		name string
		req  *http.Request
		want int
	}{
		{"signed with another secret", hookRequest(signedHook(t, otherSecret, "msg_"+id, now, body), body), http.StatusUnauthorized},
		{"unsigned", hookRequest(http.Header{}, body), http.StatusUnauthorized},
		{"altered after signing", hookRequest(signedHook(t, webhookSecret, "msg_"+id, now, body), bytes.ReplaceAll(body, []byte("secret"), []byte("oauth"))), http.StatusUnauthorized},
		{"stale", hookRequest(signedHook(t, webhookSecret, "msg_"+id, now.Add(-10*time.Minute), body), body), http.StatusUnauthorized},
		{"from the future", hookRequest(signedHook(t, webhookSecret, "msg_"+id, now.Add(10*time.Minute), body), body), http.StatusUnauthorized},
		{"signed, but not urlflow's JSON", hookRequest(signedHook(t, webhookSecret, "msg_x", now, []byte("complete")), []byte("complete")), http.StatusUnauthorized},
		{"unreadable", httptest.NewRequest(http.MethodPost, "/urlflow-webhook", brokenBody{}), http.StatusBadRequest},
	} {
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, tc.req)
		if rec.Code != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, rec.Code, tc.want)
		}
	}
	rita.noCompletion(300 * time.Millisecond)

	valid := signedHook(t, webhookSecret, "msg_"+id, now, body)
	for i, want := range []int{http.StatusNoContent, http.StatusNoContent} { // the second one is a replay
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, hookRequest(valid, body))
		if rec.Code != want {
			t.Errorf("a valid message, attempt %d: %d, want %d", i+1, rec.Code, want)
		}
	}
	rita.waitCompletion(id, 5*time.Second)
	rita.noCompletion(300 * time.Millisecond)
}

// OnCredentialEvent hears of the changes of the credentials the server holds, through the
// webhook as through the event stream: stored when the user enters it, deleted when the
// server deletes it, with the user's reference; never a value. OnElicitation hears, the
// same two ways, of the flow that stored it ending complete.
func TestAServerHearsOfTheChangesOfItsCredentials(t *testing.T) {
	t.Parallel()
	u := startUrlflow(t)
	var mu sync.Mutex
	var byHook, byStream []*delegate.CredentialEvent
	record := func(to *[]*delegate.CredentialEvent) func(*delegate.CredentialEvent) {
		return func(ev *delegate.CredentialEvent) {
			mu.Lock()
			defer mu.Unlock()
			*to = append(*to, ev)
		}
	}
	var flowsByHook, flowsByStream []*delegate.Elicitation
	recordFlow := func(to *[]*delegate.Elicitation) func(*delegate.Elicitation) {
		return func(e *delegate.Elicitation) {
			mu.Lock()
			defer mu.Unlock()
			*to = append(*to, e)
		}
	}
	hooked := startWeather(t, u, delegate.Options{Style: delegate.StyleError, OnCredentialEvent: record(&byHook), OnElicitation: recordFlow(&flowsByHook)})
	v, err := delegate.NewWebhookVerifier(webhookSecret)
	if err != nil {
		t.Fatal(err)
	}
	u.Hooks.serve(hooked.Client.WebhookHandler(v))
	following := startWeather(t, u, delegate.Options{OnCredentialEvent: record(&byStream), OnElicitation: recordFlow(&flowsByStream)})
	ctx := testContext(t)
	go following.Client.Follow(ctx)
	eventually(t, 10*time.Second, "the event stream opened", func() bool { return len(following.API.calls("GET /api/v1/events")) > 0 })

	storedFor(t, u, hooked, "pia")
	pia := delegate.User{Token: u.userToken("pia")}
	st, err := hooked.Client.CredentialStatus(ctx, pia, delegate.Need{Slot: "demo_api_key"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hooked.Client.DeleteCredential(ctx, pia, delegate.Need{Slot: "demo_api_key"}, "account closed"); err != nil {
		t.Fatal(err)
	}
	types := func(heard *[]*delegate.CredentialEvent) []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for _, ev := range *heard {
			out = append(out, ev.Type)
			if ev.UserRef != st.UserRef || ev.Target != "demo_api_key" || ev.Service != "weather" {
				t.Errorf("event %+v, want pia's demo key, with the reference %s", ev, st.UserRef)
			}
		}
		return out
	}
	// The stream is in order; webhooks are sent in parallel and may arrive in any order.
	want := []string{"credential.stored", "credential.deleted"}
	eventually(t, 10*time.Second, "both changes heard by webhook and stream", func() bool {
		hooked := types(&byHook)
		return slices.Equal(types(&byStream), want) && len(hooked) == 2 && slices.Contains(hooked, want[0]) && slices.Contains(hooked, want[1])
	})
	mu.Lock()
	i := slices.IndexFunc(byHook, func(ev *delegate.CredentialEvent) bool { return ev.Type == "credential.deleted" })
	deleted, stored := byHook[i], byStream[0]
	mu.Unlock()
	if deleted.Actor != "service" || !strings.Contains(deleted.Reason, "account closed") || deleted.Credential != nil {
		t.Errorf("the deletion: %+v", deleted)
	}
	if stored.Actor != "user" || stored.Credential == nil || stored.Credential.StoredAt.IsZero() || stored.ElicitationID == "" {
		t.Errorf("the storing: %+v", stored)
	}
	completed := func(heard *[]*delegate.Elicitation) bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.ContainsFunc(*heard, func(e *delegate.Elicitation) bool {
			return e.ID == stored.ElicitationID && e.State == "complete" && e.UserRef == st.UserRef
		})
	}
	eventually(t, 10*time.Second, "the flow's completion heard by webhook and stream", func() bool {
		return completed(&flowsByHook) && completed(&flowsByStream)
	})
}
