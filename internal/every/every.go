// Package every runs a function at a fixed interval until its context ends: the
// once-a-second background work of a replica (the sweeper, the rate-limit sync, the MCP
// session registrations).
package every

import (
	"context"
	"time"
)

// Run calls fn every interval, the first time one interval from now, until ctx ends; no
// call starts once ctx has ended. A call that runs long delays the next; calls never
// overlap.
func Run(ctx context.Context, interval time.Duration, fn func(context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if ctx.Err() != nil { // both were ready: select picked one at random
				return
			}
			fn(ctx)
		}
	}
}
