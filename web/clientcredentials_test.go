package web

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/urlflow/urlflow/services"
	"github.com/urlflow/urlflow/state/audit"
	"github.com/urlflow/urlflow/state/flow"
	"github.com/urlflow/urlflow/web/api"
)

// A service may authenticate with an OAuth client credentials token of its client at the
// deployment's issuer, and may prove its user with the user's token that the issuer
// exchanged for urlflow on its behalf (RFC 8693: act names its client).
func TestAServiceOfTheIssuerAuthenticatesAsItsClientAndProvesItsUserByExchange(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{oidc: true})
	resource := f.server.resourceURL()
	clientToken := func(client string) string {
		claims := f.issuer.AccessClaims(client, resource)
		claims["client_id"], claims["scope"] = client, services.DefaultClientScope
		return f.issuer.AccessToken(t, claims)
	}
	exchanged := func(user, actor string) string {
		claims := f.issuer.AccessClaims(user, resource)
		claims["act"] = map[string]any{"sub": actor}
		return f.issuer.AccessToken(t, claims)
	}
	create := func(bearer, userToken string) answer {
		return f.send(t, nil, request{method: http.MethodPost, path: "/api/v1/elicitations", token: bearer,
			header: http.Header{api.UserTokenHeader: {userToken}}, body: strings.NewReader(createDemoKey), contentType: "application/json"})
	}

	v := created(t, create(clientToken(weatherClient), f.userTokenFor(t, "alice", weather)), http.StatusCreated)
	if e := f.get(t, v.ID); e.Service != weather || e.User != f.user("alice") {
		t.Errorf("created %+v, want alice's for weather", e)
	}
	// The user's token exchanged for urlflow with weather as the actor proves the user too.
	again := created(t, create(clientToken(weatherClient), exchanged("alice", weatherClient)), http.StatusOK)
	if again.ID != v.ID {
		t.Errorf("the exchanged token's user got %s, want alice's running %s", again.ID, v.ID)
	}
	f.wantState(t, v.ID, flow.Pending)

	for _, tc := range []struct {
		name, bearer, userToken, says string
	}{
		{"a client that is no service", clientToken("stranger-client"), f.userTokenFor(t, "alice", weather), "names no user"},
		{"a token exchanged for another actor", clientToken(weatherClient), exchanged("alice", "calendar-client"), "wrong audience"},
		{"a client's own token as the user's", clientToken(weatherClient), clientToken(weatherClient), "wrong audience"},
		{"an exchanged token as authentication", exchanged("alice", weatherClient), f.userTokenFor(t, "alice", weather), "exchanged for another party"},
	} {
		create(tc.bearer, tc.userToken).want(t, http.StatusUnauthorized, tc.says)
	}
	// The client's token is weather at the API, and nobody at /mcp; the exchanged token is
	// neither alice nor weather anywhere but in the user token header.
	f.api(t, http.MethodGet, "/api/v1/elicitations/"+v.ID, clientToken(weatherClient), "").want(t, http.StatusOK, `"service":"weather"`)
	f.api(t, http.MethodGet, "/api/v1/elicitations/"+v.ID, exchanged("alice", weatherClient), "").want(t, http.StatusUnauthorized, "exchanged for another party")
	for _, tok := range []string{clientToken(weatherClient), exchanged("alice", weatherClient)} {
		f.send(t, nil, request{method: http.MethodPost, path: "/mcp", token: tok, body: strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`),
			contentType: "application/json"}).want(t, http.StatusUnauthorized)
	}
}

// A client credentials token authenticates its service only when it carries the scopes the
// service's configuration requires (client_scopes, by default services.DefaultClientScope):
// a token the same client got for another purpose at the same issuer is refused with 403
// insufficient_scope naming them, is audited as a refused identity, and acts as nobody.
func TestAServiceClientTokenWithoutItsScopeCannotActAsTheService(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{oidc: true, requiredScopes: []string{"mcp"}})
	resource := f.server.resourceURL()
	clientToken := func(scope string) string {
		claims := f.issuer.AccessClaims(weatherClient, resource)
		claims["client_id"] = weatherClient
		if scope != "" {
			claims["scope"] = scope
		}
		return f.issuer.AccessToken(t, claims)
	}
	create := func(bearer string) answer {
		return f.send(t, nil, request{method: http.MethodPost, path: "/api/v1/elicitations", token: bearer,
			header: http.Header{api.UserTokenHeader: {f.userTokenFor(t, "alice", weather)}}, body: strings.NewReader(createDemoKey), contentType: "application/json"})
	}
	metadata := `resource_metadata="` + f.server.resourceMetadataURL() + `"`
	for _, scope := range []string{"", "mcp", "openid profile", "urlflow:delegated"} {
		got := create(clientToken(scope))
		got.want(t, http.StatusForbidden, "urlflow:delegate")
		if challenge := got.Header.Get("WWW-Authenticate"); challenge != `Bearer error="insufficient_scope", scope="urlflow:delegate", `+metadata {
			t.Errorf("scope %q: WWW-Authenticate %q, want insufficient_scope naming urlflow:delegate", scope, challenge)
		}
		f.api(t, http.MethodGet, "/api/v1/elicitations", clientToken(scope), "").want(t, http.StatusForbidden, "urlflow:delegate")
	}
	if list, err := f.store.Index().List(t.Context(), flow.ListQuery{}); err != nil || len(list.Elicitations) != 0 {
		t.Fatalf("refused tokens created %+v (%v)", list.Elicitations, err)
	}
	f.server.opts.Audit.Flush(t.Context())
	events, err := f.trail.Read(t.Context(), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(events, func(e audit.Event) bool {
		return e.Event == audit.IdentityRefused && strings.Contains(e.Reason, "weather") && strings.Contains(e.Reason, "urlflow:delegate")
	}) {
		t.Errorf("no refused identity naming weather and its scope in the audit trail: %+v", events)
	}

	// With the scope (and others besides), the token is weather's.
	created(t, create(clientToken("mcp urlflow:delegate")), http.StatusCreated)
}

// An MCP session belongs to a user: a client credentials token is refused at /mcp, even
// the token of a configured service's client that carries every scope there is, and the
// refusal says why.
func TestAClientCredentialsTokenIsRefusedAtMCP(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{oidc: true, requiredScopes: []string{"mcp"}})
	claims := f.issuer.AccessClaims(weatherClient, f.server.resourceURL())
	claims["client_id"], claims["scope"] = weatherClient, "mcp urlflow:delegate"
	got := f.send(t, nil, request{method: http.MethodPost, path: "/mcp", token: f.issuer.AccessToken(t, claims),
		body: strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`), contentType: "application/json"})
	got.wantRefusedToken(t, f.server.resourceMetadataURL())
	got.want(t, http.StatusUnauthorized, "names no user", "only a user's token is accepted here")
	if reached := f.mcp.reached(); len(reached) != 0 {
		t.Errorf("the MCP endpoint was reached by %v", reached)
	}
}
