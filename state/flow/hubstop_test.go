package flow

import (
	"context"
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
		h := NewHub(rdb, quiet)
		subscribed := make(chan struct{}, 1)
		h.OnConnect(func(context.Context) {
			select {
			case subscribed <- struct{}{}:
			default:
			}
		})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			h.Run(ctx)
		}()
		receive(t, subscribed, "the hub's subscription")
		cancel()
		<-done
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "flow.(*Hub).subscribeOnce") && strings.Contains(g, "(*PubSub).Close") {
				t.Fatalf("the subscription is still being closed after Run returned:\n%s", g)
			}
		}
	}
}
