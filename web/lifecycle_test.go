package web

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/credentials"
	"github.com/urlflow/urlflow/state/flow"
	"github.com/urlflow/urlflow/state/webhooks"
)

// The lifecycle of a service's credentials: each change reaches the service's event stream
// and its webhook, with the user's reference, the actor and the reason; urlflow's own
// credentials and other services' reach nobody.

// nextCredentialEvent returns the next credential event of s, past the elicitation events
// before it.
func (s *eventStream) nextCredentialEvent() credentials.Event {
	s.t.Helper()
	for {
		e := s.next()
		if e.event == "elicitation" {
			continue
		}
		var ev credentials.Event
		if e.event != "credential" {
			s.t.Fatalf("event %q %s, want a credential's", e.event, e.data)
		}
		if err := json.Unmarshal([]byte(e.data), &ev); err != nil {
			s.t.Fatal(err)
		}
		return ev
	}
}

// credentialWebhooks claims every webhook of a credential's change that is due, and returns
// their bodies.
func (f *fixture) credentialWebhooks(t *testing.T) []webhooks.CredentialMessage {
	t.Helper()
	q := f.webhookQueue(t)
	later := time.Now().Add(time.Hour)
	keys, err := q.Due(t.Context(), later, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []webhooks.CredentialMessage
	for _, key := range keys {
		d, body, ok, err := q.Claim(t.Context(), key, later, time.Hour)
		if err != nil || !ok {
			t.Fatalf("claim %s: %v %v", key, ok, err)
		}
		if d.EventID == "" {
			continue // an elicitation's
		}
		var msg webhooks.CredentialMessage
		if err := json.Unmarshal(body, &msg); err != nil || d.ID != webhooks.ID(d.EventID) || d.Type != msg.Type || !webhooks.ValidKey(d.EventID) {
			t.Fatalf("the delivery %+v of %s (%v)", d, body, err)
		}
		out = append(out, msg)
	}
	return out
}

func TestAServiceHearsOfEveryChangeOfTheCredentialsItHolds(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	events := f.followEvents(t, keyholder, "")
	others := f.followEvents(t, weather, "")
	alice := f.userTokenFor(t, "alice", keyholder)
	ref := f.userRefs.Of(keyholder, f.user("alice"))
	name := credentials.Name(keyholder, demoSlot)
	type want struct {
		typ    string
		actor  state.Actor
		reason string
	}
	check := func(ev credentials.Event, w want) {
		t.Helper()
		if ev.Type != w.typ || ev.Service != keyholder || ev.Kind != state.KindSecret || ev.Target != demoSlot || ev.UserRef != ref ||
			ev.Actor != w.actor || (w.reason != "" && ev.Reason != w.reason) || ev.At.IsZero() {
			t.Errorf("event %+v, want %+v of alice's %s at keyholder", ev, w, demoSlot)
		}
		if (ev.Credential == nil) != (w.typ == "credential.deleted") {
			t.Errorf("%s describes the credential: %+v", w.typ, ev.Credential)
		}
	}

	f.storeFor(t, keyholder, "alice", validKey)
	stored := events.nextCredentialEvent()
	check(stored, want{"credential.stored", state.ActorUser, ""})
	if stored.ElicitationID == "" || stored.Credential.StoredAt.IsZero() {
		t.Errorf("the stored event %+v names no flow or time", stored)
	}
	f.asService(t, keyholder, http.MethodPost, "/api/v1/release", alice, `{"slot": "demo_api_key"}`).want(t, http.StatusOK)
	check(events.nextCredentialEvent(), want{"credential.released", state.ActorService, "released to the service keyholder"})

	again := created(t, f.asService(t, keyholder, http.MethodPost, "/api/v1/elicitations", alice,
		`{"slot": "demo_api_key", "replace": true}`), http.StatusCreated)
	b := f.browser(t, "alice")
	b.submit(again.ID, b.continueToForm(again.ID), validKey).want(t, http.StatusOK)
	f.wantState(t, again.ID, flow.Complete)
	replaced := events.nextCredentialEvent()
	check(replaced, want{"credential.replaced", state.ActorUser, ""})
	if replaced.ElicitationID != again.ID {
		t.Errorf("replaced by %s, want %s", replaced.ElicitationID, again.ID)
	}

	f.asService(t, keyholder, http.MethodPost, "/api/v1/proxy", alice,
		`{"slot": "demo_api_key", "method": "POST", "path": "/echo", "body": "is `+validKey+` right?"}`).want(t, http.StatusUnprocessableEntity)
	locked := events.nextCredentialEvent()
	check(locked, want{"credential.locked", state.ActorService, ""})
	if locked.Credential.LockedAt == nil || locked.Reason == "" || locked.Reason != locked.Credential.LockReason {
		t.Errorf("the locked event %+v says not when or why", locked)
	}

	page := b.get("/connections")
	b.post("/connections/remove", url.Values{"name": {name}, "csrf": {page.csrf(t)}}).want(t, http.StatusOK)
	check(events.nextCredentialEvent(), want{"credential.deleted", state.ActorUser, "removed on the connections page"})

	f.storeFor(t, keyholder, "alice", validKey)
	check(events.nextCredentialEvent(), want{"credential.stored", state.ActorUser, ""})
	f.asService(t, keyholder, http.MethodPost, deletePath, alice, `{"slot": "demo_api_key", "reason": "account closed"}`).want(t, http.StatusOK)
	check(events.nextCredentialEvent(), want{"credential.deleted", state.ActorService, "deleted by the service keyholder: account closed"})

	// The same changes went to keyholder's webhook (which has no order to keep: they are
	// compared sorted).
	var got []string
	for _, msg := range f.credentialWebhooks(t) {
		if msg.Data.UserRef != ref || msg.Data.Type != msg.Type {
			t.Errorf("webhook %+v, want alice's reference", msg)
		}
		got = append(got, msg.Type)
	}
	wantTypes := []string{"credential.stored", "credential.released", "credential.replaced", "credential.locked",
		"credential.deleted", "credential.stored", "credential.deleted"}
	slices.Sort(got)
	slices.Sort(wantTypes)
	if !slices.Equal(got, wantTypes) {
		t.Errorf("webhooks %v, want %v", got, wantTypes)
	}

	// urlflow's own credentials, and weather's (which has no webhook), reach only weather's stream.
	f.storeOwn(t, "alice")
	f.storeFor(t, weather, "alice", validKey)
	if ev := others.nextCredentialEvent(); ev.Service != weather || ev.Type != "credential.stored" {
		t.Errorf("weather heard %+v", ev)
	}
	events.quiet(300 * time.Millisecond)
	if late := f.credentialWebhooks(t); len(late) != 0 {
		t.Errorf("webhooks of others' credentials: %+v", late)
	}
}

// A service's call and metadata, from its create request, follow the flow and the
// credential it stores into every answer, event and webhook of the service, and its
// operators'; never into the user's view. Bad metadata is refused and creates nothing.
func TestAServicesCallAndMetadataFollowItsFlowAndCredential(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	events := f.followEvents(t, keyholder, "")
	alice := f.userTokenFor(t, "alice", keyholder)
	for body, want := range map[string]string{
		`{"slot": "demo_api_key", "metadata": {"a b": "x"}}`:  `metadata: key \"a b\"`,
		`{"slot": "demo_api_key", "metadata": {"k": "a\nb"}}`: "control character",
		`{"slot": "demo_api_key", "metadata": {"k": 1}}`:      "metadata",
		`{"slot": "demo_api_key", "metadata": ["not a map"]}`: "metadata",
	} {
		f.asService(t, keyholder, http.MethodPost, "/api/v1/elicitations", alice, body).want(t, http.StatusBadRequest, want)
	}
	events.quiet(200 * time.Millisecond) // nothing was created

	meta := state.Metadata{"account": "acct_42", "team": "blue"}
	v := created(t, f.asService(t, keyholder, http.MethodPost, "/api/v1/elicitations", alice,
		`{"slot": "demo_api_key", "call": "forecast:1f3e", "metadata": {"account": "acct_42", "team": "blue"}}`), http.StatusCreated)
	if v.Call != "forecast:1f3e" || !maps.Equal(v.Metadata, meta) {
		t.Errorf("the create answer's elicitation: %+v", v)
	}
	if _, c := events.nextChange(); c.Elicitation.Call != "forecast:1f3e" || !maps.Equal(c.Elicitation.Metadata, meta) {
		t.Errorf("the creation event: %+v", c.Elicitation)
	}
	var mine, op flow.View
	f.api(t, http.MethodGet, "/api/v1/elicitations/"+v.ID, f.token(t, "alice"), "").decode(t, &mine)
	if mine.ID != v.ID || mine.Call != "" || mine.Metadata != nil {
		t.Errorf("the user sees %+v, want the flow without the service's call and metadata", mine)
	}
	f.api(t, http.MethodGet, "/api/v1/elicitations/"+v.ID, f.operatorToken, "").decode(t, &op)
	if !maps.Equal(op.Metadata, meta) {
		t.Errorf("the operator sees %+v", op)
	}

	b := f.browser(t, "alice")
	b.submit(v.ID, b.continueToForm(v.ID), validKey).want(t, http.StatusOK)
	f.wantState(t, v.ID, flow.Complete)
	if stored := events.nextCredentialEvent(); stored.Call != "forecast:1f3e" || !maps.Equal(stored.Metadata, meta) {
		t.Errorf("the stored event: %+v", stored)
	}
	if st := f.credentialStatus(t, keyholder, alice, `{"slot": "demo_api_key"}`); !maps.Equal(st.Metadata, meta) {
		t.Errorf("the status: %+v", st)
	}
	f.asService(t, keyholder, http.MethodPost, deletePath, alice, `{"slot": "demo_api_key"}`).want(t, http.StatusOK)
	if deleted := events.nextCredentialEvent(); !maps.Equal(deleted.Metadata, meta) {
		t.Errorf("the deletion event: %+v", deleted)
	}
	for _, msg := range f.credentialWebhooks(t) {
		if !maps.Equal(msg.Data.Metadata, meta) || msg.Data.Call != "forecast:1f3e" {
			t.Errorf("the webhook %+v", msg)
		}
	}
}
