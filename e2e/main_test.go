// Package e2e tests urlflow as a whole: the real binary (`urlflow dev`) against a real
// redis-server, MCP clients over real HTTP, and headless Chromium as the user.
package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// binary is the urlflow binary built once for all tests.
var binary string

func TestMain(m *testing.M) {
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
	args := []string{"build", "-o", binary}
	if raceEnabled {
		args = append(args, "-race") // the server runs under the race detector too
	}
	build := exec.Command("go", append(args, "../cmd/urlflow")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: build urlflow:", err)
		return 1
	}
	return m.Run()
}
