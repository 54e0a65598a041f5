package delegate_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/urlflow/urlflow/delegate"
)

// GivenUpWebhooks and RedeliverWebhook against urlflow, whose webhook retries come every
// 300 ms here: a message given up while the receiver was down is listed, and once the
// receiver is back, sent again with the same webhook-id, signed anew.
func TestAServerListsItsGivenUpWebhooksAndHasOneSentAgain(t *testing.T) {
	t.Parallel()
	u := startUrlflow(t)
	w := startWeather(t, u, delegate.Options{Style: delegate.StyleError})
	ctx := testContext(t)
	u.Hooks.serve(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }))
	rita := w.connect(t, clientOptions{Token: u.userToken("rita"), URLMode: true})
	_, err := rita.call("forecast", forecast)
	id := urlElicitationRequired(t, err).ElicitationID
	cancel, err := http.NewRequestWithContext(ctx, http.MethodPost, u.URL+"/api/v1/elicitations/"+id+"/cancel", nil)
	if err != nil {
		t.Fatal(err)
	}
	cancel.Header.Set("Authorization", "Bearer "+u.Key)
	if resp, err := testClient.Do(cancel); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("cancel: %v, %v", resp, err)
	}

	var page *delegate.GivenUpWebhooks
	for deadline := time.Now().Add(20 * time.Second); page == nil || len(page.Deliveries) == 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not given up within 20s: %+v", page)
		}
		if page, err = w.Client.GivenUpWebhooks(ctx, "", 10); err != nil {
			t.Fatal(err)
		}
	}
	if d := page.Deliveries[0]; d.ElicitationID != id || d.ID != "msg_"+id || d.GivenUpAt.IsZero() || d.LastStatus != http.StatusServiceUnavailable {
		t.Fatalf("given up: %+v", d)
	}

	u.Hooks.serve(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	before := len(u.Hooks.received())
	d, err := w.Client.RedeliverWebhook(ctx, id)
	if err != nil || d.Redeliveries != 1 || d.NextAttemptAt.IsZero() {
		t.Fatalf("redeliver: %+v, %v", d, err)
	}
	var got []receivedHook
	for deadline := time.Now().Add(10 * time.Second); len(got) <= before || got[len(got)-1].Status != http.StatusNoContent; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("not sent again within 10s")
		}
		got = u.Hooks.received()
	}
	v, err := delegate.NewWebhookVerifier(webhookSecret)
	if err != nil {
		t.Fatal(err)
	}
	last := got[len(got)-1]
	if hook, err := v.Verify(last.Header, last.Body); err != nil || hook.ID != "msg_"+id || string(last.Body) != string(got[0].Body) {
		t.Errorf("sent again: %+v, %v", hook, err)
	}
	if page, err := w.Client.GivenUpWebhooks(ctx, "", 0); err != nil || len(page.Deliveries) != 0 {
		t.Errorf("still given up: %+v, %v", page, err)
	}
	var apiErr *delegate.APIError
	if _, err := w.Client.RedeliverWebhook(ctx, "NOTANID"); !errors.As(err, &apiErr) || apiErr.Status != http.StatusNotFound {
		t.Errorf("an unknown elicitation: %v", err)
	}
}
