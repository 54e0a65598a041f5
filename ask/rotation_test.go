package ask

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/urlflow/urlflow/state/vault"
)

func TestARequestStateOutlivesAKeyRotationWhileItsKeyIsInTheRing(t *testing.T) {
	keys := map[string]string{"old": vault.GenerateKeyRing("old"), "new": vault.GenerateKeyRing("new")}
	ring := func(spec string) *vault.KeyRing {
		var entries []string
		for _, id := range strings.Split(spec, ",") {
			entries = append(entries, keys[id])
		}
		r, err := vault.ParseKeyRing(strings.Join(entries, ","))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	asker := func(spec string) *Asker {
		r := ring(spec)
		return New(Options{ToolStateKeys: r.DeriveAll("mcp request state"), ServiceStateKeys: r.DeriveAll("service request state"),
			Now: func() time.Time { return now }})
	}
	tool := ToolBinding("set_secret", json.RawMessage(`{"name":"k"}`))
	for _, tc := range []struct {
		sign, verify string
		accepted     bool
	}{
		{"old", "old,new", true},
		{"old,new", "old", true},
		{"old", "new,old", true},
		{"new,old", "old,new", true},
		{"new,old", "new,old", true},
		{"new,old", "new", true},
		{"old", "new", false},
		{"old,new", "new", false},
	} {
		text := asker(tc.sign).Issue(elicitation, tool)
		id, err := asker(tc.verify).Redeem(text, alice, tool)
		if accepted := err == nil && id == elicitation.ID; accepted != tc.accepted {
			t.Errorf("requestState issued by [%s], redeemed by [%s]: accepted %v (%v), want %v", tc.sign, tc.verify, accepted, err, tc.accepted)
		}
	}
}
