package web

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/urlflow/urlflow/state/webhooks"
)

// givenUpWebhook ends a new flow of keyholder for alice and records its one attempt as the
// last, failed: its delivery is given up. It returns the elicitation's ID.
func (f *fixture) givenUpWebhook(t *testing.T, q *webhooks.Queue) string {
	t.Helper()
	v := created(t, f.asService(t, keyholder, http.MethodPost, "/api/v1/elicitations", f.userTokenFor(t, "alice", keyholder), createDemoKey), http.StatusCreated)
	f.asService(t, keyholder, http.MethodPost, "/api/v1/elicitations/"+v.ID+"/cancel", "", "").want(t, http.StatusOK)
	d, body, ok, err := q.Claim(t.Context(), v.ID, f.clock.Now().Add(time.Hour), time.Minute)
	if err != nil || !ok {
		t.Fatalf("claim: %v, %v", ok, err)
	}
	if err := q.Record(t.Context(), d, body, f.clock.Now(), http.StatusServiceUnavailable, errors.New("the receiver answered 503"), time.Time{}); err != nil {
		t.Fatal(err)
	}
	return v.ID
}

func (f *fixture) webhookQueue(t *testing.T) *webhooks.Queue {
	return webhooks.New(f.redis.Client(t), f.services.WebhookWants, f.userRefs)
}

func TestAServiceListsItsGivenUpWebhooksNewestFirstAndOperatorsNameTheService(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	q := f.webhookQueue(t)
	first := f.givenUpWebhook(t, q)
	f.clock.Advance(time.Second)
	second := f.givenUpWebhook(t, q)

	var page webhooks.GivenUpPage
	got := f.asService(t, keyholder, http.MethodGet, "/api/v1/webhooks/given-up?limit=1", "", "")
	got.decode(t, &page)
	if got.Status != http.StatusOK || len(page.Deliveries) != 1 || page.Deliveries[0].ElicitationID != second || page.Next == "" ||
		page.Deliveries[0].GivenUpAt == nil || page.Deliveries[0].LastStatus != http.StatusServiceUnavailable {
		t.Fatalf("first page: %d %s", got.Status, got.Body)
	}
	got = f.asService(t, keyholder, http.MethodGet, "/api/v1/webhooks/given-up?limit=1&cursor="+page.Next, "", "")
	page = webhooks.GivenUpPage{}
	got.decode(t, &page)
	if len(page.Deliveries) != 1 || page.Deliveries[0].ElicitationID != first {
		t.Errorf("second page: %d %s", got.Status, got.Body)
	}
	f.asService(t, keyholder, http.MethodGet, "/api/v1/webhooks/given-up?cursor=nope", "", "").want(t, http.StatusBadRequest, "cursor")
	f.asService(t, keyholder, http.MethodGet, "/api/v1/webhooks/given-up?limit=0", "", "").want(t, http.StatusBadRequest, "limit")

	// Another service sees only its own; users none; operators name the service.
	f.asService(t, weather, http.MethodGet, "/api/v1/webhooks/given-up", "", "").want(t, http.StatusOK, `"deliveries":[]`)
	f.asService(t, weather, http.MethodGet, "/api/v1/webhooks/given-up?service="+keyholder, "", "").want(t, http.StatusForbidden)
	f.api(t, http.MethodGet, "/api/v1/webhooks/given-up", f.token(t, "alice"), "").want(t, http.StatusForbidden)
	f.api(t, http.MethodGet, "/api/v1/webhooks/given-up", f.operatorToken, "").want(t, http.StatusBadRequest, "service")
	f.api(t, http.MethodGet, "/api/v1/webhooks/given-up?service=nobody", f.readOnlyToken, "").want(t, http.StatusBadRequest, "nobody")
	f.api(t, http.MethodGet, "/api/v1/webhooks/given-up?service="+keyholder, f.readOnlyToken, "").want(t, http.StatusOK, first, second)
}

func TestAServiceHasItsGivenUpWebhookSentAgainOnceWhileNoAttemptIsDue(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	q := f.webhookQueue(t)
	id := f.givenUpWebhook(t, q)
	path := "/api/v1/elicitations/" + id + "/webhook/redeliver"

	// Another service's flow, a user's and a read-only operator's token change nothing.
	f.asService(t, weather, http.MethodPost, path, "", "").want(t, http.StatusNotFound, `"unknown"`)
	f.api(t, http.MethodPost, path, f.token(t, "alice"), "").want(t, http.StatusNotFound, `"unknown"`)
	f.api(t, http.MethodPost, path, f.readOnlyToken, `{"reason": "lost"}`).want(t, http.StatusForbidden, "read-write")
	f.api(t, http.MethodPost, path, f.operatorToken, "").want(t, http.StatusBadRequest, "reason")
	if d, _ := q.Delivery(t.Context(), id); d.GivenUpAt == nil || d.Redeliveries != 0 {
		t.Fatalf("changed by a refusal: %+v", d)
	}

	got := f.asService(t, keyholder, http.MethodPost, path, "", "")
	var d webhooks.Delivery
	got.decode(t, &d)
	if got.Status != http.StatusAccepted || d.ID != webhooks.ID(id) || d.Redeliveries != 1 || d.NextAttemptAt == nil ||
		d.GivenUpAt != nil || d.Attempts != 1 {
		t.Fatalf("redelivered: %d %s", got.Status, got.Body)
	}
	if due, err := q.Due(t.Context(), f.clock.Now().Add(time.Second), 10); err != nil || len(due) != 1 || due[0] != id {
		t.Errorf("due: %v, %v", due, err)
	}
	f.asService(t, keyholder, http.MethodGet, "/api/v1/webhooks/given-up", "", "").want(t, http.StatusOK, `"deliveries":[]`)
	// Pending: a second request changes nothing.
	f.asService(t, keyholder, http.MethodPost, path, "", "").want(t, http.StatusConflict, "due", `"redeliveries":1`)
	f.api(t, http.MethodPost, path, f.operatorToken, `{"reason": "the receiver lost it"}`).want(t, http.StatusConflict)

	// An elicitation without a delivery (still running) has none to send again.
	v := created(t, f.asService(t, keyholder, http.MethodPost, "/api/v1/elicitations", f.userTokenFor(t, "bob", keyholder), createDemoKey), http.StatusCreated)
	f.asService(t, keyholder, http.MethodPost, "/api/v1/elicitations/"+v.ID+"/webhook/redeliver", "", "").want(t, http.StatusNotFound, "no webhook")
	if !f.logged("webhook redelivery queued") {
		t.Errorf("the redelivery is not logged")
	}
}

