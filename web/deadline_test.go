package web

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// bodyDeadline is the time a request has to deliver its body in these tests.
const bodyDeadline = 500 * time.Millisecond

// A client that sends its body slowly holds a connection until the body deadline, not for
// as long as it likes: on every route that reads a body the request fails at the deadline
// and the connection closes.
func TestABodyThatArrivesTooSlowlyIsCutAtTheDeadline(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{bodyReadTimeout: bodyDeadline})
	e := f.newFlow(t, "alice")
	form := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
	bearer := func(name string) http.Header {
		return http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + f.token(t, name)}}
	}
	for _, tc := range []struct {
		name   string
		path   string
		header http.Header
		status int // the answer, when it reaches the client
	}{
		{"the secret form", "/e/" + e.ID + "/secret", form, http.StatusRequestTimeout},
		{"the sign-in form", "/auth/login", form, http.StatusRequestTimeout},
		{"the API", "/api/v1/elicitations/" + e.ID + "/retry", bearer("alice"), http.StatusRequestTimeout},
		{"MCP", "/mcp", bearer("alice"), http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			status, held := f.trickle(t, tc.path, tc.header)
			if held < bodyDeadline || held > bodyDeadline+3*time.Second {
				t.Errorf("the server held the connection for %s, want about %s", held, bodyDeadline)
			}
			// The answer may be lost: the server closes while the client still sends, and
			// the connection is reset.
			if status != 0 && status != tc.status {
				t.Errorf("answered %d, want %d", status, tc.status)
			}
		})
	}
	if logs := f.logs.String(); strings.Contains(logs, "store unavailable") || strings.Contains(logs, "request failed") {
		t.Errorf("a slow body was logged as a failure of urlflow:\n%s", logs)
	}
}

// trickle posts to path with header and a body of 200 bytes that arrives one byte every
// 50 ms (10 seconds in all), as a slow client sends it, and returns the status of the
// server's answer (0 if none arrived) and how long the server kept the connection open
// (until it closed or reset it).
func (f *fixture) trickle(t *testing.T, path string, header http.Header) (int, time.Duration) {
	t.Helper()
	const length = 200
	host := strings.TrimPrefix(f.URL, "http://")
	conn, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var head strings.Builder
	fmt.Fprintf(&head, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n", path, host, length)
	header.Write(&head)
	head.WriteString("\r\n")
	start := time.Now()
	if _, err := io.WriteString(conn, head.String()); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for range length {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if _, err := conn.Write([]byte{'a'}); err != nil {
				return
			}
		}
	}()
	conn.SetReadDeadline(start.Add(bodyDeadline + 5*time.Second))
	r := bufio.NewReader(conn)
	status := 0
	if resp, err := http.ReadResponse(r, nil); err == nil {
		status = resp.StatusCode
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	// The server closes the connection: it cannot read the next request behind a body that
	// did not arrive. A reset is a close too.
	_, err = io.Copy(io.Discard, r)
	held := time.Since(start)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the connection was still open after %s", held)
	}
	return status, held
}

// Once a body has arrived its deadline no longer counts: answers that take longer than it
// (an MCP event stream, a tool call that waits, a secret checked with a slow API) are not
// cut.
func TestAnswersOutlastTheBodyDeadline(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{bodyReadTimeout: bodyDeadline})
	f.mcp.streamFor.Store(int64(4 * bodyDeadline))
	for _, tc := range []struct {
		name string
		r    request
	}{
		{"an MCP post", request{method: http.MethodPost, path: "/mcp", token: f.token(t, "alice"),
			form: url.Values{"sent": {"with its length"}}}},
		{"an MCP post sent in chunks", request{method: http.MethodPost, path: "/mcp", token: f.token(t, "alice"),
			body: strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`), contentType: "application/json"}},
		{"an MCP stream", request{method: http.MethodGet, path: "/mcp", token: f.token(t, "alice")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := f.send(t, nil, tc.r)
			if got.Status != http.StatusOK || !strings.HasSuffix(got.Body, "data: done\n\n") {
				t.Errorf("answered %d, ending %q, want the whole stream", got.Status, got.Body[max(0, len(got.Body)-40):])
			}
		})
	}

	t.Run("a secret checked with a slow API", func(t *testing.T) {
		t.Parallel()
		e := f.newFlow(t, "alice")
		b := f.browser(t, "alice")
		form := b.continueToForm(e.ID)
		f.whileVerifying(func(*http.Request) { time.Sleep(3 * bodyDeadline) })

		b.submit(e.ID, form, validKey).want(t, http.StatusOK, "Demo API key saved")

		if _, got := f.storedSecret(t, "alice", demoSlot); got != validKey {
			t.Errorf("stored %q, want the key", got)
		}
	})
}
