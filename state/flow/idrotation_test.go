package flow

import (
	"testing"

	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/vault/vaulttest"
)

func TestAnElicitationIDOutlivesAKeyRotationWhileItsKeyIsInTheRing(t *testing.T) {
	ring := vaulttest.Rings(t)
	sealer := func(spec string) *idSealer {
		s, err := newIDSealer(ring(spec).DeriveAll("elicitation id"))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	userKey := state.User{Issuer: "https://issuer.example", Subject: "alice"}.Key()
	for _, tc := range vaulttest.Rotations {
		id, err := sealer(tc.Sign).newID(userKey)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := sealer(tc.Verify).userKey(id)
		if accepted := ok && got == userKey; accepted != tc.Accepted {
			t.Errorf("ID made by [%s], read by [%s]: accepted %v, want %v", tc.Sign, tc.Verify, accepted, tc.Accepted)
		}
	}
}
