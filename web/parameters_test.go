package web

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/urlflow/urlflow/state/credentials"
	"github.com/urlflow/urlflow/state/flow"
)

const createWorkspaceKey = `{"slot": "demo_workspace_key", "message": "Weather needs your workspace key."}`

// postSecret posts the secret form of elicitation id with the workspace entered.
func (b *testBrowser) postSecret(id string, form answer, workspace, secret string) answer {
	b.t.Helper()
	return b.post("/e/"+id+"/secret", url.Values{"csrf": {form.csrf(b.t)}, "param.workspace": {workspace}, "secret": {secret}})
}

// A slot whose API's address holds a parameter: the user enters it with the secret, it is
// checked, used for the verification, stored with the secret, used by the proxy and told
// to the service; a secret stored without it is entered again.
func TestTheUserEntersTheAddressPartsOfTheirAPIWithTheSecret(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	alice := f.userTokenFor(t, "alice", weather)
	v := created(t, f.asService(t, weather, http.MethodPost, "/api/v1/elicitations", alice, createWorkspaceKey), http.StatusCreated)
	b := f.browser(t, "alice")
	form := b.continueToForm(v.ID)
	form.want(t, http.StatusOK, "Demo workspace", "/demo/api/workspaces/{workspace}", "3 to 30 lower-case letters")
	if value, ok := form.field("param.workspace"); !ok || value != "" {
		t.Fatalf("the workspace field: %q %v, want an empty field", value, ok)
	}

	// A value that breaks the rules is refused with the rule; the value is shown again.
	got := b.postSecret(v.ID, form, "Not A Workspace", validKey)
	got.want(t, http.StatusUnprocessableEntity, "Your Demo workspace must be one part of a path")
	if value, _ := got.field("param.workspace"); value != "Not A Workspace" {
		t.Errorf("the workspace field holds %q after the refusal, want what was entered", value)
	}
	got = b.postSecret(v.ID, got, "ab", validKey)
	got.want(t, http.StatusUnprocessableEntity, "That is not a valid Demo workspace. 3 to 30")
	// The secret in the workspace's field: refused, and never shown again.
	got = b.postSecret(v.ID, got, validKey, "")
	got.want(t, http.StatusUnprocessableEntity, "That looks like your Demo workspace key")
	if strings.Contains(got.Body, validKey) {
		t.Error("the page shows the secret entered as the workspace")
	}
	f.wantState(t, v.ID, flow.InProgress)

	// A workspace the API does not know: the verification, made at its address, fails.
	got = b.postSecret(v.ID, got, "missing-acme", validKey)
	got.want(t, http.StatusUnprocessableEntity, "404")
	f.wantState(t, v.ID, flow.Failed)
	form = b.get("/e/" + v.ID + "/secret")
	b.postSecret(v.ID, form, "acme", validKey).want(t, http.StatusOK)
	f.wantState(t, v.ID, flow.Complete)
	name := credentials.Name(weather, workspaceSlot)
	if cred, _ := f.storedSecret(t, "alice", name); cred.Parameters["workspace"] != "acme" || len(cred.Parameters) != 1 {
		t.Errorf("stored parameters %v, want the workspace", cred.Parameters)
	}
	for _, e := range f.history(t, v.ID) {
		if strings.Contains(e.Reason, validKey) || strings.Contains(e.Reason, "Not A Workspace") {
			t.Errorf("the history quotes what was entered: %q", e.Reason)
		}
	}

	b.get("/connections").want(t, http.StatusOK, "Used with", "/demo/api/workspaces/acme")

	// The proxy calls the address of the user's workspace; the status names it.
	resp := proxied(t, f.asService(t, weather, http.MethodPost, "/api/v1/proxy", alice,
		`{"slot": "demo_workspace_key", "method": "GET", "path": "/whoami"}`))
	if !strings.Contains(resp.Body, `"workspace":"acme"`) {
		t.Errorf("the proxy reached %s, want the workspace acme", resp.Body)
	}
	f.asService(t, weather, http.MethodPost, "/api/v1/credentials/status", alice, `{"slot": "demo_workspace_key"}`).
		want(t, http.StatusOK, `"status":"stored"`, `"parameters":{"workspace":"acme"}`)

	// Asked again (replace), the form starts with the workspace stored.
	again := created(t, f.asService(t, weather, http.MethodPost, "/api/v1/elicitations", alice,
		`{"slot": "demo_workspace_key", "replace": true}`), http.StatusCreated)
	if value, _ := b.continueToForm(again.ID).field("param.workspace"); value != "acme" {
		t.Errorf("the form of a replacement starts with %q, want the workspace stored", value)
	}
	f.asService(t, weather, http.MethodPost, "/api/v1/elicitations/"+again.ID+"/cancel", alice, `{}`).want(t, http.StatusOK)

	// Stored before the slot's address took the workspace: unusable until entered again.
	cred, _ := f.storedSecret(t, "alice", name)
	if err := f.creds.Update(t.Context(), f.user("alice"), cred, func(c *credentials.Credential) { c.Parameters = nil }); err != nil {
		t.Fatal(err)
	}
	f.asService(t, weather, http.MethodPost, "/api/v1/proxy", alice, `{"slot": "demo_workspace_key", "method": "GET", "path": "/whoami"}`).
		want(t, http.StatusConflict, `"reason":"incomplete"`, "no Demo workspace was entered")
	f.asService(t, weather, http.MethodPost, "/api/v1/credentials/status", alice, `{"slot": "demo_workspace_key"}`).
		want(t, http.StatusOK, `"status":"incomplete"`)
	b.get("/connections").want(t, http.StatusOK, "Its address now takes parts you did not enter with it")
	f.asService(t, weather, http.MethodGet, "/api/v1/credentials?status=incomplete", "", "").
		want(t, http.StatusOK, `"target":"demo_workspace_key"`)
	created(t, f.asService(t, weather, http.MethodPost, "/api/v1/elicitations", alice, createWorkspaceKey), http.StatusCreated)
}
