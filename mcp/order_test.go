package mcp

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// In push style the completion notification reaches the client before the tool call's
// result, on the call's own response stream: one connection keeps the order, whatever the
// client does with its session stream.
func TestPushWritesTheNotificationBeforeTheResultOnTheCallsStream(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	endpoint, token := f.serveHTTP()
	tok := token("dev")
	resp, init := rawRequest(t, http.MethodPost, endpoint, tok, "",
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",`+
			`"capabilities":{"elicitation":{"url":{}}},"clientInfo":{"name":"raw","version":"1"}}}`)
	init.until(`"result"`)
	session := resp.Header.Get("Mcp-Session-Id")
	rawRequest(t, http.MethodPost, endpoint, tok, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	_, call := rawRequest(t, http.MethodPost, endpoint, tok, session,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"set_secret","arguments":{"name":"`+demoSlot+`"}}}`)
	var ask struct {
		ID     json.RawMessage `json:"id"`
		Params struct {
			ElicitationID string `json:"elicitationId"`
		} `json:"params"`
	}
	if err := json.Unmarshal([]byte(call.until(`"elicitation/create"`)), &ask); err != nil {
		t.Fatal(err)
	}
	rawRequest(t, http.MethodPost, endpoint, tok, session, `{"jsonrpc":"2.0","id":`+string(ask.ID)+`,"result":{"action":"accept"}}`)
	f.browserCompletes(ask.Params.ElicitationID, demoKey)

	notified := false
	for {
		msg := call.until(`"jsonrpc"`)
		switch {
		case strings.Contains(msg, `"notifications/elicitation/complete"`) && strings.Contains(msg, ask.Params.ElicitationID):
			notified = true
		case strings.Contains(msg, `"id":2`) && strings.Contains(msg, `"result"`):
			if !notified {
				t.Fatalf("the result came before the completion notification on the call's stream: %.300s", msg)
			}
			return
		}
	}
}
