// Package e2e tests urlflow as a whole: the real binary (`urlflow dev`) against a real
// redis-server, MCP clients over real HTTP, and headless Chromium as the user.
//
// Every test runs in parallel with the others: each starts its own redis-server and
// urlflow on free ports, and its people get browser contexts of their own in the one
// Chromium the package shares.
package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/urlflow/urlflow/internal/browsertest"
	"github.com/urlflow/urlflow/internal/redistest"
)

// binary is the urlflow binary built once for all tests; exampleBinary the example
// delegating server (examples/weather); goRunnerBinary the Go package's runner of the
// delegation conformance suite (clients/conformance/gorunner).
var binary, exampleBinary, goRunnerBinary string

func TestMain(m *testing.M) {
	// Six at a time: the tests wait on processes (urlflow, Redis, Chromium, Node) more
	// than they compute, and each runs several of them.
	redistest.SetParallel(6)
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "urlflow-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "urlflow")
	args := []string{"build"}
	if raceEnabled {
		args = append(args, "-race") // the server runs under the race detector too
	}
	exampleBinary = filepath.Join(dir, "weather")
	goRunnerBinary = filepath.Join(dir, "gorunner")
	for out, pkg := range map[string]string{binary: "../cmd/urlflow", exampleBinary: "../examples/weather", goRunnerBinary: "../clients/conformance/gorunner"} {
		build := exec.Command("go", append(args[:len(args):len(args)], "-o", out, pkg)...)
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: build %s: %v\n", pkg, err)
			return 1
		}
	}
	defer closeBrowser()
	defer stopSharedIssuer()
	return m.Run()
}

// browser is the package's one Chromium, started by the first test that needs it.
var browser struct {
	once sync.Once
	b    *browsertest.Browser
	err  error
}

// sharedBrowser returns the package's Chromium, starting it on first use. Each person
// the tests create in it (newPerson) has a browser context of its own.
func sharedBrowser(t testing.TB) *browsertest.Browser {
	t.Helper()
	browser.once.Do(func() { browser.b, browser.err = browsertest.Launch() })
	if browser.err != nil {
		t.Fatalf("browsertest: %v", browser.err)
	}
	return browser.b
}

func closeBrowser() {
	if browser.b != nil {
		browser.b.Close()
	}
}
