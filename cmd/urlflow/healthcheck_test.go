package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestHealthcheckExitsZeroOnlyWhenReadyzAnswers200: urlflow healthcheck, the image's
// HEALTHCHECK, exits 0 when /readyz answers 200, and 1 with one line saying why otherwise.
func TestHealthcheckExitsZeroOnlyWhenReadyzAnswers200(t *testing.T) {
	ready := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(`{"keys":"ok","redis":"ok"}`))
	}))
	defer ready.Close()
	notReady := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte("{\"keys\":\"ok\",\n\"redis\":\"unavailable\"}\n"))
	}))
	defer notReady.Close()
	closed := freeAddr(t) // nothing listens there

	for _, tt := range []struct {
		name       string
		args       []string
		env        map[string]string
		wantStatus int
		wantStderr string // a substring of the one line; empty means no output at all
	}{
		{"ready at --url", []string{"--url", ready.URL + "/readyz"}, nil, 0, ""},
		{"ready at URLFLOW_ADDR", nil, map[string]string{"URLFLOW_ADDR": ready.Listener.Addr().String()}, 0, ""},
		{"ready at --addr", []string{"--addr", ready.Listener.Addr().String()}, nil, 0, ""},
		{"ready on every interface's port", nil, map[string]string{"URLFLOW_ADDR": ":" + port(t, ready.Listener.Addr().String())}, 0, ""},
		{"503", []string{"--url", notReady.URL + "/readyz"}, nil, 1,
			`urlflow: not ready: ` + notReady.URL + `/readyz answered 503 Service Unavailable: {"keys":"ok", "redis":"unavailable"}`},
		{"nothing listening", []string{"--url", "http://" + closed + "/readyz"}, nil, 1, "urlflow: not ready: "},
		{"nothing listening at URLFLOW_ADDR", nil, map[string]string{"URLFLOW_ADDR": closed}, 1, "connection refused"},
		{"port 0", nil, map[string]string{"URLFLOW_ADDR": "127.0.0.1:0"}, 1, `URLFLOW_ADDR: want the host:port urlflow serve listens on, e.g. :8080, got "127.0.0.1:0" (or give --url)`},
		{"not a URL", []string{"--url", "127.0.0.1:8080/readyz"}, nil, 2, "urlflow healthcheck: --url: want an http or https URL"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append([]string{"healthcheck"}, tt.args...)
			status := report(run(context.Background(), args, envOf(tt.env), strings.NewReader(""), &stdout, &stderr), &stderr)
			if status != tt.wantStatus {
				t.Errorf("status %d, want %d (stderr %q)", status, tt.wantStatus, stderr.String())
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout %q, want nothing", stdout.String())
			}
			switch lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n"); {
			case tt.wantStderr == "" && stderr.Len() != 0:
				t.Errorf("stderr %q, want nothing", stderr.String())
			case tt.wantStderr != "" && !strings.Contains(lines[0], tt.wantStderr):
				t.Errorf("stderr %q, want a first line with %q", stderr.String(), tt.wantStderr)
			case tt.wantStatus == 1 && len(lines) != 1:
				t.Errorf("stderr %q, want one line", stderr.String())
			}
		})
	}
}

// freeAddr returns a loopback address where nothing listens.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// port returns the port of addr.
func port(t *testing.T, addr string) string {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
