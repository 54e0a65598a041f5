package upstream

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/urlflow/urlflow/state"
)

// testSecret has characters that URL escaping, base64 and JSON each change, so that every
// form of it differs from the plain value.
const testSecret = "s3cr3t/tok+en= x&y"

func secret() state.Secret { return state.NewSecret(testSecret) }

// newSlot returns the slot as the catalog prepares it: defaults applied, base URL parsed.
func newSlot(t testing.TB, api API, verify *Verify) *testSlot {
	t.Helper()
	problems := api.Prepare("")
	if verify != nil {
		problems = append(problems, verify.Prepare()...)
	}
	if len(problems) > 0 {
		t.Fatalf("the test API is invalid: %v", problems)
	}
	return &testSlot{API: &api, Verify: verify}
}

// testSlot is an API and its verification, as a secret slot carries them.
type testSlot struct {
	API    *API
	Verify *Verify
}

// newCaller returns a Caller with a transport of its own, so that tests share no connections.
func newCaller(t *testing.T) *Caller {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	return New(tr)
}

// injection is one way a slot puts the secret into a request, with where a server finds it.
type injection struct {
	name   string
	inject Injection
	// carried returns what the server received where the secret belongs.
	carried func(r *http.Request) string
	// want is what carried must return.
	want string
	// forms are the ways the secret can show in what the request carried or the API echoes.
	forms []string
}

func injections() []injection {
	basic := func(r *http.Request) string {
		user, pass, ok := r.BasicAuth()
		if !ok {
			return ""
		}
		return user + ":" + pass
	}
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	forms := []string{
		testSecret,
		url.QueryEscape(testSecret),
		url.PathEscape(testSecret),
		b64(testSecret),
		base64.RawURLEncoding.EncodeToString([]byte(testSecret)),
	}
	with := func(extra ...string) []string { return append(append([]string{}, forms...), extra...) }
	return []injection{
		{
			name:    "header with template",
			inject:  Injection{Header: "Authorization", Template: "Bearer {secret}"},
			carried: func(r *http.Request) string { return r.Header.Get("Authorization") },
			want:    "Bearer " + testSecret,
			forms:   with("Bearer " + testSecret),
		},
		{
			name:    "header without template",
			inject:  Injection{Header: "X-Api-Key"},
			carried: func(r *http.Request) string { return r.Header.Get("X-Api-Key") },
			want:    testSecret,
			forms:   with(),
		},
		{
			name:    "query parameter",
			inject:  Injection{Query: "api_key"},
			carried: func(r *http.Request) string { return r.URL.Query().Get("api_key") },
			want:    testSecret,
			forms:   with("api_key=" + url.QueryEscape(testSecret)),
		},
		{
			name:    "basic with the secret as password",
			inject:  Injection{Basic: &BasicAuth{Username: "user", Password: "{secret}"}},
			carried: basic,
			want:    "user:" + testSecret,
			forms:   with(b64("user:" + testSecret)),
		},
		{
			name:    "basic with the secret as username",
			inject:  Injection{Basic: &BasicAuth{Username: "{secret}"}},
			carried: basic,
			want:    testSecret + ":",
			forms:   with(b64(testSecret + ":")),
		},
	}
}

// received is one request a recorder saw.
type received struct {
	req  *http.Request
	body string
}

// recorder is a real server on loopback that keeps every request it receives, then answers
// with its handler (which can read the body again).
type recorder struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []received
}

func newRecorder(t *testing.T, h http.HandlerFunc) *recorder {
	t.Helper()
	rec := &recorder{}
	rec.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rec.mu.Lock()
		rec.reqs = append(rec.reqs, received{req: r.Clone(context.Background()), body: string(body)})
		rec.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		if h != nil {
			h(w, r)
		}
	}))
	t.Cleanup(rec.Close)
	return rec
}

// received returns the requests seen so far.
func (rec *recorder) received() []received {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]received(nil), rec.reqs...)
}

// paths returns the escaped paths of the requests seen so far.
func (rec *recorder) paths() []string {
	var out []string
	for _, r := range rec.received() {
		out = append(out, r.req.URL.EscapedPath())
	}
	return out
}

// newBlockingServer returns a server that answers nothing until the test ends: its handler
// sends written (when non-empty), then waits on a channel closed at cleanup, before the
// server closes (Close waits for handlers), or until the client goes away.
func newBlockingServer(t *testing.T, written string) *recorder {
	t.Helper()
	release := make(chan struct{})
	rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		if written != "" {
			io.WriteString(w, written)
			w.(http.Flusher).Flush()
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	t.Cleanup(func() { close(release) })
	return rec
}

// leaks returns the forms of the secret found in s.
func leaks(s string, forms []string) []string {
	var found []string
	for _, f := range forms {
		if strings.Contains(s, f) {
			found = append(found, f)
		}
	}
	return found
}
