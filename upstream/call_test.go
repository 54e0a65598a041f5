package upstream

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/urlflow/urlflow/internal/buildinfo"
)

func TestSecretIsInjectedWhereTheSlotSays(t *testing.T) {
	caller := newCaller(t)
	query := url.Values{"q": {"needle"}, "a b": {"c&d=e/ü"}}
	for _, in := range injections() {
		t.Run(in.name, func(t *testing.T) {
			api := newRecorder(t, nil)
			slot := newSlot(t, API{BaseURL: api.URL + "/api/v1", Inject: in.inject}, nil)
			if _, err := caller.Call(context.Background(), slot.API, secret(), Request{Method: "GET", Path: "users/1", Query: query}); err != nil {
				t.Fatalf("Call: %v", err)
			}
			seen := api.received()
			if len(seen) != 1 {
				t.Fatalf("the API received %q; want one request", api.paths())
			}
			r := seen[0].req
			if got := in.carried(r); got != in.want {
				t.Errorf("the API received %q, want %q", got, in.want)
			}
			if ua := r.Header.Get("User-Agent"); ua != buildinfo.UserAgent() {
				t.Errorf("User-Agent %q, want %q", ua, buildinfo.UserAgent())
			}
			if r.URL.Path != "/api/v1/users/1" {
				t.Errorf("path %q, want /api/v1/users/1", r.URL.Path)
			}
			wantKeys := slices.Sorted(maps.Keys(query))
			if in.inject.Query != "" {
				wantKeys = append(wantKeys, in.inject.Query)
				slices.Sort(wantKeys)
			}
			got := r.URL.Query()
			if keys := slices.Sorted(maps.Keys(got)); !slices.Equal(keys, wantKeys) {
				t.Errorf("query keys %q, want %q", keys, wantKeys)
			}
			for k, v := range query {
				if !slices.Equal(got[k], v) {
					t.Errorf("query %q = %q, want %q", k, got[k], v)
				}
			}
			// The secret is where the slot says and nowhere else.
			for name, values := range r.Header {
				if name == in.inject.Header || (in.inject.Basic != nil && name == "Authorization") {
					continue
				}
				if l := leaks(strings.Join(values, ", "), in.forms); len(l) > 0 {
					t.Errorf("header %s carries the secret as %q", name, l)
				}
			}
			if in.inject.Query == "" {
				if l := leaks(r.URL.RawQuery, in.forms); len(l) > 0 {
					t.Errorf("the query carries the secret as %q", l)
				}
			}
		})
	}
}

func TestCallerCannotSetTheSecretsQueryParameter(t *testing.T) {
	api := newRecorder(t, nil)
	slot := newSlot(t, API{BaseURL: api.URL, Inject: Injection{Query: "api_key"}}, nil)
	resp, err := newCaller(t).Call(context.Background(), slot.API, secret(),
		Request{Method: "GET", Path: "x", Query: url.Values{"api_key": {"mine"}, "q": {"1"}}})
	if err == nil {
		t.Fatalf("Call = %+v; want a refusal", resp)
	}
	if !strings.Contains(err.Error(), `"api_key"`) {
		t.Errorf("%q should name the parameter", err)
	}
	if l := leaks(err.Error(), injections()[2].forms); len(l) > 0 {
		t.Errorf("%q shows the secret", err)
	}
	if got := api.paths(); len(got) != 0 {
		t.Errorf("the API received %q; want nothing", got)
	}
}

