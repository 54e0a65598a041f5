package redistest

import (
	"flag"
	"strconv"
)

// SetParallel makes a package's tests run n at a time, unless -parallel was given. Call it
// from TestMain, before m.Run. Tests that start redis-servers (a new Cluster node waits two
// seconds before it takes writes), urlflow processes or browsers spend their time waiting,
// not computing, so more than the default of one per CPU keeps the machine busy.
func SetParallel(n int) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		flag.Set("test.parallel", strconv.Itoa(n))
	}
}
