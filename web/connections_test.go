package web

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/audit"
	"github.com/urlflow/urlflow/state/credentials"
	"github.com/urlflow/urlflow/state/flow"
)

func TestTheConnectionsPageShowsWhatEachHolderUsesAndRemovesIt(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	own := f.newFlow(t, "alice")
	b := f.browser(t, "alice")
	b.submit(own.ID, b.continueToForm(own.ID), validKey).want(t, http.StatusOK)
	f.wantState(t, own.ID, flow.Complete)
	f.storeFor(t, weather, "alice", validKey)

	f.send(t, nil, request{method: http.MethodGet, path: "/connections"}).want(t, http.StatusSeeOther)
	page := b.get("/connections")
	page.want(t, http.StatusOK, "Your connections", "urlflow's own tools", "Weather MCP", "delegating server", "verified by urlflow", "Not used yet")
	if strings.Index(page.Text(), "urlflow's own tools") > strings.Index(page.Text(), "Weather MCP") {
		t.Error("urlflow's own tools are not listed first")
	}
	if n := strings.Count(page.Body, `action="/connections/remove"`); n != 2 {
		t.Errorf("%d removal forms, want 2", n)
	}
	if strings.Contains(page.Body, validKey) {
		t.Error("the page shows the secret")
	}
	bob := f.browser(t, "bob")
	bob.signIn("/connections")
	bob.get("/connections").want(t, http.StatusOK, "urlflow holds nothing for you")

	weatherName := credentials.Name(weather, demoSlot)
	b.post("/connections/remove", url.Values{"name": {weatherName}}).want(t, http.StatusForbidden, "Nothing was changed")
	b.post("/connections/remove", url.Values{"name": {weatherName}, "csrf": {page.csrf(t)}}).
		want(t, http.StatusOK, "Your Demo API key is deleted: Weather MCP can no longer use it.")
	f.wantNoCredential(t, "alice", weatherName)
	if _, err := f.creds.Get(t.Context(), f.user("alice"), demoSlot); err != nil {
		t.Errorf("urlflow's own key went too: %v", err)
	}
	log := f.audited(t, "alice")
	if last := log[len(log)-1]; last.Event != audit.CredentialDeleted || last.Credential != weatherName || last.Reason != "removed on the connections page" {
		t.Errorf("the audit log ends with %+v", last)
	}
	b.post("/connections/remove", url.Values{"name": {weatherName}, "csrf": {page.csrf(t)}}).want(t, http.StatusOK, "Nothing was removed")
	f.asService(t, weather, http.MethodPost, "/api/v1/proxy", f.userTokenFor(t, "alice", weather),
		`{"slot": "demo_api_key", "method": "GET", "path": "/whoami"}`).want(t, http.StatusConflict, "not_stored")
}

// A connection removed on /connections is revoked at its provider where it can be, and
// the audit trail says the user removed it there (not the disconnect tool).
func TestAConnectionRemovedOnThePageIsRevokedAndAuditedAsSuch(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	p.revocable = true
	f := newFixture(t, fixtureOptions{provider: p})
	f.connectFor(t, weather, "alice")
	b := f.browser(t, "alice")
	b.signIn("/connections")
	page := b.get("/connections")
	name := credentials.Name(weather, "acme")
	b.post("/connections/remove", url.Values{"name": {name}, "csrf": {page.csrf(t)}}).want(t, http.StatusOK, "Weather MCP")
	f.wantNoCredential(t, "alice", name)
	if len(p.revokedTokens()) != 1 {
		t.Errorf("revoked %d tokens at Acme, want the connection's", len(p.revokedTokens()))
	}
	log := f.audited(t, "alice")
	if last := log[len(log)-1]; last.Event != audit.CredentialDeleted || last.Credential != name ||
		last.Actor != state.ActorUser || last.Reason != "removed on the connections page" {
		t.Errorf("the audit log ends with %+v", last)
	}
}
