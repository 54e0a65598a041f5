package browser

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/urlflow/urlflow/internal/redistest"
	"github.com/urlflow/urlflow/state/browsersession"
	"github.com/urlflow/urlflow/state/vault/vaulttest"
)

func TestASessionCookieAndACSRFTokenOutliveAKeyRotationWhileTheirKeyIsInTheRing(t *testing.T) {
	store := browsersession.NewStore(redistest.StartEmbedded(t).Client)
	ring := vaulttest.Rings(t)
	for _, tc := range vaulttest.Rotations {
		t.Run(tc.Name, func(t *testing.T) {
			signer := newSessionStore(store, ring(tc.Sign).DeriveAll("session cookie"), false)
			verifier := newSessionStore(store, ring(tc.Verify).DeriveAll("session cookie"), false)
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
			if signedIn := read.Values[valueSubject] == "alice" && read.ID == sess.ID; signedIn != tc.Accepted {
				t.Errorf("cookie signed by [%s], read by [%s]: signed in %v, want %v", tc.Sign, tc.Verify, signedIn, tc.Accepted)
			}

			token := csrfKeys(ring(tc.Sign).DeriveAll("csrf")).token(sess.ID)
			if valid := csrfKeys(ring(tc.Verify).DeriveAll("csrf")).valid(sess.ID, token); valid != tc.Accepted {
				t.Errorf("CSRF token made by [%s], checked by [%s]: valid %v, want %v", tc.Sign, tc.Verify, valid, tc.Accepted)
			}
		})
	}
}
