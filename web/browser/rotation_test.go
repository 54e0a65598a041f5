package browser

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/urlflow/urlflow/internal/redistest"
	"github.com/urlflow/urlflow/state/browsersession"
	"github.com/urlflow/urlflow/state/vault"
)

// rotation is one step of a key rotation: what a replica with ring signed, and whether a
// replica with ring verify accepts it.
type rotation struct {
	name         string
	sign, verify string
	accepted     bool
}

// rotations are the steps of the rollout of docs/production.md#keys-and-rotation, with
// old and new key IDs: a key added verify-only, made active, and the old one removed.
var rotations = []rotation{
	{"old key only, new added verify-only", "old", "old,new", true},
	{"new added verify-only on one replica, not yet on another", "old,new", "old", true},
	{"before the new key is active, read after", "old", "new,old", true},
	{"new active, read by a replica where it is still verify-only", "new,old", "old,new", true},
	{"new active, read by the same ring", "new,old", "new,old", true},
	{"new active, read after the old key is removed", "new,old", "new", true},
	{"old active, read after the old key is removed", "old", "new", false},
	{"old active with new verify-only, read after the old key is removed", "old,new", "new", false},
}

// rings returns the key rings of the rotation tests: old and new keys, in the order of
// spec ("new,old").
func rings(t *testing.T) func(spec string) *vault.KeyRing {
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

func TestASessionCookieAndACSRFTokenOutliveAKeyRotationWhileTheirKeyIsInTheRing(t *testing.T) {
	store := browsersession.NewStore(redistest.StartEmbedded(t).Client)
	ring := rings(t)
	for _, tc := range rotations {
		t.Run(tc.name, func(t *testing.T) {
			signer := newSessionStore(store, ring(tc.sign).DeriveAll("session cookie"), false)
			verifier := newSessionStore(store, ring(tc.verify).DeriveAll("session cookie"), false)
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			w := httptest.NewRecorder()
			sess, err := signer.Get(r, signer.name)
			if err != nil {
				t.Fatal(err)
			}
			sess.Values[valueIssuer], sess.Values[valueSubject] = "https://issuer.example", "alice"
			if err := sess.Save(r, w); err != nil {
				t.Fatal(err)
			}
			next := httptest.NewRequest(http.MethodGet, "/", nil)
			for _, c := range w.Result().Cookies() {
				next.AddCookie(c)
			}
			read, err := verifier.Get(next, verifier.name)
			if err != nil {
				t.Fatal(err)
			}
			if signedIn := read.Values[valueSubject] == "alice" && read.ID == sess.ID; signedIn != tc.accepted {
				t.Errorf("cookie signed by [%s], read by [%s]: signed in %v, want %v", tc.sign, tc.verify, signedIn, tc.accepted)
			}

			token := csrfKeys(ring(tc.sign).DeriveAll("csrf")).token(sess.ID)
			if valid := csrfKeys(ring(tc.verify).DeriveAll("csrf")).valid(sess.ID, token); valid != tc.accepted {
				t.Errorf("CSRF token made by [%s], checked by [%s]: valid %v, want %v", tc.sign, tc.verify, valid, tc.accepted)
			}
		})
	}
}
