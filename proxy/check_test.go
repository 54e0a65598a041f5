package proxy

import (
	"errors"
	"strings"
	"testing"

	"github.com/urlflow/urlflow/upstream"
)

func TestCheckRefusesWhatTheAPICanNeverServe(t *testing.T) {
	t.Parallel()
	slot := newSlot(t, upstream.API{BaseURL: "https://api.example/v1", Methods: []string{"get", "post"},
		Inject: upstream.Injection{Header: "Authorization", Template: "Bearer {secret}"}})
	tests := []struct {
		name string
		req  upstream.Request
		want error // nil: accepted
	}{
		{"an allowed method under the base URL", upstream.Request{Method: "GET", Path: "/users/1"}, nil},
		{"a method in lower case", upstream.Request{Method: "post", Path: "users"}, nil},
		{"the base URL itself", upstream.Request{Method: "GET", Path: ""}, nil},
		{"a method not allowed", upstream.Request{Method: "DELETE", Path: "/users/1"}, upstream.ErrMethod},
		{"an unknown method", upstream.Request{Method: "TRACE", Path: "/"}, upstream.ErrMethod},
		{"a path climbing out", upstream.Request{Method: "GET", Path: "/../admin"}, upstream.ErrOutside},
		{"an encoded dot segment", upstream.Request{Method: "GET", Path: "/%2e%2e/admin"}, upstream.ErrOutside},
		{"an encoded slash", upstream.Request{Method: "GET", Path: "/a%2fb"}, upstream.ErrOutside},
		{"another host", upstream.Request{Method: "GET", Path: "https://evil.example/v1"}, upstream.ErrOutside},
		{"a query in the path", upstream.Request{Method: "GET", Path: "/users?id=1"}, upstream.ErrOutside},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Check(slot.API, tt.req)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Check = %v, want it accepted", err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("Check = %v, want %v", err, tt.want)
			}
			if tt.want == upstream.ErrMethod && !strings.Contains(err.Error(), "allowed: GET, POST") {
				t.Errorf("the refusal %q does not name the methods allowed", err)
			}
		})
	}
}