func TestBodyIsSentWithItsContentType(t *testing.T) {
	tests := []struct {
		body        string
		contentType string // "" means none
	}{
		{`{"name":"x","n":[1,2]}`, "application/json"},
		{`[1, 2]`, "application/json"},
		{`"text"`, "application/json"},
		{` 42 `, "application/json"},
		{`hello`, "text/plain; charset=utf-8"},
		{`{"name":`, "text/plain; charset=utf-8"},
		{"a=1&b=2", "text/plain; charset=utf-8"},
		{"", ""},
	}
	api := newRecorder(t, nil)
	slot := newSlot(t, API{BaseURL: api.URL, Methods: []string{"POST", "PUT"}, Inject: Injection{Header: "Authorization"}}, nil)
	caller := newCaller(t)
	for _, tt := range tests {
		before := len(api.received())
		if _, err := caller.Call(context.Background(), slot.API, secret(), Request{Method: "PUT", Path: "things", Body: tt.body}); err != nil {
			t.Errorf("Call with body %q: %v", tt.body, err)
			continue
		}
		seen := api.received()[before:]
		if len(seen) != 1 {
			t.Fatalf("the API received %d requests; want one", len(seen))
		}
		if seen[0].body != tt.body || seen[0].req.Method != "PUT" {
			t.Errorf("the API received %s %q, want PUT %q", seen[0].req.Method, seen[0].body, tt.body)
		}
		if got := seen[0].req.Header.Get("Content-Type"); got != tt.contentType {
			t.Errorf("body %q sent as %q, want %q", tt.body, got, tt.contentType)
		}
	}
}

func TestResponseSizeIsBounded(t *testing.T) {
	const limit = 1024
	// The body has what the returned Content-Type leaves of the limit.
	const room = limit - len("Content-Type") - len("text/plain")
	tests := []struct {
		name    string
		size    int
		chunked bool
		wantErr error
	}{
		{"empty", 0, false, nil},
		{"under the limit", room - 1, false, nil},
		{"exactly at the limit", room, false, nil},
		{"exactly at the limit, chunked", room, true, nil},
		{"one byte over", room + 1, false, ErrTooLarge},
		{"one byte over, chunked", room + 1, true, ErrTooLarge},
		{"far over", 4 << 20, true, ErrTooLarge},
	}
	caller := newCaller(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := strings.Repeat("a", tt.size)
			api := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/plain")
				if !tt.chunked {
					w.Header().Set("Content-Length", fmt.Sprint(len(body)))
				}
				half := len(body) / 2
				io.WriteString(w, body[:half])
				w.(http.Flusher).Flush()
				io.WriteString(w, body[half:])
			})
			slot := newSlot(t, API{BaseURL: api.URL, MaxResponseBytes: limit, Inject: Injection{Query: "api_key"}}, nil)
			resp, err := caller.Call(context.Background(), slot.API, secret(), Request{Method: "GET", Path: "big"})
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Call = %d bytes, %v; want %v", len(resp.Body), err, tt.wantErr)
				}
				if !strings.Contains(err.Error(), fmt.Sprint(limit)) {
					t.Errorf("%q should name the limit", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Call: %v", err)
			}
			if resp.Body != body {
				t.Errorf("got %d bytes, want all %d", len(resp.Body), len(body))
			}
		})
	}
}

func TestSlowAPITimesOutWithinTheSlotsTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	tests := []struct {
		name    string
		written string
	}{
		{"no answer at all", ""},
		{"half an answer", "the beginning of a body"},
	}
	caller := newCaller(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := newBlockingServer(t, tt.written)
			slot := newSlot(t, API{BaseURL: api.URL, Timeout: timeout, Inject: Injection{Header: "Authorization"}}, nil)
			start := time.Now()
			resp, err := caller.Call(context.Background(), slot.API, secret(), Request{Method: "GET", Path: "slow"})
			elapsed := time.Since(start)
			if !errors.Is(err, ErrTimeout) {
				t.Fatalf("Call = %+v, %v; want ErrTimeout", resp, err)
			}
			if elapsed < timeout || elapsed > timeout+2*time.Second {
				t.Errorf("gave up after %s; want about %s", elapsed, timeout)
			}
			if !strings.Contains(err.Error(), timeout.String()) {
				t.Errorf("%q should name the timeout", err)
			}
		})
	}
}

// closedPort returns the address of a loopback port that nothing listens on.
func closedPort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// newRequestLineEcho starts a server that is not HTTP: it answers each request with the
// request's own first line, which the client reports as a malformed response.
func newRequestLineEcho(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, _ := bufio.NewReader(c).ReadString('\n')
				io.WriteString(c, line+"\r\n")
			}()
		}
	}()
	return "http://" + l.Addr().String()
}

