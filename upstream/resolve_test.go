package upstream

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// testBases are the two shapes of base URL: a bare host and one with a path.
var testBases = []string{"http://127.0.0.1:8080", "http://127.0.0.1:8080/api/v1"}

func parsedBase(t testing.TB, raw string) *url.URL {
	t.Helper()
	return newSlot(t, API{BaseURL: raw, Inject: Injection{Header: "Authorization"}}, nil).API.Base()
}

// hostilePaths try to leave the base; why is what the refusal must say.
var hostilePaths = []struct {
	path string
	why  string
}{
	// Another host.
	{"http://evil.example/x", "not a URL"},
	{"//evil.example/x", "not a URL"},
	{"HTTP://evil.example", "not a URL"},
	{`\\evil.example`, `"\"`},
	{`\evil.example\x`, `"\"`},
	{`/\evil.example`, `"\"`},
	// Another scheme.
	{"https://127.0.0.1:8080/api/v1/x", "not a URL"},
	{"https:x", "not a URL"},
	{"javascript:alert(1)", "not a URL"},
	{"file:///etc/passwd", "not a URL"},
	{"mailto:someone@evil.example", "not a URL"},
	// Dot segments anywhere.
	{"..", "dot segments"},
	{".", "dot segments"},
	{"../x", "dot segments"},
	{"./x", "dot segments"},
	{"a/../../x", "dot segments"},
	{"a/./b", "dot segments"},
	{"/a/..", "dot segments"},
	{"a/.", "dot segments"},
	{"/../x", "dot segments"},
	{"..;/x", "dot segments"},
	{"a/..;jsessionid=1/..;/x", "dot segments"},
	{".;x/y", "dot segments"},
	// Percent-encoded escapes, any case.
	{"%2e%2e/x", "encoded"},
	{"%2E%2E/x", "encoded"},
	{"%2E%2e%2fx", "encoded"},
	{".%2e/x", "encoded"},
	{"%2e./x", "encoded"},
	{"%2e", "encoded"},
	{"..%2fx", "encoded"},
	{"..%2Fx", "encoded"},
	{"%2f%2fevil", "encoded"},
	{"%2F%2Fevil.example/x", "encoded"},
	{"%5c", "encoded"},
	{"a%5Cb", "encoded"},
	{"%252e%252e/x", "encoded"},
	{"%25", "encoded"},
	{"%00", "encoded"},
	// Empty segments.
	{"a//b", "empty path segments"},
	{"///x", "empty path segments"},
	{"a/b//", "empty path segments"},
	// Control characters, literal and encoded.
	{"a\nb", "control characters"},
	{"a\r\nHost: evil.example", "control characters"},
	{"a\tb", "control characters"},
	{"a\x00b", "control characters"},
	{"\x00", "control characters"},
	{"a\x7f", "control characters"},
	{"a/b%0d%0aHost:%20evil.example", "control characters"},
	{"a%0A", "control characters"},
	{"a%7f", "control characters"},
	{"a%09b", "control characters"},
	// A query or a fragment.
	{"a?b=1", `"?"`},
	{"?api_key=mine", `"?"`},
	{"a#b", `"#"`},
	{"#", `"#"`},
	// Not a path at all.
	{"%zz", "not a URL"},
	{"a%2", "not a URL"},
	// Not UTF-8, as is or encoded: overlong "/" and "." that some decoders still read
	// as such, stray bytes, a cut sequence.
	{"..%c0%afx", "UTF-8"},
	{"..%C0%AFx", "UTF-8"},
	{"%c0%af", "UTF-8"},
	{"%c0%ae%c0%ae/x", "UTF-8"},
	{"%C0%AE%C0%AE/x", "UTF-8"},
	{"%e0%80%ae%e0%80%ae/x", "UTF-8"},
	{"users/jos%c0%afe", "UTF-8"},
	{"\xc0\xae\xc0\xae/x", "UTF-8"},
	{"a\xc0\xafb", "UTF-8"},
	{"a\xff", "UTF-8"},
	{"%ff", "UTF-8"},
	{"%E2%80", "UTF-8"},
	{"%ED%A0%80", "UTF-8"}, // a surrogate
}

