package flow

import (
	"strings"
	"testing"

	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/vault"
)

func TestAnElicitationIDOutlivesAKeyRotationWhileItsKeyIsInTheRing(t *testing.T) {
	keys := map[string]string{"old": vault.GenerateKeyRing("old"), "new": vault.GenerateKeyRing("new")}
	sealer := func(spec string) *idSealer {
		var entries []string
		for _, id := range strings.Split(spec, ",") {
			entries = append(entries, keys[id])
		}
		r, err := vault.ParseKeyRing(strings.Join(entries, ","))
		if err != nil {
			t.Fatal(err)
		}
		s, err := newIDSealer(r.DeriveAll("elicitation id"))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	userKey := state.User{Issuer: "https://issuer.example", Subject: "alice"}.Key()
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
		id, err := sealer(tc.sign).newID(userKey)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := sealer(tc.verify).userKey(id)
		if accepted := ok && got == userKey; accepted != tc.accepted {
			t.Errorf("ID made by [%s], read by [%s]: accepted %v, want %v", tc.sign, tc.verify, accepted, tc.accepted)
		}
	}
}