func TestAnOperatorHasAnyServicesWebhookSentAgainWithAReason(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	q := f.webhookQueue(t)
	id := f.givenUpWebhook(t, q)
	got := f.api(t, http.MethodPost, "/api/v1/elicitations/"+id+"/webhook/redeliver", f.operatorToken, `{"reason": "the receiver lost it"}`)
	got.want(t, http.StatusAccepted, webhooks.ID(id), `"redeliveries":1`)
	if !f.logged("the receiver lost it") {
		t.Errorf("the operator's reason is not logged")
	}
}

// logged reports whether the server's log holds text.
func (f *fixture) logged(text string) bool { return strings.Contains(f.logs.String(), text) }

// A credential's message, which belongs to no elicitation, is listed when given up and
// sent again by its webhook-id; the redelivery is audited.
func TestAGivenUpCredentialMessageIsSentAgainByItsWebhookID(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	q := f.webhookQueue(t)
	alice := f.userTokenFor(t, "alice", keyholder)
	f.storeFor(t, keyholder, "alice", validKey)
	f.asService(t, keyholder, http.MethodPost, deletePath, alice, `{"slot": "demo_api_key"}`).want(t, http.StatusOK)
	later := f.clock.Now().Add(time.Hour)
	keys, err := q.Due(t.Context(), later, 100)
	if err != nil {
		t.Fatal(err)
	}
	var deleted *webhooks.Delivery
	for _, key := range keys {
		d, body, ok, err := q.Claim(t.Context(), key, later, time.Minute)
		if err != nil || !ok {
			t.Fatalf("claim %s: %v %v", key, ok, err)
		}
		if err := q.Record(t.Context(), d, body, f.clock.Now(), http.StatusServiceUnavailable, errors.New("the receiver answered 503"), time.Time{}); err != nil {
			t.Fatal(err)
		}
		if d.Type == "credential.deleted" {
			deleted = d
		}
	}
	if deleted == nil {
		t.Fatalf("no credential.deleted message among %v", keys)
	}
	f.asService(t, keyholder, http.MethodGet, "/api/v1/webhooks/given-up", "", "").want(t, http.StatusOK, deleted.ID, `"eventId":"`+deleted.EventID)

	path := "/api/v1/webhooks/" + deleted.ID + "/redeliver"
	f.asService(t, weather, http.MethodPost, path, "", "").want(t, http.StatusNotFound, "no webhook message")
	f.asService(t, keyholder, http.MethodPost, "/api/v1/webhooks/cev_nope/redeliver", "", "").want(t, http.StatusBadRequest, "messageId")
	f.asService(t, keyholder, http.MethodPost, "/api/v1/webhooks/msg_cev_AAAAAAAAAAAAAAAAAAAAAAAAAA/redeliver", "", "").want(t, http.StatusNotFound)
	f.api(t, http.MethodPost, path, f.token(t, "alice"), "").want(t, http.StatusForbidden)
	f.api(t, http.MethodPost, path, f.readOnlyToken, `{"reason": "lost"}`).want(t, http.StatusForbidden, "read-write")

	got := f.asService(t, keyholder, http.MethodPost, path, "", `{"reason": "our queue was lost"}`)
	var d webhooks.Delivery
	got.decode(t, &d)
	if got.Status != http.StatusAccepted || d.ID != deleted.ID || d.Redeliveries != 1 || d.NextAttemptAt == nil || d.GivenUpAt != nil {
		t.Fatalf("redeliver: %d %s", got.Status, got.Body)
	}
	f.asService(t, keyholder, http.MethodPost, path, "", "").want(t, http.StatusConflict, "an attempt of this webhook is due")
	all, err := f.trail.Read(t.Context(), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	var audited bool
	for _, e := range all {
		audited = audited || (e.Event == "webhook_redelivered" && e.Cause == deleted.ID && e.Service == keyholder &&
			e.Reason == "our queue was lost" && string(e.Actor) == "service")
	}
	if !audited {
		t.Error("the redelivery is not in the audit trail")
	}
	if strings.Contains(got.Body, validKey) {
		t.Fatal("the record carries the secret")
	}
}
