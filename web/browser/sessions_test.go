package browser

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/urlflow/urlflow/internal/redistest"
	"github.com/urlflow/urlflow/state/browsersession"
)

func TestSessionCookieIsSecureBehindHTTPS(t *testing.T) {
	store := browsersession.NewStore(redistest.StartEmbedded(t).Client)
	for _, secure := range []bool{true, false} {
		sessions := newSessionStore(store, [][]byte{[]byte(strings.Repeat("k", 32))}, secure)
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		w := httptest.NewRecorder()
		sess, err := sessions.Get(r, sessions.name)
		if err != nil {
			t.Fatal(err)
		}
		sess.Values[valueSubject] = "alice"
		if err := sess.Save(r, w); err != nil {
			t.Fatal(err)
		}
		cookies := w.Result().Cookies()
		if len(cookies) != 1 {
			t.Fatalf("cookies: %v", cookies)
		}
		c := cookies[0]
		if c.Secure != secure || !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Path != "/" ||
			strings.HasPrefix(c.Name, "__Host-") != secure {
			t.Errorf("secure=%v: cookie %+v", secure, c)
		}
		if strings.Contains(c.Value, "alice") {
			t.Error("the cookie carries session data; it must carry only the signed ID")
		}
	}
}
