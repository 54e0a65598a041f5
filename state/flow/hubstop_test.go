package flow

import (
	"runtime"
	"strings"
	"testing"

	"github.com/urlflow/urlflow/internal/redistest"
)

// TestHubRunReturnsAfterItsSubscriptionIsClosed: when Run returns, the close of the
// subscription that ended it has finished: a shutdown that waits for Run, then closes
// Redis, must not leave that close behind. (The goroutine that ran it may still be on its
// way out, past all work.)
func TestHubRunReturnsAfterItsSubscriptionIsClosed(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	for range 300 {
		runHub(t, NewHub(rdb, quiet))()
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "flow.(*Hub).subscribeOnce") && strings.Contains(g, "(*PubSub).Close") {
				t.Fatalf("the subscription is still being closed after Run returned:\n%s", g)
			}
		}
	}
}
