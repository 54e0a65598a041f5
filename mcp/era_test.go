package mcp

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestRequestsAreRoutedByProtocolEra(t *testing.T) {
	tests := []struct {
		name, method, version, body string
		modern                      bool
	}{
		{"initialize without a version header", "POST", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2026-07-28"}}`, false},
		{"server/discover without a version header", "POST", "", `{"jsonrpc":"2.0","id":1,"method":"server/discover"}`, true},
		{"a 2026-07-28 call", "POST", "2026-07-28", `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`, true},
		{"a later version", "POST", "2027-01-01", `{}`, true},
		{"a 2025-11-25 call", "POST", "2025-11-25", `{"jsonrpc":"2.0","id":1,"method":"server/discover"}`, false},
		{"the session stream", "GET", "2025-11-25", ``, false},
		{"a malformed body", "POST", "", `{"method":`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _ := http.NewRequest(tt.method, "http://127.0.0.1/mcp", strings.NewReader(tt.body))
			if tt.version != "" {
				r.Header.Set("Mcp-Protocol-Version", tt.version)
			}
			if got := modernRequest(r); got != tt.modern {
				t.Fatalf("modern = %v, want %v", got, tt.modern)
			}
			if body, _ := io.ReadAll(r.Body); string(body) != tt.body {
				t.Fatalf("the body was not kept whole: %q", body)
			}
		})
	}
}