func TestErrorsNeverShowTheSecretOrTheQuery(t *testing.T) {
	tests := []struct {
		name    string
		base    func(t *testing.T) string
		wantErr error
		// echoes is true when the API's answer, in the message, repeats the request line.
		echoes bool
	}{
		{"unreachable", func(t *testing.T) string { return "http://" + closedPort(t) }, ErrUnreachable, false},
		{"not HTTP, echoing the request", newRequestLineEcho, ErrUnreachable, true},
		{"too slow", func(t *testing.T) string { return newBlockingServer(t, "").URL }, ErrTimeout, false},
		{"too large", func(t *testing.T) string {
			return newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, strings.Repeat("a", 2048))
			}).URL
		}, ErrTooLarge, false},
	}
	caller := newCaller(t)
	for _, in := range injections() {
		for _, tt := range tests {
			t.Run(in.name+"/"+tt.name, func(t *testing.T) {
				slot := newSlot(t, API{BaseURL: tt.base(t) + "/api/v1", Timeout: 300 * time.Millisecond, MaxResponseBytes: 1024, Inject: in.inject}, nil)
				resp, err := caller.Call(context.Background(), slot.API, secret(),
					Request{Method: "GET", Path: "users/1", Query: url.Values{"q": {"needle"}}})
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Call = %+v, %v; want %v", resp, err, tt.wantErr)
				}
				var unreachable *UnreachableError
				if errors.Is(err, ErrUnreachable) && (!errors.As(err, &unreachable) || unreachable.Detail == "") {
					t.Errorf("%v does not carry what the network said for the pages (UnreachableError)", err)
				}
				msg := err.Error()
				if l := leaks(msg, in.forms); len(l) > 0 {
					t.Errorf("%q shows the secret as %q", msg, l)
				}
				// The caller's own query may come back inside an echoed request line; the
				// secret may not.
				if strings.Contains(msg, "needle") && !tt.echoes {
					t.Errorf("%q shows the query string", msg)
				}
				if strings.Contains(msg, slot.API.Base().Host) {
					t.Errorf("%q shows the API's address", msg)
				}
			})
		}
	}
}

// newEcho returns a handler that answers, as an API that repeats what it gets might, with
// the request (line, headers, body) in its body, every given form of the secret after it,
// the secret in the selected header X-Echo and in the unselected X-Other.
func newEcho(forms []string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var b strings.Builder
		fmt.Fprintf(&b, "%s %s %s\n", r.Method, r.RequestURI, r.Proto)
		for _, name := range slices.Sorted(maps.Keys(r.Header)) {
			fmt.Fprintf(&b, "%s: %s\n", name, strings.Join(r.Header[name], ", "))
		}
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(&b, "\n%s\n", body)
		for _, f := range forms {
			fmt.Fprintf(&b, "form: %s\n", f)
		}
		// An API error in JSON, which escapes some characters of the secret.
		quoted, _ := json.Marshal(map[string]string{"error": "invalid key " + testSecret})
		fmt.Fprintf(&b, "%s\n", quoted)
		w.Header().Set("X-Echo", "key="+testSecret)
		w.Header().Set("X-Other", testSecret)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, b.String())
	}
}

