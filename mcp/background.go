package mcp

import (
	"context"
	"sync"
)

// background runs the server's work that outlives the request or notice that started it
// (completion deliveries and offers of new attempts) under the context of Server.Run, so
// that Run can wait for all of it before it returns and nothing touches Redis after the
// process closed it.
type background struct {
	tasks chan func(context.Context)
}

func newBackground() *background {
	return &background{tasks: make(chan func(context.Context))}
}

// run starts every task it is handed until ctx ends, then waits for the running ones. The
// tasks get ctx and stop when it ends.
func (b *background) run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case task := <-b.tasks:
			wg.Go(func() { task(ctx) })
		}
	}
}

// spawn hands task to run. It waits at most until ctx (the caller's: a notice's or a
// request's) ends, and reports whether the task was taken.
func (b *background) spawn(ctx context.Context, task func(context.Context)) bool {
	select {
	case b.tasks <- task:
		return true
	case <-ctx.Done():
		return false
	}
}
