package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

func TestSelectedHeadersCountAgainstMaxResponseBytes(t *testing.T) {
	const limit = 1024
	// Every answer has Content-Type: text/plain, 12+10 bytes of the budget.
	const contentType = len("Content-Type") + len("text/plain")
	tests := []struct {
		name string
		// limit is the slot's max_response_bytes; 0 means the default, 1 MiB.
		limit    int64
		selected []string
		// header sets the API's headers besides Content-Type.
		header  func(h http.Header)
		status  int
		body    int
		wantErr bool
	}{
		{"small headers and body", limit, []string{"Content-Type", "X-Big"},
			func(h http.Header) { h.Set("X-Big", "1") }, 200, 100, false},
		{"headers and body exactly at the limit", limit, []string{"Content-Type", "X-Big"},
			func(h http.Header) { h.Set("X-Big", strings.Repeat("h", limit-500-contentType-len("X-Big"))) }, 200, 500, false},
		{"headers and body one byte over", limit, []string{"Content-Type", "X-Big"},
			func(h http.Header) { h.Set("X-Big", strings.Repeat("h", limit-500-contentType-len("X-Big")+1)) }, 200, 500, true},
		{"a body of the limit and the Content-Type", limit, nil, nil, 200, limit, true},
		{"a selected header alone over", limit, []string{"Content-Type", "X-Big"},
			func(h http.Header) { h.Set("X-Big", strings.Repeat("h", limit)) }, 200, 0, true},
		{"a 2 MiB selected header under the default 1 MiB", 0, []string{"Content-Type", "X-Big"},
			func(h http.Header) { h.Set("X-Big", strings.Repeat("h", 2<<20)) }, 200, 10, true},
		{"several lines of one header", limit, []string{"Content-Type", "X-Big"}, func(h http.Header) {
			for range 3 {
				h.Add("X-Big", strings.Repeat("h", 400))
			}
		}, 200, 0, true},
		{"several headers", limit, []string{"Content-Type", "X-A", "X-B"}, func(h http.Header) {
			h.Set("X-A", strings.Repeat("a", 500))
			h.Set("X-B", strings.Repeat("b", 500))
		}, 200, 0, true},
		{"a header not selected does not count", limit, []string{"Content-Type"},
			func(h http.Header) { h.Set("X-Other", strings.Repeat("o", 4*limit)) }, 200, limit - contentType, false},
		{"the Location of a redirect urlflow did not follow", limit, []string{"Content-Type"},
			func(h http.Header) { h.Set("Location", "http://elsewhere.example/"+strings.Repeat("l", limit)) }, 302, 0, true},
		{"a short Location", limit, []string{"Content-Type"},
			func(h http.Header) { h.Set("Location", "http://elsewhere.example/x") }, 302, 0, false},
	}
	caller := newCaller(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/plain")
				if tt.header != nil {
					tt.header(w.Header())
				}
				w.WriteHeader(tt.status)
				io.WriteString(w, strings.Repeat("b", tt.body))
			})
			slot := newSlot(t, API{BaseURL: api.URL, MaxResponseBytes: tt.limit, ResponseHeaders: tt.selected,
				Inject: Injection{Header: "Authorization"}}, nil)
			resp, err := caller.Call(context.Background(), slot.API, secret(), Request{Method: "GET", Path: "x"})
			if tt.wantErr {
				if !errors.Is(err, ErrTooLarge) {
					t.Fatalf("Call = %d header bytes, %d body bytes, %v; want ErrTooLarge", headerBytes(resp), len(resp.Body), err)
				}
				if !strings.Contains(err.Error(), fmt.Sprint(slot.API.MaxResponseBytes)) {
					t.Errorf("%q should name the limit", err)
				}
				if len(err.Error()) > 200 {
					t.Errorf("the message has %d bytes; it should not quote the headers", len(err.Error()))
				}
				return
			}
			if err != nil {
				t.Fatalf("Call: %v", err)
			}
			want := http.Header{}
			if tt.header != nil {
				tt.header(want)
			}
			for _, name := range tt.selected {
				if v := want.Get(name); v != "" && resp.Headers[name] != v {
					t.Errorf("header %s has %d bytes, want all %d", name, len(resp.Headers[name]), len(v))
				}
			}
			if len(resp.Body) != tt.body {
				t.Errorf("got %d bytes of body, want all %d", len(resp.Body), tt.body)
			}
		})
	}
}

// headerBytes returns the size of resp's headers by the rule of max_response_bytes, or 0
// for no response.
func headerBytes(resp *Response) int {
	if resp == nil {
		return 0
	}
	n := 0
	for k, v := range resp.Headers {
		n += len(k) + len(v)
	}
	return n
}

func TestResponseHeadersAreBoundedAsTheyAreRead(t *testing.T) {
	huge := func(w http.ResponseWriter, r *http.Request) {
		// Not selected, and less than max_response_bytes: only the transport's bound sees it.
		// HTTP/2 counts a little differently, and allows a little more.
		w.Header().Set("X-Huge", strings.Repeat("h", ResponseHeaderLimit+1024))
		io.WriteString(w, "ok")
	}
	// In HTTP/2 a repeated header costs a byte or two on the wire (HPACK's dynamic
	// table), and is as long as the others once decoded.
	repeated := func(w http.ResponseWriter, r *http.Request) {
		for range ResponseHeaderLimit / 2000 * 2 {
			w.Header().Add("X-Repeated", strings.Repeat("r", 2000))
		}
		io.WriteString(w, "ok")
	}
	small := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Fair", strings.Repeat("h", ResponseHeaderLimit-1024))
		io.WriteString(w, "ok")
	}
	const all, one = "its headers, selected or not, are over", "one of its headers is longer than"
	tests := []struct {
		name  string
		h     http.HandlerFunc
		http2 bool
		// why is what the refusal says; "" means no refusal.
		why string
	}{
		{"HTTP/1.1, over", huge, false, all},
		{"HTTP/2, over", huge, true, one},
		{"HTTP/1.1, over in many lines", repeated, false, all},
		{"HTTP/2, over in many lines", repeated, true, all},
		{"HTTP/1.1, under", small, false, ""},
		{"HTTP/2, under", small, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var proto atomic.Int32
			api := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				proto.Store(int32(r.ProtoMajor))
				tt.h(w, r)
			}))
			tr := newTransport()
			if tt.http2 {
				api.EnableHTTP2 = true
				api.StartTLS()
				tr.TLSClientConfig = api.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
			} else {
				api.Start()
			}
			t.Cleanup(api.Close)
			t.Cleanup(tr.CloseIdleConnections)
			slot := newSlot(t, API{BaseURL: api.URL, MaxResponseBytes: MaxResponseBytes, Inject: Injection{Header: "Authorization"}}, nil)
			resp, err := New(tr).Call(context.Background(), slot.API, secret(), Request{Method: "GET", Path: "x"})
			if want := map[bool]int32{false: 1, true: 2}[tt.http2]; proto.Load() != want {
				t.Errorf("the API was called with HTTP/%d, want HTTP/%d", proto.Load(), want)
			}
			if tt.why == "" {
				if err != nil || resp.Body != "ok" {
					t.Fatalf("Call = %+v, %v; want ok", resp, err)
				}
				return
			}
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("Call = %+v, %v; want ErrTooLarge", resp, err)
			}
			if !strings.Contains(err.Error(), fmt.Sprint(ResponseHeaderLimit)) || !strings.Contains(err.Error(), tt.why) {
				t.Errorf("%q should name the limit and say %q", err, tt.why)
			}
		})
	}
}
