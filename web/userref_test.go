package web

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/urlflow/urlflow/state/flow"
	"github.com/urlflow/urlflow/state/webhooks"
	"github.com/urlflow/urlflow/userref"
	"github.com/urlflow/urlflow/web/api"
)

// A service knows each user by its own reference: the same in every answer, event and
// webhook of that service, and another at every other service.
func TestAServiceKnowsEachUserByOneReferenceOfItsOwn(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	events := f.followEvents(t, keyholder, "")
	alice := f.userTokenFor(t, "alice", keyholder)
	want := f.userRefs.Of(keyholder, f.user("alice"))
	if !userref.Valid(want) {
		t.Fatalf("the reference %q is not of the documented form", want)
	}
	distinct := map[string]string{
		"alice at weather": f.userRefs.Of(weather, f.user("alice")),
		"bob at keyholder": f.userRefs.Of(keyholder, f.user("bob")),
	}
	for who, ref := range distinct {
		if ref == want {
			t.Errorf("%s has alice's reference at keyholder", who)
		}
	}

	var ans api.CreateAnswer
	got := f.asService(t, keyholder, http.MethodPost, "/api/v1/elicitations", alice, createDemoKey)
	got.decode(t, &ans)
	if got.Status != http.StatusCreated || ans.UserRef != want || ans.Elicitation == nil || ans.Elicitation.UserRef != want {
		t.Fatalf("create answered %d %s, want alice's reference %s at the top and in the elicitation", got.Status, got.Body, want)
	}
	id := ans.Elicitation.ID
	if _, c := events.nextChange(); c.Elicitation.UserRef != want {
		t.Errorf("the creation event names %q, want %q", c.Elicitation.UserRef, want)
	}
	var v flow.View
	f.asService(t, keyholder, http.MethodGet, "/api/v1/elicitations/"+id, "", "").decode(t, &v)
	if v.UserRef != want {
		t.Errorf("the status names %q, want %q", v.UserRef, want)
	}
	var page flow.Listing
	f.asService(t, keyholder, http.MethodGet, "/api/v1/elicitations", "", "").decode(t, &page)
	if len(page.Elicitations) != 1 || page.Elicitations[0].UserRef != want {
		t.Errorf("the listing: %+v, want alice's flow with %q", page.Elicitations, want)
	}
	var own flow.View
	f.api(t, http.MethodGet, "/api/v1/elicitations/"+f.newFlow(t, "alice").ID, f.token(t, "alice"), "").decode(t, &own)
	if own.UserRef != "" {
		t.Errorf("urlflow's own flow names a reference %q", own.UserRef)
	}

	// Once stored: the stored answer, the webhook of the flow's end, the credentials
	// requests and release.
	b := f.browser(t, "alice")
	b.submit(id, b.continueToForm(id), validKey).want(t, http.StatusOK)
	f.wantState(t, id, flow.Complete)
	d, body, ok, err := f.webhookQueue(t).Claim(t.Context(), id, time.Now().Add(time.Hour), time.Minute)
	if err != nil || !ok {
		t.Fatalf("the webhook of the completion: %v %v", ok, err)
	}
	var msg webhooks.Message
	if err := json.Unmarshal(body, &msg); err != nil || d.Type != "elicitation.complete" || msg.Data.Elicitation.UserRef != want {
		t.Errorf("the webhook %s (%v), want alice's reference %s", body, err, want)
	}
	got = f.asService(t, keyholder, http.MethodPost, "/api/v1/elicitations", alice, createDemoKey)
	ans = api.CreateAnswer{}
	got.decode(t, &ans)
	if ans.Status != api.StatusStored || ans.UserRef != want {
		t.Errorf("the stored answer %s, want alice's reference", got.Body)
	}
	if st := f.credentialStatus(t, keyholder, alice, `{"slot": "demo_api_key"}`); st.UserRef != want {
		t.Errorf("the status of the credential names %q, want %q", st.UserRef, want)
	}
	var released api.ReleaseAnswer
	f.asService(t, keyholder, http.MethodPost, "/api/v1/release", alice, `{"slot": "demo_api_key"}`).decode(t, &released)
	if released.UserRef != want {
		t.Errorf("release names %q, want %q", released.UserRef, want)
	}
	if del := f.deletion(t, keyholder, alice, `{"slot": "demo_api_key"}`); del.UserRef != want {
		t.Errorf("the deletion names %q, want %q", del.UserRef, want)
	}
	var all api.DeletedAll
	f.asService(t, keyholder, http.MethodPost, deleteAllPath, alice, `{}`).decode(t, &all)
	if all.UserRef != want {
		t.Errorf("delete-all names %q, want %q", all.UserRef, want)
	}
}
