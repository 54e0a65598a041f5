package mcp

import (
	"flag"
	"os"
	"testing"
)

// TestMain runs more tests at once than the default of one per CPU, unless -parallel is
// given: every test starts its own redis-server and then mostly waits (for Redis, for a
// client's answer, for an injected wait), time spent sleeping, not computing.
func TestMain(m *testing.M) {
	flag.Parse()
	parallelGiven := false
	flag.Visit(func(f *flag.Flag) { parallelGiven = parallelGiven || f.Name == "test.parallel" })
	if !parallelGiven {
		flag.Set("test.parallel", "8")
	}
	os.Exit(m.Run())
}
