package every

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

func TestRunCallsUntilTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	var calls atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, time.Millisecond, func(context.Context) {
			if calls.Add(1) == 3 {
				cancel()
			}
		})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("fn ran %d times, want 3 (none after the context ended)", n)
	}
}
