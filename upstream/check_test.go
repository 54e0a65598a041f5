package upstream

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestCheckPassesOnlyOnTheVerifyStatuses(t *testing.T) {
	tests := []struct {
		name   string
		status []int // verify.status; nil means the default, 200
		answer int
		pass   bool
	}{
		{"200 by default", nil, http.StatusOK, true},
		{"only 200 by default", nil, http.StatusNoContent, false},
		{"401 by default", nil, http.StatusUnauthorized, false},
		{"a listed 200", []int{200, 204}, http.StatusOK, true},
		{"a listed 204", []int{200, 204}, http.StatusNoContent, true},
		{"401", []int{200, 204}, http.StatusUnauthorized, false},
		{"403", []int{200, 204}, http.StatusForbidden, false},
		{"404", []int{200, 204}, http.StatusNotFound, false},
		{"500", []int{200, 204}, http.StatusInternalServerError, false},
		{"a listed 404", []int{404}, http.StatusNotFound, true},
		{"a redirect out of the base", []int{200}, http.StatusFound, false},
	}
	caller := newCaller(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			other := newRecorder(t, nil)
			api := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
				if tt.answer >= 300 && tt.answer < 400 {
					w.Header().Set("Location", other.URL+"/api/v1/me")
				}
				w.WriteHeader(tt.answer)
			})
			slot := newSlot(t, API{BaseURL: api.URL + "/api/v1", Inject: Injection{Query: "api_key"}},
				&Verify{Path: "me", Status: tt.status})
			err := caller.Check(context.Background(), slot.API, slot.Verify, secret())
			if tt.pass {
				if err != nil {
					t.Errorf("Check: %v; want a pass on %d", err, tt.answer)
				}
				return
			}
			if err == nil {
				t.Fatalf("Check passed on %d", tt.answer)
			}
			if !strings.Contains(err.Error(), strconv.Itoa(tt.answer)) {
				t.Errorf("%q should name the status %d", err, tt.answer)
			}
			if l := leaks(err.Error(), injections()[2].forms); len(l) > 0 {
				t.Errorf("%q shows the secret as %q", err, l)
			}
			if got := other.received(); len(got) != 0 {
				t.Errorf("the other listener received %d requests; want none", len(got))
			}
		})
	}
}

func TestCheckSendsTheSecret(t *testing.T) {
	caller := newCaller(t)
	for _, in := range injections() {
		for _, method := range []string{"", "post", "HEAD"} {
			t.Run(in.name+"/"+method, func(t *testing.T) {
				api := newRecorder(t, nil)
				slot := newSlot(t, API{BaseURL: api.URL + "/api/v1", Inject: in.inject},
					&Verify{Method: method, Path: "/me"})
				if err := caller.Check(context.Background(), slot.API, slot.Verify, secret()); err != nil {
					t.Fatalf("Check: %v", err)
				}
				seen := api.received()
				if len(seen) != 1 {
					t.Fatalf("the API received %q; want one request", api.paths())
				}
				r := seen[0].req
				wantMethod := strings.ToUpper(method)
				if wantMethod == "" {
					wantMethod = http.MethodGet
				}
				if r.Method != wantMethod || r.URL.Path != "/api/v1/me" {
					t.Errorf("the API received %s %s, want %s /api/v1/me", r.Method, r.URL.Path, wantMethod)
				}
				if got := in.carried(r); got != in.want {
					t.Errorf("the check carried %q, want %q", got, in.want)
				}
			})
		}
	}
}

func TestCheckTimesOut(t *testing.T) {
	const timeout = 300 * time.Millisecond
	api := newBlockingServer(t, "")
	slot := newSlot(t, API{BaseURL: api.URL, Timeout: timeout, Inject: Injection{Query: "api_key"}}, &Verify{Path: "me"})
	start := time.Now()
	err := newCaller(t).Check(context.Background(), slot.API, slot.Verify, secret())
	elapsed := time.Since(start)
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("Check: %v; want ErrTimeout", err)
	}
	if elapsed < timeout || elapsed > timeout+2*time.Second {
		t.Errorf("gave up after %s; want about %s", elapsed, timeout)
	}
	if l := leaks(err.Error(), injections()[2].forms); len(l) > 0 {
		t.Errorf("%q shows the secret as %q", err, l)
	}
}

func TestCheckRefusesAVerifyPathOutsideTheBase(t *testing.T) {
	api := newRecorder(t, nil)
	slot := newSlot(t, API{BaseURL: api.URL + "/api/v1", Inject: Injection{Header: "Authorization"}}, &Verify{Path: "../admin"})
	if err := newCaller(t).Check(context.Background(), slot.API, slot.Verify, secret()); !errors.Is(err, ErrOutside) {
		t.Errorf("Check: %v; want ErrOutside", err)
	}
	if got := api.paths(); len(got) != 0 {
		t.Errorf("the API received %q; want nothing", got)
	}
}