// nonASCIIPaths are refused unless the API allows characters beyond ASCII; escaped is what
// follows the base's escaped path when it does.
var nonASCIIPaths = []struct {
	path    string
	escaped string
}{
	// Look-alikes of dots and slashes, as is and encoded.
	{"\u2024\u2024/x", "/%E2%80%A4%E2%80%A4/x"}, // ONE DOT LEADER
	{"%E2%80%A4%E2%80%A4/x", "/%E2%80%A4%E2%80%A4/x"},
	{"\uff0e\uff0e/x", "/%EF%BC%8E%EF%BC%8E/x"}, // FULLWIDTH FULL STOP
	{"%EF%BC%8E%EF%BC%8E/x", "/%EF%BC%8E%EF%BC%8E/x"},
	{"\u3002\u3002/x", "/%E3%80%82%E3%80%82/x"},       // IDEOGRAPHIC FULL STOP
	{"%e3%80%82%e3%80%82/x", "/%e3%80%82%e3%80%82/x"}, // as written
	{"a\uff0fb", "/a%EF%BC%8Fb"},                      // FULLWIDTH SOLIDUS
	{"a%EF%BC%8Fb", "/a%EF%BC%8Fb"},
	{"\u2025/x", "/%E2%80%A5/x"}, // TWO DOT LEADER
	// Names.
	{"/users/jos%C3%A9", "/users/jos%C3%A9"},
	{"/users/jos\u00e9", "/users/jos%C3%A9"},
	{"\u00fc/\u65e5\u672c", "/%C3%BC/%E6%97%A5%E6%9C%AC"},
	{"%C3%BC", "/%C3%BC"},
	{"\u00a0", "/%C2%A0"}, // NO-BREAK SPACE
}

func TestResolveRefusesPathsThatLeaveTheBase(t *testing.T) {
	for _, raw := range testBases {
		for _, nonASCII := range []bool{false, true} {
			base := parsedBase(t, raw)
			for _, tt := range hostilePaths {
				got, err := resolve(base, tt.path, nonASCII)
				if !errors.Is(err, ErrOutside) {
					t.Errorf("resolve(%s, %q, %v) = %v, %v; want ErrOutside", raw, tt.path, nonASCII, got, err)
					continue
				}
				msg := err.Error()
				if !strings.HasPrefix(msg, ErrOutside.Error()+": ") || !strings.Contains(msg, tt.why) {
					t.Errorf("resolve(%s, %q, %v): message %q should say why (%s)", raw, tt.path, nonASCII, msg, tt.why)
				}
				if strings.ContainsFunc(msg, func(r rune) bool { return r < 0x20 || r >= 0x7f }) {
					t.Errorf("resolve(%s, %q, %v): message %q carries control characters or characters beyond ASCII", raw, tt.path, nonASCII, msg)
				}
			}
		}
	}
}

func TestResolveRefusesCharactersBeyondASCIIUnlessTheAPIAllowsThem(t *testing.T) {
	for _, raw := range testBases {
		base := parsedBase(t, raw)
		for _, tt := range nonASCIIPaths {
			got, err := resolve(base, tt.path, false)
			if !errors.Is(err, ErrOutside) {
				t.Errorf("resolve(%s, %q, false) = %v, %v; want ErrOutside", raw, tt.path, got, err)
			} else if msg := err.Error(); !strings.Contains(msg, "beyond ASCII") || !strings.Contains(msg, "api.allow_non_ascii_path: true") {
				t.Errorf("resolve(%s, %q, false): message %q should say what is refused and how to allow it", raw, tt.path, msg)
			}
			got, err = resolve(base, tt.path, true)
			if err != nil {
				t.Errorf("resolve(%s, %q, true): %v", raw, tt.path, err)
			} else if want := raw + tt.escaped; got.String() != want {
				t.Errorf("resolve(%s, %q, true) = %s, want %s", raw, tt.path, got, want)
			}
		}
	}
}

// goodPaths stay under the base; escaped is what follows the base's escaped path.
var goodPaths = []struct {
	path    string
	escaped string
}{
	{"users/1", "/users/1"},
	{"/users/1", "/users/1"},
	{"", ""},
	{"/", ""},
	{"evil", "/evil"}, // a child, never the sibling ".../v1evil"
	{"a%20b", "/a%20b"},
	{"a b", "/a%20b"},
	{"a/", "/a/"},
	{"...", "/..."},
	{".well-known/x", "/.well-known/x"},
	{"a..b/c.", "/a..b/c."},
	{"v1/users:batchGet", "/v1/users:batchGet"},
	{"@evil.example", "/@evil.example"},
	{"a+b=c;d,e", "/a+b=c;d,e"},
	{"a;v=1/...;x", "/a;v=1/...;x"},
}

