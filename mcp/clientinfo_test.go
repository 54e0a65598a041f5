package mcp

import (
	"strings"
	"testing"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/urlflow/urlflow/state"
)

// A client chooses its name, title and version, and they reach the consent page, the
// records and the log: urlflow keeps them bounded and cleaned, in either era (at
// initialize in 2025-11-25, in each request's _meta in 2026-07-28).
func TestWhatAClientSaysAboutItselfIsKeptBoundedAndCleaned(t *testing.T) {
	t.Parallel()
	hostile := &sdk.Implementation{
		Name:    "evil\u202e-client\x1b[2J\n",
		Title:   "\u202eTrusted \t Client\u2066 " + strings.Repeat("A", 120_000),
		Version: "1.0\u200f" + strings.Repeat("9", 1000),
	}
	wantClean := func(t *testing.T, what string, got state.ClientInfo) {
		t.Helper()
		if got.Name != "evil-client[2J" ||
			!strings.HasPrefix(got.Title, "Trusted Client AAA") || !strings.HasSuffix(got.Title, "…") || utf8.RuneCountInString(got.Title) != 100 ||
			!strings.HasPrefix(got.Version, "1.0999") || !strings.HasSuffix(got.Version, "…") || utf8.RuneCountInString(got.Version) != 50 {
			t.Errorf("%s: name %.60q, title %.200q, version %.100q; want the client's words bounded and cleaned",
				what, got.Name, got.Title, got.Version)
		}
	}
	for _, tt := range []struct {
		era     string
		connect func(*fixture, state.User, clientConfig) *testClient
	}{
		{"2025-11-25", (*fixture).connect},
		{"2026-07-28", (*fixture).connectModern},
	} {
		t.Run(tt.era, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			c := tt.connect(f, alice, clientConfig{clientInfo: hostile})

			res := c.call("set_secret", map[string]any{"name": demoSlot})
			got := flowOf(t, res)
			if res.IsError || got.ElicitationID == "" {
				t.Fatalf("set_secret: isError=%v %+v", res.IsError, got)
			}
			wantClean(t, "the elicitation", f.get(got.ElicitationID).Client)
			if c.sessionID != "" {
				ms, err := f.mcpSessions.Live(f.ctx, c.sessionID)
				if err != nil {
					t.Fatal(err)
				}
				wantClean(t, "the session's registration", ms.Client)
				receive(t, f.logs.seen("mcp session started", "client", "evil-client[2J"), "the session start logged")
			}
			if strings.ContainsRune(f.logs.text(), '\u202e') {
				t.Error("the log holds a right-to-left override")
			}
		})
	}
}
