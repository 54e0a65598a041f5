package pages

import (
	"net/url"
	"strings"
	"testing"
)

func TestSafeNextKeepsSignInOnThisServer(t *testing.T) {
	for next, want := range map[string]string{
		"/e/ABC":                       "/e/ABC",
		"/e/ABC?x=1":                   "/e/ABC?x=1",
		"":                             "/",
		"//evil.example/x":             "/",
		"https://evil.example":         "/",
		"/\\evil.example":              "/",
		"javascript:alert(1)":          "/",
		"/e/x\r\nLocation: //evil":     "/",
		"e/ABC":                        "/",
		"/" + strings.Repeat("a", 600): "/",
	} {
		if got := safeNext(next); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", next, got, want)
		}
	}
}

// FuzzSafeNext checks that whatever next is, the redirect target stays on this server: a
// browser resolving it against our origin never lands on another host.
func FuzzSafeNext(f *testing.F) {
	for _, seed := range []string{"/e/ABC", "//evil", "/\\evil", "https://x", "/%2F%2Fevil", "/\t/evil"} {
		f.Add(seed)
	}
	base, _ := url.Parse("http://127.0.0.1:8080/auth/login")
	f.Fuzz(func(t *testing.T, next string) {
		got := safeNext(next)
		target, err := base.Parse(got)
		if err != nil {
			t.Fatalf("safeNext(%q) = %q, which does not parse: %v", next, got, err)
		}
		if target.Host != base.Host || target.Scheme != base.Scheme {
			t.Fatalf("safeNext(%q) = %q leaves the server: %s", next, got, target)
		}
	})
}
