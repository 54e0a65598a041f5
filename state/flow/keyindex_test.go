package flow

import (
	"testing"

	"github.com/urlflow/urlflow/internal/redistest"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/credentials"
)

// The step that stores a credential counts it in the key index under the key that seals it,
// in the step itself (no round trip of its own on one server), on every backend: `urlflow
// keys status` and the start check see it.
func TestAStoredCredentialIsCountedUnderItsKey(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		s := newStore(b, nil)
		v := testVault(t)
		e := reach(t, s, nil, newElicitation(alice), InProgress)
		mustApply(t, s, e.ID, Verified, state.ActorUser, WithCredential(vaultCredential(t, v, alice, e.ID, "s3cret", s.Now())))
		counts, err := credentials.NewStore(b.Client, credentials.Options{}).KeyCounts(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(counts.Keys) != 1 || counts.Keys[0].KeyID != "test" || counts.Keys[0].Items != 1 {
			t.Errorf("key index %+v, want the one credential under key test", counts.Keys)
		}
	})
}
