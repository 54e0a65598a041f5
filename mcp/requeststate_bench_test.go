package mcp

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/urlflow/urlflow/internal/signed"
)

// BenchmarkRequestState measures what every 2026-07-28 retry pays to trust its
// requestState: the digest of the arguments, and sealing or opening the state.
//
//	go test -run='^$' -bench=RequestState ./mcp
func BenchmarkRequestState(b *testing.B) {
	rs := requestStates{signed.NewSealer(testKey)}
	args := json.RawMessage(`{"name":"demo_api_key","method":"GET","path":"/whoami","query":{"page":"2"}}`)
	st := requestState{User: alice.Key(), Tool: "call_api", Arguments: argumentsDigest(args),
		ElicitationID: elicID, Expires: now.Add(time.Minute).Unix()}
	b.Run("digest", func(b *testing.B) {
		for b.Loop() {
			argumentsDigest(args)
		}
	})
	b.Run("seal", func(b *testing.B) {
		for b.Loop() {
			rs.seal(st)
		}
	})
	b.Run("open", func(b *testing.B) {
		text := rs.seal(st)
		for b.Loop() {
			if _, err := rs.open(text, now, alice, "call_api", st.Arguments); err != nil {
				b.Fatal(err)
			}
		}
	})
}
