package mcp

import (
	"context"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/urlflow/urlflow/internal/tracingtest"
)

// A tools/call span names the tool only when it is one of urlflow's: the name a client
// sends is its own text. (Not parallel: it turns tracing on for the process.)
func TestAToolCallSpanNamesOnlyUrlflowsTools(t *testing.T) {
	exp := tracingtest.Record(t)
	(&Server{}).addTools(sdk.NewServer(&sdk.Implementation{Name: "test"}, nil), era2025) // registers the tools
	handler := traceReceived(func(context.Context, string, sdk.Request) (sdk.Result, error) { return &sdk.CallToolResult{}, nil })
	for _, name := range []string{"set_secret", "my password is CANARY"} {
		handler(context.Background(), "tools/call", &sdk.CallToolRequest{Params: &sdk.CallToolParamsRaw{Name: name}})
	}
	spans := exp.GetSpans()
	if len(spans) != 2 || spans[0].Name != "tools/call set_secret" || spans[1].Name != "tools/call unknown" {
		t.Fatalf("spans %v, want tools/call set_secret then tools/call unknown", spans)
	}
	for _, kv := range spans[1].Attributes {
		if kv.Key == toolAttr && kv.Value.AsString() != "unknown" {
			t.Errorf("the unknown tool's attribute is %q", kv.Value.AsString())
		}
	}
}
