package upstream

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

func TestCompressedBodyIsBoundedOnceDecompressed(t *testing.T) {
	t.Parallel()
	const limit = 4096
	// Random bytes do not compress: compressed, a body of exactly the limit (what the
	// returned Content-Type leaves of it) is larger than the limit, and must come back all
	// the same.
	random := make([]byte, limit-len("Content-Type")-len("application/octet-stream"))
	rand.Read(random)
	tests := []struct {
		name     string
		coding   string
		compress func([]byte) []byte
		body     []byte
		wantErr  error
	}{
		{"gzip, exactly the limit", "gzip", gzipped, random, nil},
		{"gzip, one byte over", "gzip", gzipped, []byte(strings.Repeat("a", limit+1)), ErrTooLarge},
		{"gzip, a thousand times over", "gzip", gzipped, []byte(strings.Repeat("a", 1000*limit)), ErrTooLarge},
		{"deflate, exactly the limit", "deflate", zlibbed, random, nil},
		{"deflate, one byte over", "deflate", zlibbed, []byte(strings.Repeat("a", limit+1)), ErrTooLarge},
		{"raw deflate, a thousand times over", "deflate", deflated, []byte(strings.Repeat("a", 1000*limit)), ErrTooLarge},
		{"br, exactly the limit", "br", brotlied, random, nil},
		{"br, one byte over", "br", brotlied, []byte(strings.Repeat("a", limit+1)), ErrTooLarge},
		{"br, a thousand times over", "br", brotlied, []byte(strings.Repeat("a", 1000*limit)), ErrTooLarge},
		{"gzip then br, one byte over", "gzip, br", func(b []byte) []byte { return brotlied(gzipped(b)) },
			[]byte(strings.Repeat("a", limit+1)), ErrTooLarge},
	}
	caller := newCaller(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			compressed := tt.compress(tt.body)
			api := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Encoding", tt.coding)
				w.Header().Set("Content-Type", "application/octet-stream")
				w.Write(compressed)
			})
			slot := newSlot(t, API{BaseURL: api.URL, MaxResponseBytes: limit, Inject: Injection{Header: "Authorization"}}, nil)
			resp, err := caller.Call(context.Background(), slot.API, secret(), Request{Method: "GET", Path: "file"})
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Call = %+v, %v; want %v", resp, err, tt.wantErr)
				}
				if !strings.Contains(err.Error(), fmt.Sprint(limit)) {
					t.Errorf("%q should name the limit", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Call (%d bytes compressed): %v", len(compressed), err)
			}
			if got := responseBytes(t, resp); string(got) != string(tt.body) {
				t.Errorf("got %d bytes, want the %d decompressed", len(got), len(tt.body))
			}
		})
	}
}

func TestBodyUrlflowCannotDecodeIsNotReturned(t *testing.T) {
	t.Parallel()
	text := []byte("your key: " + testSecret)
	tests := []struct {
		name     string
		codings  []string
		body     []byte
		wantText string // in the error
	}{
		{"zstd", []string{"zstd"}, text, `Content-Encoding "zstd"`},
		{"compress", []string{"compress"}, text, `Content-Encoding "compress"`},
		{"gzip, then zstd", []string{"gzip, zstd"}, gzipped(text), `"zstd"`},
		{"a coding that quotes the secret", []string{"x-" + testSecret}, text, `"x-` + Redacted + `"`},
		{"four layers", []string{"gzip", "gzip", "gzip", "gzip"}, gzipped(gzipped(gzipped(gzipped(text)))), "4 content codings"},
		{"gzip that is not", []string{"gzip"}, text, "does not decode as gzip"},
		{"gzip cut short", []string{"gzip"}, gzipped(text)[:20], "does not decode as gzip"},
		{"br that is not", []string{"br"}, text, "does not decode as br"},
		{"deflate that is not", []string{"deflate"}, []byte{0xff, 0xff, 0xff}, "does not decode as deflate"},
	}
	caller := newCaller(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			api := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
				for _, c := range tt.codings {
					w.Header().Add("Content-Encoding", c)
				}
				w.Write(tt.body)
			})
			slot := newSlot(t, API{BaseURL: api.URL, Inject: Injection{Header: "Authorization"}}, nil)
			resp, err := caller.Call(context.Background(), slot.API, secret(), Request{Method: "GET", Path: "x"})
			if !errors.Is(err, ErrEncoding) {
				t.Fatalf("Call = %+v, %v; want ErrEncoding", resp, err)
			}
			if resp != nil {
				t.Errorf("Call returned %+v with its error; want nothing", resp)
			}
			msg := err.Error()
			if !strings.Contains(msg, "encoding urlflow cannot check") || !strings.Contains(msg, tt.wantText) {
				t.Errorf("%q should say that urlflow cannot check the encoding, and %q", msg, tt.wantText)
			}
			if found := revealed([]byte(msg), testSecret); len(found) > 0 {
				t.Errorf("%q shows the secret %s", msg, strings.Join(found, ", "))
			}
		})
	}
}

func TestCompressionIsUndoneByUpstreamNotByTheTransport(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		method     string
		status     int
		codings    []string
		body       []byte
		wantBody   string
		wantHeader string // Content-Encoding in the Response, "" for none
	}{
		{"gzip asked for and sent", "GET", 200, []string{"gzip"}, gzipped([]byte("hello")), "hello", ""},
		{"identity", "GET", 200, []string{"identity"}, []byte("hello"), "hello", "identity"},
		{"nothing", "GET", 200, nil, []byte("hello"), "hello", ""},
		{"an empty gzip body", "GET", 200, []string{"gzip"}, nil, "", ""},
		{"no content, gzip", "GET", 204, []string{"gzip"}, nil, "", ""},
		{"HEAD, gzip", "HEAD", 200, []string{"gzip"}, nil, "", ""},
	}
	caller := newCaller(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			api := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
				for _, c := range tt.codings {
					w.Header().Add("Content-Encoding", c)
				}
				if tt.body != nil {
					w.Header().Set("Content-Length", fmt.Sprint(len(tt.body)))
				}
				w.WriteHeader(tt.status)
				w.Write(tt.body)
			})
			slot := newSlot(t, API{BaseURL: api.URL, Methods: []string{"GET", "HEAD"}, Inject: Injection{Header: "Authorization"},
				ResponseHeaders: []string{"Content-Encoding", "Content-Length"}}, nil)
			resp, err := caller.Call(context.Background(), slot.API, secret(), Request{Method: tt.method, Path: "x"})
			if err != nil {
				t.Fatalf("Call: %v", err)
			}
			if resp.Body != tt.wantBody || resp.Status != tt.status {
				t.Errorf("got %d %q, want %d %q", resp.Status, resp.Body, tt.status, tt.wantBody)
			}
			// The headers describe the body returned: a coding undone is no longer there.
			if got := resp.Headers["Content-Encoding"]; got != tt.wantHeader {
				t.Errorf("Content-Encoding %q, want %q", got, tt.wantHeader)
			}
			if got := api.received()[0].req.Header.Values("Accept-Encoding"); len(got) != 1 || got[0] != "gzip" {
				t.Errorf("the API received Accept-Encoding %q, want [gzip] as net/http sends it", got)
			}
		})
	}
}