func TestResponseIsRedacted(t *testing.T) {
	caller := newCaller(t)
	for _, in := range injections() {
		t.Run(in.name, func(t *testing.T) {
			api := newRecorder(t, newEcho(in.forms))
			slot := newSlot(t, API{
				BaseURL: api.URL, Methods: []string{"POST"}, Inject: in.inject,
				ResponseHeaders: []string{"x-echo", "content-type"},
			}, nil)
			resp, err := caller.Call(context.Background(), slot.API, secret(),
				Request{Method: "POST", Path: "echo", Query: url.Values{"q": {"needle"}}, Body: `{"hello":"world"}`})
			if err != nil {
				t.Fatalf("Call: %v", err)
			}
			forms := append(slices.Clone(in.forms), jsonEscaped(testSecret))
			if l := leaks(resp.Body, forms); len(l) > 0 {
				t.Errorf("the body shows the secret as %q:\n%s", l, resp.Body)
			}
			for name, v := range resp.Headers {
				if l := leaks(v, forms); len(l) > 0 {
					t.Errorf("header %s = %q shows the secret as %q", name, v, l)
				}
			}
			if got := strings.Count(resp.Body, Redacted); got < len(in.forms)+1 {
				t.Errorf("the body shows %s %d times, want at least %d:\n%s", Redacted, got, len(in.forms)+1, resp.Body)
			}
			if !strings.Contains(resp.Body, `{"hello":"world"}`) || !strings.Contains(resp.Body, "q=needle") {
				t.Errorf("the body lost what was not secret:\n%s", resp.Body)
			}
			if resp.BodyEncoding != "text" || resp.Status != http.StatusOK {
				t.Errorf("status %d, encoding %q; want 200, text", resp.Status, resp.BodyEncoding)
			}
			wantHeaders := map[string]string{"X-Echo": "key=" + Redacted, "Content-Type": "text/plain; charset=utf-8"}
			if !maps.Equal(resp.Headers, wantHeaders) {
				t.Errorf("headers %q, want %q", resp.Headers, wantHeaders)
			}
		})
	}
}

func jsonEscaped(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

func TestOnlyTheSlotsResponseHeadersAreReturned(t *testing.T) {
	tests := []struct {
		selected []string
		want     []string
	}{
		{nil, []string{"Content-Type"}},
		{[]string{"x-ratelimit-remaining"}, []string{"X-Ratelimit-Remaining"}},
		{[]string{"Content-Type", "ETag", "X-Missing"}, []string{"Content-Type", "Etag"}},
	}
	api := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Etag", `"v1"`)
		w.Header().Set("X-Ratelimit-Remaining", "41")
		w.Header().Set("Set-Cookie", "session=abc")
		io.WriteString(w, `{}`)
	})
	caller := newCaller(t)
	for _, tt := range tests {
		slot := newSlot(t, API{BaseURL: api.URL, Inject: Injection{Header: "Authorization"}, ResponseHeaders: tt.selected}, nil)
		resp, err := caller.Call(context.Background(), slot.API, secret(), Request{Method: "GET", Path: "x"})
		if err != nil {
			t.Fatalf("Call: %v", err)
		}
		if got := slices.Sorted(maps.Keys(resp.Headers)); !slices.Equal(got, tt.want) {
			t.Errorf("selecting %q returned headers %q, want %q", tt.selected, got, tt.want)
		}
	}
}

func TestBinaryResponseComesBackBase64AndRedacted(t *testing.T) {
	in := injections()[3] // basic: the most forms
	raw := "\xff\xfe\x00" + testSecret + "\x80" + strings.Join(in.forms, "\x00") + "\xc3"
	api := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		io.WriteString(w, raw)
	})
	slot := newSlot(t, API{BaseURL: api.URL, Inject: in.inject}, nil)
	resp, err := newCaller(t).Call(context.Background(), slot.API, secret(), Request{Method: "GET", Path: "file"})
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	if resp.BodyEncoding != "base64" {
		t.Fatalf("encoding %q, want base64", resp.BodyEncoding)
	}
	body, err := base64.StdEncoding.DecodeString(resp.Body)
	if err != nil {
		t.Fatalf("the body is not base64: %v", err)
	}
	if utf8.Valid(body) {
		t.Errorf("the decoded body is text; want the binary bytes")
	}
	if l := leaks(string(body), in.forms); len(l) > 0 {
		t.Errorf("the body shows the secret as %q", l)
	}
	if got := strings.Count(string(body), Redacted); got != len(in.forms)+1 {
		t.Errorf("the body shows %s %d times, want %d", Redacted, got, len(in.forms)+1)
	}
	if !strings.HasPrefix(string(body), "\xff\xfe\x00"+Redacted+"\x80") {
		t.Errorf("the bytes around the secret changed: %q", body)
	}
}
