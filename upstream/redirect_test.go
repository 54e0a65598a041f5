package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

var redirectCodes = []int{
	http.StatusMovedPermanently,
	http.StatusFound,
	http.StatusSeeOther,
	http.StatusTemporaryRedirect,
	http.StatusPermanentRedirect,
}

// redirectTargets are where the API at base /api/v1 redirects a call to /api/v1/start.
// location gets the API's host:port and the other listener's URL.
var redirectTargets = []struct {
	name     string
	location func(host, other string) string
	// landing is the escaped path the followed redirect reaches; "" means not followed.
	landing string
}{
	{"another listener, same path", func(_, other string) string { return other + "/api/v1/landing" }, ""},
	{"another listener, the secret in the location", func(_, other string) string {
		return other + "/steal?k=" + url.QueryEscape(testSecret) + "&b=" + url.PathEscape(testSecret)
	}, ""},
	{"another listener, scheme-relative", func(_, other string) string { return "//" + strings.TrimPrefix(other, "http://") + "/api/v1/landing" }, ""},
	{"same host, outside the base", func(string, string) string { return "/elsewhere" }, ""},
	{"same host, the base's sibling", func(string, string) string { return "/api/v1evil" }, ""},
	{"same host, the base's parent", func(string, string) string { return "/api/" }, ""},
	{"same host, climbing with dots", func(string, string) string { return "/api/v1/../../elsewhere" }, ""},
	{"same host, climbing relatively", func(string, string) string { return "../elsewhere" }, ""},
	{"same host, climbing with encoded dots", func(string, string) string { return "/api/v1/%2e%2e/%2E%2E/elsewhere" }, ""},
	{"same host, climbing with encoded slashes", func(string, string) string { return "/api/v1/..%2f..%2felsewhere" }, ""},
	{"same host, climbing with backslashes", func(string, string) string { return `/api/v1/..\..\elsewhere` }, ""},
	{"same host, climbing with path parameters", func(string, string) string { return "/api/v1/..;/..;/elsewhere" }, ""},
	{"same host, empty segments", func(string, string) string { return "/api/v1//elsewhere" }, ""},
	{"same host, climbing with look-alike dots", func(string, string) string { return "/api/v1/%E2%80%A4%E2%80%A4/%EF%BC%8E%EF%BC%8E/elsewhere" }, ""},
	{"same host, climbing with overlong dots and slashes", func(string, string) string { return "/api/v1/%c0%ae%c0%ae%c0%af..%c0%afelsewhere" }, ""},
	{"same host, another name", func(host, _ string) string {
		_, port, _ := strings.Cut(host, ":")
		return "http://localhost:" + port + "/api/v1/landing"
	}, ""},
	{"same host, another scheme", func(host, _ string) string { return "https://" + host + "/api/v1/landing" }, ""},
	{"same host, with user info", func(host, _ string) string { return "http://user:pass@" + host + "/api/v1/landing" }, ""},
	{"within the base, relative", func(string, string) string { return "landing" }, "/api/v1/landing"},
	{"within the base, absolute path", func(string, string) string { return "/api/v1/deeper/landing" }, "/api/v1/deeper/landing"},
	{"within the base, absolute URL", func(host, _ string) string { return "http://" + host + "/api/v1/landing?page=2" }, "/api/v1/landing"},
	{"within the base, the base itself", func(string, string) string { return "/api/v1" }, "/api/v1"},
}