func TestResolveKeepsGoodPaths(t *testing.T) {
	for _, raw := range testBases {
		for _, nonASCII := range []bool{false, true} {
			base := parsedBase(t, raw)
			before := *base
			for _, tt := range goodPaths {
				got, err := resolve(base, tt.path, nonASCII)
				if err != nil {
					t.Errorf("resolve(%s, %q, %v): %v", raw, tt.path, nonASCII, err)
					continue
				}
				if want := raw + tt.escaped; got.String() != want {
					t.Errorf("resolve(%s, %q, %v) = %s, want %s", raw, tt.path, nonASCII, got, want)
				}
				unescaped, _ := url.PathUnescape(tt.escaped)
				if want := base.Path + unescaped; got.Path != want {
					t.Errorf("resolve(%s, %q, %v).Path = %q, want %q", raw, tt.path, nonASCII, got.Path, want)
				}
				if !Within(base, got) {
					t.Errorf("resolve(%s, %q, %v) = %s, not within the base", raw, tt.path, nonASCII, got)
				}
			}
			if *base != before {
				t.Errorf("resolve changed the base: %s, was %s", base, &before)
			}
		}
	}
}

func TestWithinAcceptsOnlyTheBaseAndBelow(t *testing.T) {
	base := parsedBase(t, "http://127.0.0.1:8080/api/v1")
	tests := []struct {
		url    string
		within bool
	}{
		{"http://127.0.0.1:8080/api/v1", true},
		{"http://127.0.0.1:8080/api/v1/", true},
		{"http://127.0.0.1:8080/api/v1/users/1", true},
		{"HTTP://127.0.0.1:8080/api/v1/x", true},
		{"http://127.0.0.1:8080/api/v1evil", false},
		{"http://127.0.0.1:8080/api/v", false},
		{"http://127.0.0.1:8080/api", false},
		{"http://127.0.0.1:8080/", false},
		{"http://127.0.0.1:8080", false},
		{"http://127.0.0.1:8081/api/v1/x", false},
		{"http://127.0.0.1/api/v1/x", false},
		{"http://localhost:8080/api/v1/x", false},
		{"https://127.0.0.1:8080/api/v1/x", false},
		{"http://user:pass@127.0.0.1:8080/api/v1/x", false},
		{"http://127.0.0.1:8080@evil.example/api/v1/x", false},
	}
	for _, tt := range tests {
		u, err := url.Parse(tt.url)
		if err != nil {
			t.Fatal(err)
		}
		if got := Within(base, u); got != tt.within {
			t.Errorf("Within(%s, %s) = %v, want %v", base, tt.url, got, tt.within)
		}
	}
}

func TestCallRefusesPathsThatLeaveTheBaseBeforeSending(t *testing.T) {
	for _, basePath := range []string{"", "/api/v1"} {
		for _, nonASCII := range []bool{false, true} {
			t.Run(fmt.Sprintf("base path %s, allow_non_ascii_path %v", basePath, nonASCII), func(t *testing.T) {
				api := newRecorder(t, nil)
				slot := newSlot(t, API{BaseURL: api.URL + basePath, Inject: Injection{Query: "api_key"}, AllowNonASCIIPath: nonASCII}, nil)
				caller := newCaller(t)
				refused := slices.Clone(hostilePaths)
				if !nonASCII {
					for _, tt := range nonASCIIPaths {
						refused = append(refused, struct{ path, why string }{tt.path, "beyond ASCII"})
					}
				}
				for _, tt := range refused {
					resp, err := caller.Call(context.Background(), slot.API, secret(), Request{Method: "GET", Path: tt.path})
					if !errors.Is(err, ErrOutside) {
						t.Errorf("Call(%q) = %+v, %v; want ErrOutside", tt.path, resp, err)
						continue
					}
					if !strings.Contains(err.Error(), tt.why) {
						t.Errorf("Call(%q): message %q should say why (%s)", tt.path, err, tt.why)
					}
				}
				if got := api.paths(); len(got) != 0 {
					t.Errorf("the API received %q; want nothing", got)
				}
			})
		}
	}
}

