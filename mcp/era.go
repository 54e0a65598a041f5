package mcp

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
)

// era is the protocol era a request is served in.
type era int

const (
	// era2025 is protocol 2025-11-25 and earlier: initialize, stateful sessions,
	// server-initiated elicitation/create, notifications/elicitation/complete.
	era2025 era = iota
	// era2026 is protocol 2026-07-28: stateless requests, server/discover, and multi
	// round-trip results instead of server-initiated requests.
	era2026
)

// firstModernVersion is the first protocol version served statelessly; lastLegacyVersion
// the newest one served with sessions.
const (
	firstModernVersion = "2026-07-28"
	lastLegacyVersion  = "2025-11-25"
)

// peekLimit bounds how much of a body the router reads to find the method. It is the SDK's
// own body limit: a larger body is refused by the handler anyway.
const peekLimit = 4 << 20

// modernRequest reports whether r belongs to the 2026-07-28 era: its MCP-Protocol-Version
// says so, or, without that header, it is a server/discover request. Everything else,
// initialize included, is served by the stateful 2025 handler. A client that asks for
// 2026-07-28 in initialize is thereby negotiated down to 2025-11-25 and served as a 2025
// client throughout, which is what it then speaks.
func modernRequest(r *http.Request) bool {
	if v := r.Header.Get("Mcp-Protocol-Version"); v != "" {
		return v >= firstModernVersion
	}
	if r.Method != http.MethodPost || r.Body == nil {
		return false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, peekLimit))
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
	if err != nil {
		return false
	}
	var msg struct {
		Method string `json:"method"`
	}
	return json.Unmarshal(body, &msg) == nil && msg.Method == "server/discover"
}
