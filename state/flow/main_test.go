package flow

import (
	"flag"
	"os"
	"testing"
)

// TestMain runs more tests at once than the default of one per CPU, unless -parallel is
// given: every state test starts a Redis Cluster, and a new cluster node waits two seconds
// before it takes writes (Redis' own delay after a start), time spent sleeping, not
// computing.
func TestMain(m *testing.M) {
	flag.Parse()
	parallelGiven := false
	flag.Visit(func(f *flag.Flag) { parallelGiven = parallelGiven || f.Name == "test.parallel" })
	if !parallelGiven {
		flag.Set("test.parallel", "8")
	}
	os.Exit(m.Run())
}
