package e2e

import (
	"cmp"
	"os"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/urlflow/urlflow/internal/redistest"
)

// The benchmarks of this file measure urlflow as its users meet it: the real binary
// (`urlflow dev`, error style) against a real redis-server, a go-sdk client over HTTP on
// loopback, and an HTTP browser for the pages. Run them without the race detector:
//
//	go test -run='^$' -bench=. -benchtime=3s ./e2e
//
// docs/performance.md records a run and what it means.

// benchSetup is one server with the development user's demo key stored.
type benchSetup struct {
	s   *server
	c   *client
	dev *formBrowser
	// completed is the ID of the elicitation that stored the key.
	completed string
}

func startBench(b *testing.B) *benchSetup {
	b.Helper()
	if raceEnabled {
		b.Skip("the race detector slows the server several times over: benchmark without -race")
	}
	// The rate limits count as they do by default, with room for far more than a user
	// may send: URLFLOW_BENCH_RATE_LIMIT=off measures without them.
	limit := cmp.Or(os.Getenv("URLFLOW_BENCH_RATE_LIMIT"), "100000000/1m")
	s := startServer(b, serverConfig{Redis: redistest.Start(b), Style: "error",
		Env: []string{"URLFLOW_RATE_LIMIT_MCP=" + limit, "URLFLOW_RATE_LIMIT_FORMS=" + limit}})
	bs := &benchSetup{s: s, c: connect(b, s, clientConfig{Token: s.Token, URLMode: true}), dev: newFormBrowser(b, s, "dev")}
	bs.completed = bs.storeSecret(b, false)
	return bs
}

// storeSecret replaces the stored demo key by the pages (see storeSecretByPages).
func (bs *benchSetup) storeSecret(b *testing.B, replace bool) string {
	b.Helper()
	return storeSecretByPages(b, bs.c, bs.dev, "demo_0123456789abcdef", replace)
}

// callOK calls a tool and fails the test or benchmark unless it succeeds.
func callOK(tb testing.TB, c *client, name string, args map[string]any) *sdk.CallToolResult {
	tb.Helper()
	res, err := c.Call(tb.Context(), name, args)
	if err != nil || res.IsError {
		tb.Fatalf("%s: %v %s", name, err, text(res))
	}
	return res
}

// BenchmarkToolCalls measures one tool call from the client's point of view: HTTP, bearer
// token, session, Redis, and for call_api the sealed key opened and the demo API called
// with it (on the same server, so the figure includes both sides of that request).
func BenchmarkToolCalls(b *testing.B) {
	bs := startBench(b)
	b.Run("ping", func(b *testing.B) { // the floor: HTTP, bearer token and session, no tool
		for b.Loop() {
			if err := bs.c.session.Ping(b.Context(), nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("call_api", func(b *testing.B) {
		for b.Loop() {
			callOK(b, bs.c, "call_api", whoamiArgs)
		}
	})
	b.Run("call_api-parallel", func(b *testing.B) {
		b.SetParallelism(4) // 4 calls in flight per CPU, on one session
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				callOK(b, bs.c, "call_api", whoamiArgs)
			}
		})
	})
	b.Run("elicitation_status", func(b *testing.B) {
		for b.Loop() {
			callOK(b, bs.c, "elicitation_status", map[string]any{"elicitationId": bs.completed})
		}
	})
	b.Run("list_connections", func(b *testing.B) {
		for b.Loop() {
			callOK(b, bs.c, "list_connections", nil)
		}
	})
	b.Run("call_api-2026-07-28", func(b *testing.B) {
		modern := connect(b, bs.s, clientConfig{Token: bs.s.Token, URLMode: true, ProtocolVersion: "2026-07-28"})
		for b.Loop() {
			callOK(b, modern, "call_api", whoamiArgs)
		}
	})
}

// BenchmarkSession measures what a 2025-11-25 client pays once per connection:
// initialize, the initialized notification, and closing the session.
func BenchmarkSession(b *testing.B) {
	bs := startBench(b)
	for b.Loop() {
		c := connect(b, bs.s, clientConfig{Token: bs.s.Token, URLMode: true})
		if err := c.session.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSecretFlow measures a whole replacement of the demo key as the user lives it,
// without the time the user takes: set_secret answers −32042, then the browser opens the
// link (the user is already signed in), continues on the consent page, loads the form and
// posts the key, which urlflow verifies against the demo API, stores and completes, and
// the client receives notifications/elicitation/complete.
func BenchmarkSecretFlow(b *testing.B) {
	bs := startBench(b)
	for b.Loop() {
		id := bs.storeSecret(b, true)
		if e := bs.s.status(id, bs.s.Token); e.State != "complete" || !strings.Contains(e.Target, "demo_api_key") {
			b.Fatalf("elicitation %s ended %s", id, e.State)
		}
	}
}
