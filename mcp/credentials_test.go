package mcp

import (
	"encoding/json"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/urlflow/urlflow/demoapi"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/credentials"
	"github.com/urlflow/urlflow/state/flow"
	"github.com/urlflow/urlflow/upstream"
)

// call_api, list_connections, disconnect and connect against the demo API.

func apiCall(name, method, path string) map[string]any {
	return map[string]any{"name": name, "method": method, "path": path}
}

// apiResponseOf returns the structuredContent of call_api.
func apiResponseOf(t *testing.T, res *sdk.CallToolResult) upstream.Response {
	t.Helper()
	return structured[upstream.Response](t, res)
}

func TestCallAPIAsksForAMissingSecretThenCallsWithIt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.connect(alice, clientConfig{urlMode: true})

	call := c.start(&sdk.CallToolParams{Name: "call_api", Arguments: apiCall(demoSlot, "GET", "/whoami")})
	asked := receive(t, c.elicitations, "elicitation/create")
	f.waitForState(asked.ElicitationID, flow.Consented)
	f.browserCompletes(asked.ElicitationID, demoKey)
	out := receive(t, call, "call_api result")
	if out.err != nil || out.res.IsError {
		t.Fatalf("call_api: %v %s", out.err, textOf(out.res))
	}
	resp := apiResponseOf(t, out.res)
	account := demoapi.Account(demoKey)
	if resp.Status != 200 || resp.Headers["X-Demo-Account"] != account || !strings.Contains(resp.Body, account) {
		t.Fatalf("response: %+v", resp)
	}

	// The API echoes the request with its Authorization header: the secret comes back
	// redacted.
	res := c.call("call_api", map[string]any{"name": demoSlot, "method": "POST", "path": "/echo",
		"query": map[string]any{"q": "1"}, "body": `{"hello":"world"}`})
	resp = apiResponseOf(t, res)
	var echo struct {
		Method, Body string
		Query        map[string][]string
		Headers      map[string]string
	}
	if err := json.Unmarshal([]byte(resp.Body), &echo); err != nil {
		t.Fatalf("echo %q: %v", resp.Body, err)
	}
	if echo.Method != "POST" || echo.Body != `{"hello":"world"}` || echo.Query["q"][0] != "1" ||
		!strings.Contains(echo.Headers["Authorization"], upstream.Redacted) {
		t.Fatalf("echo: %+v", echo)
	}
	if strings.Contains(wholeOf(res), demoKey) {
		t.Fatal("call_api returned the secret")
	}
	nothingIn(t, c.elicitations, "a second elicitation/create")
}

func TestCallAPIRefusesWhatCanNeverWorkBeforeAsking(t *testing.T) {
	t.Parallel()
	f := newFixture(t, withStyle(StyleError))
	c := f.connect(alice, clientConfig{urlMode: true})

	tests := []struct {
		name string
		args map[string]any
		want string
	}{
		{"unknown secret", apiCall("nope", "GET", "/whoami"), `no secret named "nope"`},
		{"secret without an API", apiCall(notesSlot, "GET", "/whoami"), "only stored"},
		{"method not allowed", apiCall(demoSlot, "DELETE", "/whoami"), upstream.ErrMethod.Error() + ": DELETE; allowed: GET, POST"},
		{"path out of the base URL", apiCall(demoSlot, "GET", "/../admin"), upstream.ErrOutside.Error()},
		{"provider method not allowed", apiCall(acme, "POST", "/whoami"), upstream.ErrMethod.Error()},
		{"provider path out of the base URL", apiCall(acme, "GET", "%2e%2e/x"), upstream.ErrOutside.Error()},
	}
	for _, tt := range tests {
		res, err := c.CallTool(t.Context(), &sdk.CallToolParams{Name: "call_api", Arguments: tt.args})
		if err != nil || !res.IsError || !strings.Contains(textOf(res), tt.want) {
			t.Errorf("%s: %v isError=%v %q", tt.name, err, res != nil && res.IsError, textOf(res))
		}
	}
	for _, slot := range []string{demoSlot, notesSlot} {
		if _, err := f.store.OpenFor(f.ctx, alice, state.KindSecret, slot, c.sessionID); err == nil {
			t.Errorf("a refused call opened a flow for %s", slot)
		}
	}
}

