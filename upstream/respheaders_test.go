package upstream

import (
	"context"
	"errors"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
)

func TestARequestSelectsResponseHeadersWithinTheAllowList(t *testing.T) {
	api := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Etag", `"v1"`)
		w.Header().Set("Link", `<https://api.example/x?page=2>; rel="next"`)
		w.Header().Set("X-Ratelimit-Remaining", "41")
		w.Header().Set("X-Ratelimit-Reset", "1700000000")
		w.Header().Set("X-Request-Id", "req-1")
		w.Header().Set("Set-Cookie", "session=abc")
		w.Header().Set("X-Echo", "key "+testSecret)
		io.WriteString(w, `{}`)
	})
	slot := newSlot(t, API{BaseURL: api.URL, Inject: Injection{Header: "Authorization"},
		AllowResponseHeaders: []string{"link", "ETag", "x-ratelimit-*", "X-Echo", "*"}}, nil)
	strict := newSlot(t, API{BaseURL: api.URL, Inject: Injection{Header: "Authorization"},
		AllowResponseHeaders: []string{"Link", "X-Ratelimit-*"}}, nil)
	tests := []struct {
		name string
		api  *API
		want []string
		// wantHeaders are the names returned; nil when the request is refused.
		wantHeaders []string
	}{
		{"none: the API's own", slot.API, nil, []string{"Content-Type"}},
		{"names, any case", slot.API, []string{"LINK", "etag"}, []string{"Content-Type", "Etag", "Link"}},
		{"a prefix", slot.API, []string{"X-RateLimit-*"}, []string{"Content-Type", "X-Ratelimit-Remaining", "X-Ratelimit-Reset"}},
		{"a name absent from the answer", slot.API, []string{"Link", "X-Ratelimit-Used"}, []string{"Content-Type", "Link"}},
		{"every header but Set-Cookie", slot.API, []string{"*"},
			[]string{"Content-Length", "Content-Type", "Date", "Etag", "Link", "X-Echo", "X-Ratelimit-Remaining", "X-Ratelimit-Reset", "X-Request-Id"}},
		{"Set-Cookie, not named in the allow-list", slot.API, []string{"Set-Cookie"}, nil},
		{"a narrower prefix", strict.API, []string{"X-Ratelimit-Res*"}, []string{"Content-Type", "X-Ratelimit-Reset"}},
		{"a wider prefix", strict.API, []string{"X-*"}, nil},
		{"a name outside", strict.API, []string{"Etag"}, nil},
		{"not a name", strict.API, []string{"Link:"}, nil},
		{"an empty entry", strict.API, []string{""}, nil},
	}
	caller := newCaller(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := caller.Call(context.Background(), tt.api, secret(), Request{Method: "GET", Path: "x", ResponseHeaders: tt.want})
			if tt.wantHeaders == nil {
				if !errors.Is(err, ErrResponseHeader) {
					t.Fatalf("asking for %q: err %v, want ErrResponseHeader", tt.want, err)
				}
				for _, w := range tt.want {
					if w != "" && strings.Contains(err.Error(), w) {
						t.Errorf("the error quotes what the request asked for: %v", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Call: %v", err)
			}
			if got := slices.Sorted(maps.Keys(resp.Headers)); !slices.Equal(got, tt.wantHeaders) {
				t.Errorf("asking for %q returned %q, want %q", tt.want, got, tt.wantHeaders)
			}
			if v, ok := resp.Headers["X-Echo"]; ok && strings.Contains(v, testSecret) {
				t.Errorf("a selected header shows the secret: %q", v)
			}
		})
	}
	if n := len(api.received()); n != 6 {
		t.Errorf("the API got %d requests; refused ones must send nothing (want 6)", n)
	}
}

func TestSetCookieIsReturnedOnlyWhenNamed(t *testing.T) {
	api := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Set-Cookie", "session=abc")
	})
	slot := newSlot(t, API{BaseURL: api.URL, Inject: Injection{Header: "Authorization"},
		AllowResponseHeaders: []string{"Set-Cookie"}}, nil)
	for _, want := range [][]string{{"Set-Cookie"}, {"set-cookie"}} {
		resp, err := newCaller(t).Call(context.Background(), slot.API, secret(), Request{Method: "GET", Path: "x", ResponseHeaders: want})
		if err != nil {
			t.Fatalf("Call: %v", err)
		}
		if resp.Headers["Set-Cookie"] != "session=abc" {
			t.Errorf("asking for %q returned %q", want, resp.Headers)
		}
	}
}

func TestAllowResponseHeadersIsChecked(t *testing.T) {
	for _, bad := range []string{"Link:", "", "a b*", "é*"} {
		api := API{BaseURL: "https://api.example", Inject: Injection{Header: "Authorization"}, AllowResponseHeaders: []string{bad}}
		if problems := api.Prepare(""); len(problems) == 0 {
			t.Errorf("allow_response_headers %q was accepted", bad)
		}
	}
	api := API{BaseURL: "https://api.example", Inject: Injection{Header: "Authorization"}, ResponseHeaders: []string{"Bad Name"}}
	if problems := api.Prepare(""); len(problems) == 0 {
		t.Errorf("response_headers %q was accepted", api.ResponseHeaders)
	}
}

func TestAtMostSoManyResponseHeadersAreAskedFor(t *testing.T) {
	slot := newSlot(t, API{BaseURL: "https://api.example", Inject: Injection{Header: "Authorization"}, AllowResponseHeaders: []string{"*"}}, nil)
	want := make([]string, MaxSelectedResponseHeaders+1)
	for i := range want {
		want[i] = "X-" + strings.Repeat("a", i+1)
	}
	if err := CheckOwnParts(slot.API, Request{ResponseHeaders: want}); !errors.Is(err, ErrResponseHeader) {
		t.Errorf("%d names: err %v, want ErrResponseHeader", len(want), err)
	}
	if err := CheckOwnParts(slot.API, Request{ResponseHeaders: want[1:]}); err != nil {
		t.Errorf("%d names: %v", len(want)-1, err)
	}
}

// A pattern that covers another selects every header the other selects: the allow-list
// check cannot be passed by a request that then selects more.
func FuzzResponseHeaderPatterns(f *testing.F) {
	for _, seed := range [][3]string{{"X-Ratelimit-*", "x-ratelimit-re*", "X-Ratelimit-Reset"}, {"*", "Set-Cookie", "Set-Cookie"},
		{"Link", "link", "Link"}, {"X-*", "*", "Set-Cookie2"}, {"Set-Cookie", "set-*", "Set-Cookie"}} {
		f.Add(seed[0], seed[1], seed[2])
	}
	f.Fuzz(func(t *testing.T, allowed, asked, name string) {
		p, okP := canonicalPattern(allowed)
		q, okQ := canonicalPattern(asked)
		if !okP || !okQ || !p.covers(q) {
			return
		}
		if q.matches(name) && !p.matches(name) {
			t.Errorf("%q covers %q, which selects %q; %q does not", p, q, name, p)
		}
		if _, prefix := q.prefix(); prefix && cookieHeader(name) && q.matches(name) {
			t.Errorf("the prefix %q selects %q", q, name)
		}
	})
}
