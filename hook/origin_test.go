package hook

import (
	"errors"
	"testing"
)

func TestParseOrigin(t *testing.T) {
	for _, tt := range []struct {
		raw, want string
		loopback  bool
	}{
		{"https://auth.example.com/e/x", "https://auth.example.com", false},
		{"HTTPS://Auth.Example.COM.:443", "https://auth.example.com", false},
		{"https://auth.example.com:8443/", "https://auth.example.com:8443", false},
		{"https://bücher.example/x", "https://xn--bcher-kva.example", false},
		{"https://xn--bcher-kva.example/x", "https://xn--bcher-kva.example", false},
		{"https://ＡＵＴＨ.example.com/", "https://auth.example.com", false}, // full-width letters map to ASCII
		{"http://localhost:8080/e", "http://localhost:8080", true},
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080", true},
		{"http://[::1]:8080", "http://[::1]:8080", true},
		{"http://[0:0:0:0:0:0:0:1]:80", "http://[::1]", true},
		{"https://192.0.2.1", "https://192.0.2.1", false},
	} {
		o, err := ParseOrigin(tt.raw)
		if err != nil {
			t.Errorf("ParseOrigin(%q): %v", tt.raw, err)
			continue
		}
		if o.String() != tt.want || o.Loopback() != tt.loopback {
			t.Errorf("ParseOrigin(%q) = %s (loopback %v), want %s (%v)", tt.raw, o, o.Loopback(), tt.want, tt.loopback)
		}
	}
	for _, raw := range []string{
		"", "auth.example.com", "//auth.example.com", "ftp://auth.example.com", "javascript:alert(1)",
		"https:auth.example.com", "https://user@auth.example.com", "https://a:b@auth.example.com",
		"https://auth.example.com:0", "https://auth.example.com:99999", "https://auth.example.com:x",
		"https://auth%2eexample.com", "https://exa mple.com", "https://-bad-.example.com", "https://",
	} {
		if o, err := ParseOrigin(raw); !errors.Is(err, ErrNotAnOrigin) {
			t.Errorf("ParseOrigin(%q) = %s, %v; want ErrNotAnOrigin", raw, o, err)
		}
	}
}

// FuzzParseOrigin: any input is parsed or refused without a panic, and an origin parses
// back to itself.
func FuzzParseOrigin(f *testing.F) {
	for _, s := range []string{"https://auth.example.com/e/x", "http://[::1]:8080", "https://bücher.example",
		"https://user@host", "https://auth.example.com.evil.test", "https://xn--uth-6cd.example.com:8443/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		o, err := ParseOrigin(raw)
		if err != nil {
			return
		}
		again, err := ParseOrigin(o.String())
		if err != nil || again != o {
			t.Fatalf("%q → %s → %s, %v", raw, o, again, err)
		}
	})
}
