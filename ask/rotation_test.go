package ask

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/urlflow/urlflow/state/vault/vaulttest"
)

func TestARequestStateOutlivesAKeyRotationWhileItsKeyIsInTheRing(t *testing.T) {
	ring := vaulttest.Rings(t)
	asker := func(spec string) *Asker {
		r := ring(spec)
		return New(Options{ToolStateKeys: r.DeriveAll("mcp request state"), ServiceStateKeys: r.DeriveAll("service request state"),
			Now: func() time.Time { return now }})
	}
	tool := ToolBinding("set_secret", json.RawMessage(`{"name":"k"}`))
	for _, tc := range vaulttest.Rotations {
		text := asker(tc.Sign).Issue(elicitation, tool)
		id, err := asker(tc.Verify).Redeem(text, alice, tool)
		if accepted := err == nil && id == elicitation.ID; accepted != tc.Accepted {
			t.Errorf("requestState issued by [%s], redeemed by [%s]: accepted %v (%v), want %v", tc.Sign, tc.Verify, accepted, err, tc.Accepted)
		}
	}
}
