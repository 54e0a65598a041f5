package resend

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/urlflow/urlflow/internal/buildinfo"
	"github.com/urlflow/urlflow/internal/tracing"
	"github.com/urlflow/urlflow/internal/tracingtest"
)

// closingServer answers the first request on each connection and resets the connection
// when a second request arrives on it, as a server does that closes an idle keep-alive
// connection the moment the client sends on it. With resetAll it resets every request.
type closingServer struct {
	*httptest.Server
	mu       sync.Mutex
	served   map[string]bool // remote address → a request was answered on it
	bodies   []string        // every body read, answered or not
	resetAll bool
}

func startClosingServer(t *testing.T, resetAll bool) *closingServer {
	s := &closingServer{served: map[string]bool{}, resetAll: resetAll}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.bodies = append(s.bodies, string(body))
		reset := s.resetAll || s.served[r.RemoteAddr]
		s.served[r.RemoteAddr] = true
		s.mu.Unlock()
		if !reset {
			io.WriteString(w, "ok "+string(body))
			return
		}
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		conn.(*net.TCPConn).SetLinger(0)
		conn.Close()
	}))
	t.Cleanup(s.Close)
	return s
}

// read returns the bodies the server has read so far.
func (s *closingServer) read() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.bodies)
}

func (s *closingServer) post(t *testing.T, c *http.Client, body string) (string, error) {
	t.Helper()
	resp, err := c.Post(s.URL+"/token", "application/x-www-form-urlencoded", strings.NewReader(body))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func TestAPostOnAConnectionTheServerClosedIsSentAgain(t *testing.T) {
	s := startClosingServer(t, false)
	c := Client()
	if got, err := s.post(t, c, "code=first"); err != nil || got != "ok code=first" {
		t.Fatalf("first POST: %q, %v", got, err)
	}
	got, err := s.post(t, c, "code=second")
	if err != nil || got != "ok code=second" {
		t.Fatalf("second POST, on the connection the server closes: %q, %v; want it answered on a new connection", got, err)
	}
	want := []string{"code=first", "code=second", "code=second"}
	if read := s.read(); !slices.Equal(read, want) {
		t.Errorf("the server read %q, want %q (the second body whole on both tries)", read, want)
	}
}

func TestWithoutResendThatPostFails(t *testing.T) {
	// The failure the package exists for, shown with net/http alone.
	s := startClosingServer(t, false)
	c := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	if _, err := s.post(t, c, "code=first"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.post(t, c, "code=second"); err == nil {
		t.Fatal("net/http sent the POST again by itself; this package would not be needed")
	}
}

func TestAFailureOnANewConnectionIsNotSentAgain(t *testing.T) {
	s := startClosingServer(t, true)
	if _, err := s.post(t, Client(), "code=once"); err == nil {
		t.Fatal("the server reset the connection, yet the POST succeeded")
	}
	if got := s.read(); len(got) != 1 {
		t.Errorf("the server read %q, want one request: a new connection's failure is the server's answer", got)
	}
}

func TestABodyThatCannotBeReadAgainIsNotSentAgain(t *testing.T) {
	s := startClosingServer(t, false)
	c := Client()
	if _, err := s.post(t, c, "code=first"); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/token", io.NopCloser(strings.NewReader("code=stream")))
	if _, err := c.Do(req); err == nil {
		t.Fatal("a body without GetBody was sent again")
	}
	if got := s.read(); len(got) != 2 {
		t.Errorf("the server read %q, want two requests", got)
	}
}

// With tracing on, each request to an authorization server is a client span, and the
// server is not sent the trace context. (Not parallel: it turns tracing on for the process.)
func TestCallsToAuthorizationServersAreSpansWithoutTraceContext(t *testing.T) {
	exp := tracingtest.Record(t)
	var sent, agent string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sent, agent = r.Header.Get("traceparent"), r.Header.Get("User-Agent")
	}))
	defer srv.Close()
	ctx, span := tracing.Tracer().Start(context.Background(), "sign-in")
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/token", strings.NewReader("code=x"))
	resp, err := Client().Do(req)
	span.End()
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if sent != "" {
		t.Errorf("the authorization server received traceparent %q", sent)
	}
	if agent != buildinfo.UserAgent() {
		t.Errorf("User-Agent %q, want %q", agent, buildinfo.UserAgent())
	}
	spans := exp.GetSpans()
	if len(spans) != 2 || spans[0].Name != "POST" || spans[0].Parent.SpanID() != span.SpanContext().SpanID() {
		t.Errorf("spans %v; want the request's POST under the caller's span", spans)
	}
}