func TestSecretNeverFollowsARedirectOutOfTheBase(t *testing.T) {
	caller := newCaller(t)
	for _, in := range injections() {
		for _, code := range redirectCodes {
			for _, target := range redirectTargets {
				t.Run(fmt.Sprintf("%s/%d/%s", in.name, code, target.name), func(t *testing.T) {
					other := newRecorder(t, nil)
					api := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
						if r.URL.Path == "/api/v1/start" {
							// Not http.Redirect: it would clean the dots and slashes away.
							w.Header().Set("Location", target.location(r.Host, other.URL))
							w.WriteHeader(code)
							return
						}
						io.WriteString(w, "landed")
					})
					location := target.location(api.Listener.Addr().String(), other.URL)
					slot := newSlot(t, API{BaseURL: api.URL + "/api/v1", Inject: in.inject}, nil)

					resp, err := caller.Call(context.Background(), slot.API, secret(), Request{Method: "GET", Path: "start"})
					if err != nil {
						t.Fatalf("Call: %v", err)
					}
					if got := other.received(); len(got) != 0 {
						t.Errorf("the other listener received %d requests; want none", len(got))
					}
					seen := api.received()
					if len(seen) == 0 || in.carried(seen[0].req) != in.want {
						t.Fatalf("the API did not receive the call with the secret")
					}
					if target.landing == "" {
						if resp.Status != code {
							t.Errorf("status %d, want the redirect's %d", resp.Status, code)
						}
						if resp.Redirected == "" || resp.Headers["Location"] != resp.Redirected {
							t.Errorf("Redirected = %q, Location = %q; want the redirect target in both", resp.Redirected, resp.Headers["Location"])
						}
						if l := leaks(resp.Redirected, in.forms); len(l) > 0 {
							t.Errorf("Redirected = %q shows the secret as %q", resp.Redirected, l)
						}
						if !strings.Contains(location, testSecret) && !strings.Contains(location, url.QueryEscape(testSecret)) && resp.Redirected != location {
							t.Errorf("Redirected = %q, want %q", resp.Redirected, location)
						}
						if got := api.paths(); len(got) != 1 {
							t.Errorf("the API received %q; want only the call", got)
						}
						return
					}
					if resp.Status != http.StatusOK || resp.Body != "landed" || resp.Redirected != "" {
						t.Errorf("got %d %q (Redirected %q); want the redirect followed", resp.Status, resp.Body, resp.Redirected)
					}
					if len(seen) != 2 {
						t.Fatalf("the API received %q; want the call and the redirect", api.paths())
					}
					landed := seen[1].req
					if landed.URL.EscapedPath() != target.landing {
						t.Errorf("the redirect reached %s, want %s", landed.URL.EscapedPath(), target.landing)
					}
					if got := in.carried(landed); got != in.want {
						t.Errorf("the redirect carried %q, want %q", got, in.want)
					}
				})
			}
		}
	}
}

func TestAtMostFiveRedirectsAreFollowed(t *testing.T) {
	tests := []struct {
		hops       int
		wantStatus int
		// wantSeen is how many requests reach the API.
		wantSeen int
	}{
		{hops: 5, wantStatus: http.StatusOK, wantSeen: 6},
		{hops: 6, wantStatus: http.StatusFound, wantSeen: 6},
		{hops: 20, wantStatus: http.StatusFound, wantSeen: 6},
	}
	caller := newCaller(t)
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.hops)+" hops", func(t *testing.T) {
			in := injections()[0]
			api := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
				n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/api/v1/hop/"))
				if n < tt.hops {
					http.Redirect(w, r, strconv.Itoa(n+1), http.StatusFound)
					return
				}
				io.WriteString(w, "done")
			})
			slot := newSlot(t, API{BaseURL: api.URL + "/api/v1", Inject: in.inject}, nil)
			resp, err := caller.Call(context.Background(), slot.API, secret(), Request{Method: "GET", Path: "hop/0"})
			if err != nil {
				t.Fatalf("Call: %v", err)
			}
			if resp.Status != tt.wantStatus {
				t.Errorf("status %d, want %d", resp.Status, tt.wantStatus)
			}
			seen := api.received()
			if len(seen) != tt.wantSeen {
				t.Errorf("the API received %q; want %d requests", api.paths(), tt.wantSeen)
			}
			for _, r := range seen {
				if got := in.carried(r.req); got != in.want {
					t.Errorf("%s carried %q, want %q", r.req.URL.Path, got, in.want)
				}
			}
		})
	}
}

func TestMethodsOutsideTheSlotAreRefusedBeforeSending(t *testing.T) {
	api := newRecorder(t, nil)
	slot := newSlot(t, API{BaseURL: api.URL, Methods: []string{"get", "POST"}, Inject: Injection{Query: "api_key"}}, nil)
	caller := newCaller(t)
	for _, method := range []string{"DELETE", "PUT", "PATCH", "HEAD", "OPTIONS", "TRACE", "CONNECT", "", "GET ", "GET /evil", "delete"} {
		resp, err := caller.Call(context.Background(), slot.API, secret(), Request{Method: method, Path: "x"})
		if !errors.Is(err, ErrMethod) {
			t.Errorf("Call with method %q = %+v, %v; want ErrMethod", method, resp, err)
			continue
		}
		if !strings.Contains(err.Error(), "GET, POST") {
			t.Errorf("method %q: %q should name the methods allowed", method, err)
		}
	}
	if got := api.paths(); len(got) != 0 {
		t.Errorf("the API received %q; want nothing", got)
	}
	for _, method := range []string{"GET", "get", "Post"} {
		if _, err := caller.Call(context.Background(), slot.API, secret(), Request{Method: method, Path: "x"}); err != nil {
			t.Errorf("Call with method %q: %v", method, err)
		}
	}
	var methods []string
	for _, r := range api.received() {
		methods = append(methods, r.req.Method)
	}
	if got := strings.Join(methods, " "); got != "GET GET POST" {
		t.Errorf("the API received methods %q, want GET GET POST", got)
	}
}
