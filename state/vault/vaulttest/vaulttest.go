// Package vaulttest helps the tests of what the key ring signs and seals to check a key
// rotation: the steps of the rollout of docs/production.md ("Keys and rotation"), and
// key rings made of an old and a new key.
package vaulttest

import (
	"strings"
	"testing"

	"github.com/urlflow/urlflow/state/vault"
)

// Rotation is one step of a key rotation: what a replica with the ring Sign made, and
// whether a replica with the ring Verify accepts it. A ring is named by its key IDs, the
// active one first ("new,old").
type Rotation struct {
	Name         string
	Sign, Verify string
	Accepted     bool
}

// Rotations are the steps of the rollout, with the key IDs old and new: a key added
// verify-only, made active, and the old one removed.
var Rotations = []Rotation{
	{"old key only, new added verify-only", "old", "old,new", true},
	{"new added verify-only on one replica, not yet on another", "old,new", "old", true},
	{"before the new key is active, read after", "old", "new,old", true},
	{"new active, read by a replica where it is still verify-only", "new,old", "old,new", true},
	{"new active, read by the same ring", "new,old", "new,old", true},
	{"new active, read after the old key is removed", "new,old", "new", true},
	{"old active, read after the old key is removed", "old", "new", false},
	{"old active with new verify-only, read after the old key is removed", "old,new", "new", false},
}

// Rings returns a maker of the key rings of Rotations: the keys old and new, made once,
// in the order its spec names them ("new,old").
func Rings(t testing.TB) func(spec string) *vault.KeyRing {
	keys := map[string]string{"old": vault.GenerateKeyRing("old"), "new": vault.GenerateKeyRing("new")}
	return func(spec string) *vault.KeyRing {
		t.Helper()
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
}
