package web

import (
	"net/http"
	"strings"
	"testing"

	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/credentials"
	"github.com/urlflow/urlflow/state/flow"
)

// storeDirectly stores value as owner's demo key the way a completed flow does, without the
// form's rules: a key stored before the slot had its strength minimum.
func (f *fixture) storeDirectly(t testing.TB, owner, value string) *credentials.Credential {
	t.Helper()
	e := f.newFlow(t, owner)
	f.apply(t, e.ID, flow.BrowserOpen, state.ActorUser)
	sealed, err := f.vault.Seal(e.User, demoSlot, state.NewSecret(value))
	if err != nil {
		t.Fatal(err)
	}
	cred := &credentials.Credential{Name: demoSlot, Kind: state.KindSecret, ElicitationID: e.ID, StoredAt: f.clock.Now(), Sealed: sealed}
	if _, err := f.store.Apply(t.Context(), e.ID, flow.Verified, state.ActorUser, "a test", flow.WithCredential(cred)); err != nil {
		t.Fatal(err)
	}
	return cred
}

func replacing(n *flow.NewElicitation) { n.Replace = true }

func TestTheConsentPageSaysWhyAStoredKeyShouldBeReplaced(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})

	t.Run("locked", func(t *testing.T) {
		cred := f.storeDirectly(t, "alice", validKey)
		if ok, err := f.creds.Lock(t.Context(), f.user("alice"), cred, state.ActorClient, "a call_api request carried it in its body"); !ok || err != nil {
			t.Fatalf("lock: %v %v", ok, err)
		}
		e := f.newFlow(t, "alice", replacing)
		page := f.browser(t, "alice").open(e.ID)
		page.want(t, http.StatusOK, "urlflow locked your stored Demo API key because a call_api request carried it in its body.",
			"Enter it again to unlock it.", "is already stored")
	})
	t.Run("weak", func(t *testing.T) {
		f.storeDirectly(t, "bob", "demo_aaaaaaaaaaaaaaaa")
		e := f.newFlow(t, "bob", replacing)
		page := f.browser(t, "bob").open(e.ID)
		page.want(t, http.StatusOK, "Your stored Demo API key is easy to guess", "replace it with a stronger one")
		if strings.Contains(page.Text(), "locked") {
			t.Errorf("the page of a weak key that is not locked says locked: %s", page.Text())
		}
	})
	t.Run("strong and usable", func(t *testing.T) {
		f.storeDirectly(t, "carol", validKey)
		e := f.newFlow(t, "carol", replacing)
		page := f.browser(t, "carol").open(e.ID)
		page.want(t, http.StatusOK, "is already stored")
		if text := page.Text(); strings.Contains(text, "locked") || strings.Contains(text, "easy to guess") {
			t.Errorf("the page of a strong, usable key warns: %s", text)
		}
	})
	// The tools record how the stored key stood when they asked (the tests above create
	// records the way urlflow did before, which the page reads the key for): the page says
	// what the record says, without reading the key.
	t.Run("as the record says", func(t *testing.T) {
		f.storeDirectly(t, "dave", validKey) // strong and not locked now
		locked := f.newFlow(t, "dave", func(n *flow.NewElicitation) {
			n.Replace, n.Replaced = true, &flow.Replaced{LockReason: "a call_api request carried it in its query"}
		})
		f.browser(t, "dave").open(locked.ID).want(t, http.StatusOK,
			"urlflow locked your stored Demo API key because a call_api request carried it in its query.")
		f.apply(t, locked.ID, flow.CancelRequested, state.ActorUser)
		weak := f.newFlow(t, "dave", func(n *flow.NewElicitation) { n.Replace, n.Replaced = true, &flow.Replaced{Weak: true} })
		f.browser(t, "dave").open(weak.ID).want(t, http.StatusOK, "Your stored Demo API key is easy to guess")
		f.apply(t, weak.ID, flow.CancelRequested, state.ActorUser)
		plain := f.newFlow(t, "dave", func(n *flow.NewElicitation) { n.Replace, n.Replaced = true, &flow.Replaced{} })
		if text := f.browser(t, "dave").open(plain.ID).Text(); strings.Contains(text, "locked") || strings.Contains(text, "easy to guess") {
			t.Errorf("a record that says the key stood well warns: %s", text)
		}
	})
}