func TestCallSendsGoodPathsExactly(t *testing.T) {
	for _, basePath := range []string{"", "/api/v1"} {
		for _, nonASCII := range []bool{false, true} {
			t.Run(fmt.Sprintf("base path %s, allow_non_ascii_path %v", basePath, nonASCII), func(t *testing.T) {
				api := newRecorder(t, nil)
				slot := newSlot(t, API{BaseURL: api.URL + basePath, Inject: Injection{Header: "Authorization"}, AllowNonASCIIPath: nonASCII}, nil)
				caller := newCaller(t)
				paths := slices.Clone(goodPaths)
				if nonASCII {
					paths = append(paths, nonASCIIPaths...)
				}
				for _, tt := range paths {
					before := len(api.received())
					resp, err := caller.Call(context.Background(), slot.API, secret(), Request{Method: "GET", Path: tt.path})
					if err != nil || resp.Status != http.StatusOK {
						t.Errorf("Call(%q) = %+v, %v", tt.path, resp, err)
						continue
					}
					got := api.received()[before:]
					want := basePath + tt.escaped
					if want == "" {
						want = "/"
					}
					if len(got) != 1 || got[0].req.RequestURI != want {
						var uris []string
						for _, r := range got {
							uris = append(uris, r.req.RequestURI)
						}
						t.Errorf("Call(%q): the API received %q, want [%s]", tt.path, uris, want)
					}
				}
			})
		}
	}
}

// FuzzResolve checks the promise of Resolve for any input: it refuses with ErrOutside, or
// gives a URL under the base that a real request would send to the base's host, with no
// segment a server could read as a step up or aside, and that holds only ASCII, or with
// allow_non_ascii_path, only UTF-8.
func FuzzResolve(f *testing.F) {
	for _, tt := range hostilePaths {
		f.Add(tt.path)
	}
	for _, tt := range goodPaths {
		f.Add(tt.path)
	}
	for _, tt := range nonASCIIPaths {
		f.Add(tt.path)
	}
	bases := make([]*url.URL, len(testBases))
	for i, raw := range testBases {
		bases[i] = parsedBase(f, raw)
	}
	f.Fuzz(func(t *testing.T, path string) {
		for _, base := range bases {
			for _, nonASCII := range []bool{false, true} {
				checkResolved(t, base, path, nonASCII)
			}
		}
	})
}

// checkResolved fails t unless resolve(base, path, nonASCII) keeps the promise FuzzResolve
// checks.
func checkResolved(t *testing.T, base *url.URL, path string, nonASCII bool) {
	u, err := resolve(base, path, nonASCII)
	if err != nil {
		if !errors.Is(err, ErrOutside) {
			t.Fatalf("resolve(%s, %q, %v): %v is not ErrOutside", base, path, nonASCII, err)
		}
		return
	}
	if u.Scheme != base.Scheme || u.Host != base.Host || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		t.Fatalf("resolve(%s, %q, %v) = %s: not the base's scheme and host alone", base, path, nonASCII, u)
	}
	if !Within(base, u) {
		t.Fatalf("resolve(%s, %q, %v) = %s: not within the base", base, path, nonASCII, u)
	}
	req, err := http.NewRequest(http.MethodGet, u.String(), nil)
	if err != nil {
		t.Fatalf("resolve(%s, %q, %v) = %s: no request can be built: %v", base, path, nonASCII, u, err)
	}
	if req.URL.Host != base.Host || req.Host != base.Host || !Within(base, req.URL) {
		t.Fatalf("resolve(%s, %q, %v) = %s: a request would go to %s%s", base, path, nonASCII, u, req.Host, req.URL.EscapedPath())
	}
	rest := strings.TrimPrefix(req.URL.EscapedPath(), base.EscapedPath())
	if rest == "" {
		return
	}
	segments := strings.Split(strings.TrimPrefix(rest, "/"), "/")
	for i, seg := range segments {
		s, err := url.PathUnescape(seg)
		if err != nil {
			t.Fatalf("resolve(%s, %q, %v) = %s: segment %q is badly escaped", base, path, nonASCII, u, seg)
		}
		if dots, _, _ := strings.Cut(s, ";"); dots == "." || dots == ".." || strings.ContainsAny(s, "/\\") ||
			strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) ||
			(s == "" && i != len(segments)-1) {
			t.Fatalf("resolve(%s, %q, %v) = %s: segment %q reads as %q to a server", base, path, nonASCII, u, seg, s)
		}
		if !utf8.ValidString(s) {
			t.Fatalf("resolve(%s, %q, %v) = %s: segment %q is not UTF-8", base, path, nonASCII, u, seg)
		}
		if !nonASCII && strings.ContainsFunc(s, func(r rune) bool { return r >= utf8.RuneSelf }) {
			t.Fatalf("resolve(%s, %q, false) = %s: segment %q holds characters beyond ASCII", base, path, u, seg)
		}
	}
}
