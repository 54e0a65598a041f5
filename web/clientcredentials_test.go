package web

import (
	"net/http"
	"strings"
	"testing"

	"github.com/urlflow/urlflow/state/flow"
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
		claims["client_id"] = client
		return f.issuer.AccessToken(t, claims)
	}
	exchanged := func(user, actor string) string {
		claims := f.issuer.AccessClaims(user, resource)
		claims["act"] = map[string]any{"sub": actor}
		return f.issuer.AccessToken(t, claims)
	}
	create := func(bearer, userToken string) answer {
		return f.send(t, nil, request{method: http.MethodPost, path: "/api/v1/elicitations", token: bearer,
			header: http.Header{UserTokenHeader: {userToken}}, body: strings.NewReader(createDemoKey), contentType: "application/json"})
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