func TestListConnectionsAndDisconnect(t *testing.T) {
	t.Parallel()
	f := newFixture(t, withStyle(StyleError))
	c := f.connect(alice, clientConfig{urlMode: true})

	res := c.call("list_connections", nil)
	if textOf(res) != "You have no stored secrets." || len(structured[connectionsView](t, res).Connections) != 0 {
		t.Fatalf("no connections: %q %v", textOf(res), res.StructuredContent)
	}

	_, err := c.CallTool(t.Context(), setSecretParams(demoSlot))
	f.browserCompletes(urlElicitationRequired(t, err)[0].ElicitationID, demoKey)
	c.call("call_api", apiCall(demoSlot, "GET", "/whoami"))

	res = c.call("list_connections", nil)
	conns := structured[connectionsView](t, res).Connections
	if len(conns) != 1 || conns[0].Name != demoSlot || conns[0].Label != "Demo API key" || conns[0].Kind != state.KindSecret ||
		conns[0].LastUsedAt == nil {
		t.Fatalf("connections: %+v", conns)
	}
	if text := textOf(res); !strings.Contains(text, "- Demo API key (demo_api_key): stored ") || !strings.Contains(text, "last used") {
		t.Errorf("text: %q", text)
	}
	if strings.Contains(wholeOf(res), demoKey) {
		t.Fatal("list_connections returned the secret")
	}

	res = c.call("disconnect", map[string]any{"name": demoSlot})
	if got := res.StructuredContent.(map[string]any); res.IsError || got["deleted"] != true || got["name"] != demoSlot {
		t.Fatalf("disconnect: %v", got)
	}
	if f.secretOf(alice, demoSlot) != "" {
		t.Fatal("the secret is still stored")
	}
	res = c.call("disconnect", map[string]any{"name": demoSlot})
	if got := res.StructuredContent.(map[string]any); got["deleted"] != false || !strings.Contains(textOf(res), "nothing was deleted") {
		t.Fatalf("second disconnect: %v %q", got, textOf(res))
	}
	if res := c.call("disconnect", map[string]any{"name": "nope"}); !res.IsError {
		t.Fatalf("disconnect of an unknown name: %q", textOf(res))
	}
}

func TestWhatADelegatingServiceHoldsIsListedAndRevocableButNotUsedByTheTools(t *testing.T) {
	t.Parallel()
	f := newFixture(t, withStyle(StyleError))
	c := f.connect(alice, clientConfig{urlMode: true})
	own := "demo_own_0123456789"
	_, err := c.CallTool(t.Context(), setSecretParams(demoSlot))
	f.browserCompletes(urlElicitationRequired(t, err)[0].ElicitationID, own)
	held, err := f.store.Create(f.ctx, flow.NewElicitation{User: alice, Kind: state.KindSecret, Target: demoSlot,
		Service: "weather", Purpose: "weather asks", TTL: f.opts.TTL})
	if err != nil {
		t.Fatal(err)
	}
	f.browserCompletes(held.ID, demoKey)

	res := c.call("list_connections", nil)
	conns := structured[connectionsView](t, res).Connections
	if len(conns) != 2 || conns[0].Service != "" || conns[1].Name != demoSlot || conns[1].Service != "weather" {
		t.Fatalf("connections %+v, want urlflow's own and weather's, both of the demo slot", conns)
	}
	if text := textOf(res); !strings.Contains(text, "(demo_api_key, held for the service weather)") {
		t.Errorf("text: %q", text)
	}
	if strings.Contains(wholeOf(res), demoKey) || strings.Contains(wholeOf(res), own) {
		t.Fatal("list_connections returned a secret")
	}

	res = c.call("disconnect", map[string]any{"name": demoSlot, "service": "weather"})
	if got := res.StructuredContent.(map[string]any); res.IsError || got["deleted"] != true {
		t.Fatalf("disconnect weather's: %v %q", got, textOf(res))
	}
	if f.secretOf(alice, credentials.Name("weather", demoSlot)) != "" || f.secretOf(alice, demoSlot) != own {
		t.Fatal("disconnecting weather's secret did not delete it alone")
	}
}

// connectionsView is the structuredContent of list_connections.
type connectionsView struct {
	Connections []connectionView `json:"connections"`
}

