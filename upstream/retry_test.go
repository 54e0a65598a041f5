package upstream

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

func TestAnIdempotentRequestIsSentAgainWhenTheAPISaysLater(t *testing.T) {
	caller := newCaller(t)
	var calls atomic.Int32
	api := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		switch n := calls.Add(1); {
		case r.URL.Path == "/busy":
			w.Header().Set("Retry-After", "120") // longer than the API's timeout
			w.WriteHeader(http.StatusServiceUnavailable)
		case n <= 2:
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
		default:
			w.Write([]byte("ok"))
		}
	})
	slot := newSlot(t, API{BaseURL: api.URL, Methods: []string{"GET", "POST"}, Inject: Injection{Header: "X-Key"}}, nil)
	call := func(req Request) *Response {
		t.Helper()
		resp, err := caller.Call(context.Background(), slot.API, secret(), req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}

	if resp := call(Request{Method: "GET", Path: "items", Retries: 3}); resp.Status != http.StatusOK || resp.Attempts != 3 || calls.Load() != 3 {
		t.Errorf("GET with retries: %+v after %d calls, want 200 at the third", resp, calls.Load())
	}
	calls.Store(0)
	if resp := call(Request{Method: "POST", Path: "items", Retries: 3}); resp.Status != http.StatusTooManyRequests || resp.Attempts != 0 || calls.Load() != 1 {
		t.Errorf("POST with retries: %+v after %d calls, want the first answer: POST is not idempotent", resp, calls.Load())
	}
	calls.Store(0)
	if resp := call(Request{Method: "GET", Path: "items"}); resp.Status != http.StatusTooManyRequests || calls.Load() != 1 {
		t.Errorf("GET without retries: %+v after %d calls", resp, calls.Load())
	}
	calls.Store(0)
	start := time.Now()
	if resp := call(Request{Method: "GET", Path: "busy", Retries: 3}); resp.Status != http.StatusServiceUnavailable || calls.Load() != 1 || time.Since(start) > 5*time.Second {
		t.Errorf("a Retry-After past the timeout: %+v after %d calls in %s, want the answer at once", resp, calls.Load(), time.Since(start))
	}
}

func TestRetryAfterIsSecondsOrADateOrABackoff(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	for value, want := range map[string]time.Duration{
		"7":                             7 * time.Second,
		"0":                             0,
		"Thu, 03 Dec 2026 12:00:30 GMT": 30 * time.Second,
		"Thu, 03 Dec 2026 11:00:00 GMT": 0,
		"soon":                          2 * time.Second,
		"9227000000":                    maxRetryWait + time.Second, // would overflow a Duration
		"":                              2 * time.Second,
	} {
		if got := retryAfter(value, now, 2); got != want {
			t.Errorf("Retry-After %q: %s, want %s", value, got, want)
		}
	}
}

// FuzzRetryAfter: whatever an API sends in Retry-After, the wait is never negative, and a
// value that is not a number or a date waits the backoff of its attempt.
func FuzzRetryAfter(f *testing.F) {
	for _, seed := range []string{"", "0", "7", "-1", "99999999999999999999", "Thu, 03 Dec 2026 12:00:30 GMT", "soon"} {
		f.Add(seed, 2)
	}
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, value string, attempt int) {
		attempt = 1 + (attempt%MaxRetries+MaxRetries)%MaxRetries
		if wait := retryAfter(value, now, attempt); wait < 0 {
			t.Fatalf("Retry-After %q: a negative wait %s", value, wait)
		}
	})
}
