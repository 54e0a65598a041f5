package web

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/urlflow/urlflow/state/audit"
	"github.com/urlflow/urlflow/state/credentials"
	"github.com/urlflow/urlflow/state/flow"
	"github.com/urlflow/urlflow/web/api"
)

// Offline use with consent: a service that asked for it on the consent page may use the
// credential by the user's reference alone, until the user withdraws that on
// /connections; a credential provided without it never can be.
func TestAServiceUsesACredentialWhileTheUserIsAwayOnlyAsTheUserAllowed(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	events := f.followEvents(t, keyholder, "")
	alice := f.userTokenFor(t, "alice", keyholder)
	ref := f.userRefs.Of(keyholder, f.user("alice"))
	byRef := `{"slot": "demo_api_key", "userRef": "` + ref + `"}`
	proxyByRef := `{"slot": "demo_api_key", "userRef": "` + ref + `", "method": "GET", "path": "/whoami"}`

	// Provided without it: the reference alone reaches nothing.
	f.storeFor(t, keyholder, "alice", validKey)
	f.asService(t, keyholder, http.MethodPost, "/api/v1/proxy", "", proxyByRef).want(t, http.StatusForbidden, `"reason":"not_offline"`)
	f.asService(t, keyholder, http.MethodPost, "/api/v1/release", "", byRef).want(t, http.StatusForbidden, "not_offline")
	f.asService(t, keyholder, http.MethodPost, statusPath, "", byRef).want(t, http.StatusForbidden, "not_offline")

	// Asked with offline: the stored credential lacks the grant, so the user is asked again,
	// on a page that says so.
	v := created(t, f.asService(t, keyholder, http.MethodPost, "/api/v1/elicitations", alice, `{"slot": "demo_api_key", "offline": true}`), http.StatusCreated)
	if !v.Offline {
		t.Errorf("the flow does not say offline: %+v", v)
	}
	b := f.browser(t, "alice")
	b.open(v.ID).want(t, http.StatusOK, "It asks to use it while you are away")
	b.submit(v.ID, b.continueToForm(v.ID), validKey).want(t, http.StatusOK)
	f.wantState(t, v.ID, flow.Complete)

	if st := f.credentialStatus(t, keyholder, "", byRef); st.Status != api.CredentialStored || !st.Offline || st.UserRef != ref {
		t.Errorf("the status by reference: %+v", st)
	}
	proxied(t, f.asService(t, keyholder, http.MethodPost, "/api/v1/proxy", "", proxyByRef))
	f.asService(t, keyholder, http.MethodPost, "/api/v1/release", "", byRef).want(t, http.StatusOK, validKey)
	for body, want := range map[string]string{
		`{"slot": "demo_api_key", "userRef": "usr_nope"}`:                                        "not a user reference",
		`{"slot": "demo_api_key", "userRef": "` + f.userRefs.Of(keyholder, f.user("bob")) + `"}`: "not_offline",
		`{"slot": "demo_api_key", "userRef": "` + ref + `", "user": "alice"}`:                    "one way",
	} {
		got := f.asService(t, keyholder, http.MethodPost, statusPath, "", body)
		if got.Status != http.StatusBadRequest && got.Status != http.StatusForbidden {
			t.Errorf("%s: %d %s", body, got.Status, got.Body)
		}
		got.want(t, got.Status, want)
	}
	f.asService(t, keyholder, http.MethodPost, statusPath, alice, byRef).want(t, http.StatusBadRequest, "one way")

	// Withdrawn on /connections: the reference alone reaches nothing again; the service hears
	// of it, and the trail keeps it.
	b.signIn("/connections")
	page := b.get("/connections")
	page.want(t, http.StatusOK, "may use it while you are away")
	name := credentials.Name(keyholder, demoSlot)
	b.post("/connections/offline/withdraw", url.Values{"name": {name}, "csrf": {page.csrf(t)}}).want(t, http.StatusOK, "used only while you use it")
	f.asService(t, keyholder, http.MethodPost, "/api/v1/proxy", "", proxyByRef).want(t, http.StatusForbidden, "not_offline")
	if st := f.credentialStatus(t, keyholder, alice, `{"slot": "demo_api_key"}`); st.Status != api.CredentialStored || st.Offline {
		t.Errorf("after the withdrawal, with the user's token: %+v", st)
	}
	for {
		ev := events.nextCredentialEvent()
		if ev.Type == "credential.offline_withdrawn" {
			if ev.Actor != "user" || ev.UserRef != ref || ev.Credential == nil || ev.Credential.Offline {
				t.Errorf("the withdrawal's event: %+v", ev)
			}
			break
		}
	}
	var audited bool
	for _, e := range f.audited(t, "alice") {
		audited = audited || (e.Event == audit.CredentialOfflineWithdrawn && e.Credential == name && e.Service == keyholder)
	}
	if !audited {
		t.Error("the withdrawal is not in the audit trail")
	}
	b.post("/connections/offline/withdraw", url.Values{"name": {name}, "csrf": {page.csrf(t)}}).want(t, http.StatusOK, "Nothing was changed")
}