func TestConnectStoresAThirdPartyAccountAndCallAPIUsesIt(t *testing.T) {
	t.Parallel()
	f := newFixture(t, withStyle(StyleError))
	c := f.connect(alice, clientConfig{urlMode: true})

	_, err := c.CallTool(t.Context(), &sdk.CallToolParams{Name: "connect", Arguments: map[string]any{"provider": acme}})
	els := urlElicitationRequired(t, err)
	if !strings.Contains(els[0].Message, "Acme account") {
		t.Errorf("message: %q", els[0].Message)
	}
	id := els[0].ElicitationID
	if e := f.get(id); e.Kind != state.KindOAuth || e.Target != acme || strings.Join(e.Scopes, " ") != "read" {
		t.Fatalf("record: %+v", e)
	}
	if v := viewOf(t, c.call("elicitation_status", map[string]any{"elicitationId": id})); v.Kind != state.KindOAuth {
		t.Fatalf("status: %+v", v)
	}
	f.browserConnects(id, acme, "alice@acme", demoKey)

	res := c.call("connect", map[string]any{"provider": acme})
	if got := res.StructuredContent.(map[string]any); got["status"] != "connected" || got["account"] != "alice@acme" ||
		!strings.Contains(textOf(res), "nothing was asked") {
		t.Fatalf("connect again: %v %q", got, textOf(res))
	}
	// More scopes than granted: asked again.
	_, err = c.CallTool(t.Context(), &sdk.CallToolParams{Name: "connect",
		Arguments: map[string]any{"provider": acme, "scopes": []string{"read", "write"}}})
	if more := urlElicitationRequired(t, err)[0].ElicitationID; more == id ||
		strings.Join(f.get(more).Scopes, " ") != "read write" {
		t.Fatalf("connect with more scopes: %s", more)
	}

	resp := apiResponseOf(t, c.call("call_api", apiCall(acme, "GET", "/whoami")))
	if resp.Status != 200 || !strings.Contains(resp.Body, demoapi.Account(demoKey)) {
		t.Fatalf("call_api with the connection: %+v", resp)
	}
	conns := structured[connectionsView](t, c.call("list_connections", nil)).Connections
	if len(conns) != 1 || conns[0].Kind != state.KindOAuth || conns[0].Account != "alice@acme" || conns[0].Label != "Acme" {
		t.Fatalf("connections: %+v", conns)
	}

	res = c.call("disconnect", map[string]any{"name": acme})
	if got := res.StructuredContent.(map[string]any); got["deleted"] != true || got["revoked"] != false ||
		!strings.Contains(textOf(res), "offers no way for urlflow to revoke") {
		t.Fatalf("disconnect: %v %q", got, textOf(res))
	}
	if _, err := f.creds.Get(f.ctx, alice, acme); err == nil {
		t.Fatal("the connection is still stored")
	}
	res = c.call("disconnect", map[string]any{"name": acme})
	if got := res.StructuredContent.(map[string]any); got["deleted"] != false {
		t.Fatalf("second disconnect: %v", got)
	}
}

func TestConnectFlowSuccessIsConnected(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.connect(alice, clientConfig{urlMode: true})

	call := c.start(&sdk.CallToolParams{Name: "connect", Arguments: map[string]any{"provider": acme}})
	asked := receive(t, c.elicitations, "elicitation/create")
	f.waitForState(asked.ElicitationID, flow.Consented)
	f.browserConnects(asked.ElicitationID, acme, "alice@acme", demoKey)
	out := receive(t, call, "connect result")
	if out.err != nil {
		t.Fatal(out.err)
	}
	got := out.res.StructuredContent.(map[string]any)
	if got["status"] != "connected" || got["account"] != "alice@acme" || got["elicitationId"] != asked.ElicitationID {
		t.Fatalf("connect: %v", got)
	}
	if strings.Contains(wholeOf(out.res), demoKey) {
		t.Fatal("connect returned the access token")
	}
}

func TestConnectRefusesAnUnknownProvider(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.connect(alice, clientConfig{urlMode: true})
	res := c.call("connect", map[string]any{"provider": "nope"})
	if !res.IsError || !strings.Contains(textOf(res), `no provider named "nope"; the providers are: acme`) {
		t.Fatalf("isError=%v %q", res.IsError, textOf(res))
	}
}

func TestAConnectionTheProviderNoLongerHonoursIsAskedForAgain(t *testing.T) {
	t.Parallel()
	f := newFixture(t, withStyle(StyleError))
	c := f.connect(alice, clientConfig{urlMode: true})
	_, err := c.CallTool(t.Context(), &sdk.CallToolParams{Name: "connect", Arguments: map[string]any{"provider": acme}})
	first := urlElicitationRequired(t, err)[0].ElicitationID
	f.browserConnects(first, acme, "alice@acme", demoKey)

	// A refresh found the grant revoked at the provider.
	cred, err := f.creds.Get(f.ctx, alice, acme)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.creds.Update(f.ctx, alice, cred, func(c *credentials.Credential) { c.NeedsReconnect = true }); err != nil {
		t.Fatal(err)
	}
	if text := textOf(c.call("list_connections", nil)); !strings.Contains(text, "Acme (acme): connected as alice@acme with read") ||
		!strings.Contains(text, "needs to be connected again") {
		t.Fatalf("list_connections: %q", text)
	}

	_, err = c.CallTool(t.Context(), &sdk.CallToolParams{Name: "call_api", Arguments: apiCall(acme, "GET", "/whoami")})
	again := urlElicitationRequired(t, err)[0].ElicitationID
	if e := f.get(again); again == first || e.Kind != state.KindOAuth || !strings.Contains(e.Purpose, "no longer accepts") {
		t.Fatalf("asked again: %+v", e)
	}
	_, err = c.CallTool(t.Context(), &sdk.CallToolParams{Name: "connect", Arguments: map[string]any{"provider": acme}})
	if reused := urlElicitationRequired(t, err)[0].ElicitationID; reused != again {
		t.Fatalf("connect opened %s besides the running %s", reused, again)
	}

	f.browserConnects(again, acme, "alice@acme", otherKey)
	resp := apiResponseOf(t, c.call("call_api", apiCall(acme, "GET", "/whoami")))
	if resp.Status != 200 || !strings.Contains(resp.Body, demoapi.Account(otherKey)) {
		t.Fatalf("call_api after connecting again: %+v", resp)
	}
}
