package delegate

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestOnlyADatedVersionFrom20260728IsModern(t *testing.T) {
	for version, want := range map[string]bool{
		"2026-07-28": true, "2027-01-01": true, "2025-11-25": false, "": false, "draft": false, "2026-07-28-rc": false,
	} {
		if got := modernVersion(version); got != want {
			t.Errorf("modernVersion(%q) = %v, want %v", version, got, want)
		}
	}
}

// call is a tools/call of tool with arguments args and header.
func call(tool, args string, header http.Header) *mcp.CallToolRequest {
	return &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: tool, Arguments: json.RawMessage(args)}, Extra: &mcp.RequestExtra{Header: header}}
}

func TestTheUsersTokenIsTheBearerTokenOfTheRequest(t *testing.T) {
	for auth, want := range map[string]string{
		"Bearer abc": "abc", "bearer abc": "abc", "BEARER  abc ": "abc", "Basic YWxhZGRpbg==": "", "": "", "abc": "",
	} {
		if got := userToken(call("t", "{}", http.Header{"Authorization": {auth}})); got != want {
			t.Errorf("Authorization %q: %q, want %q", auth, got, want)
		}
	}
	if got := userToken(&mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "t"}}); got != "" {
		t.Errorf("a request without HTTP headers: %q", got)
	}
}

func TestARequestStateIsBoundToTheToolAndItsArgumentsInAnyOrder(t *testing.T) {
	paris := callOf(call("forecast", `{"city": "Paris", "days": 2}`, nil))
	for _, tc := range []struct {
		tool, args string
		same       bool
	}{
		{"forecast", `{"days":2,"city":"Paris"}`, true},
		{"forecast", " {\n\"city\": \"Paris\", \"days\": 2}", true},
		{"forecast", `{"city": "Lyon", "days": 2}`, false},
		{"forecast", `{"city": "Paris"}`, false},
		{"alerts", `{"city": "Paris", "days": 2}`, false},
	} {
		if got := callOf(call(tc.tool, tc.args, nil)); (got == paris) != tc.same {
			t.Errorf("%s %s: %q, against %q", tc.tool, tc.args, got, paris)
		}
	}
	if got := callOf(call("forecast", `not json`, nil)); got == callOf(call("forecast", `not json either`, nil)) {
		t.Error("two calls with different arguments that are not JSON are bound alike")
	}
	long := callOf(call(strings.Repeat("t", 300), `{}`, nil))
	if len(long) != 200 || !strings.HasSuffix(long, callOf(call("t", `{}`, nil))[len("t:"):]) {
		t.Errorf("a long tool name: %d bytes %q, want the last 200, digest included", len(long), long)
	}
}

func TestEveryResultThatAsksTheUserSaysWhatToDoNext(t *testing.T) {
	e := &Elicitation{ID: "E1", State: "pending", URL: "https://urlflow.example/e/E1", ExpiresAt: time.Unix(1_800_000_000, 0)}
	for _, tc := range []struct {
		name   string
		res    *mcp.CallToolResult
		status string
		text   []string
	}{
		{"open it", openItResult(e), "user_action_required", []string{e.URL, "call the tool again", "sign in"}},
		{"open it, no URL", openItResult(&Elicitation{ID: "E1", State: "complete"}), "user_action_required", []string{"Call the tool again"}},
		{"still waiting", waitingResult(e), "user_action_required", []string{"Still waiting", e.URL}},
		{"ended", outcomeResult(&Elicitation{ID: "E1", State: "expired"}), "expired", []string{"ended: expired", "Nothing was stored"}},
		{"ended, unnamed", outcomeResult(nil), "ended", []string{"ended without it"}},
	} {
		got := tc.res.StructuredContent.(map[string]any)
		text := tc.res.Content[0].(*mcp.TextContent).Text
		if tc.res.IsError || got["status"] != tc.status {
			t.Errorf("%s: %v, want status %s and no isError", tc.name, got, tc.status)
		}
		for _, want := range tc.text {
			if !strings.Contains(text, want) {
				t.Errorf("%s: %q does not say %q", tc.name, text, want)
			}
		}
	}
	if got := openItResult(e).StructuredContent.(map[string]any); got["url"] != e.URL || got["elicitationId"] != "E1" || got["expiresAt"] != e.ExpiresAt {
		t.Errorf("the structured content of a running flow: %v", got)
	}
	for need, want := range map[*Need]string{{Slot: "weather_api_key"}: "your weather_api_key", {Provider: "github"}: "your github account"} {
		if got := message(*need); !strings.Contains(got, want) || !strings.Contains(got, "never here") {
			t.Errorf("message for %+v: %q", *need, got)
		}
	}
}
