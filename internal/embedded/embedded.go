// Package embedded runs an in-process Redis (miniredis) for `urlflow dev` without
// URLFLOW_REDIS_URL, and for the tests that check that the stores behave the same on it as
// on a real redis-server. It speaks the Redis protocol on a loopback port, so urlflow uses
// it through the same client and code path as a real server.
//
// The one idea to hold: miniredis does not expire keys by itself, so its clock is driven
// from the real one while it runs.
package embedded

import (
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// Redis is an in-process Redis (miniredis) on a loopback port.
type Redis struct {
	m    *miniredis.Miniredis
	stop chan struct{}
	done chan struct{}
}

// Start starts an embedded Redis on a free loopback port.
func Start() (*Redis, error) {
	m := miniredis.NewMiniRedis()
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("start embedded Redis: %w", err)
	}
	e := &Redis{m: m, stop: make(chan struct{}), done: make(chan struct{})}
	go e.driveClock()
	return e, nil
}

func (e *Redis) driveClock() {
	defer close(e.done)
	last := time.Now()
	e.m.SetTime(last)
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-e.stop:
			return
		case now := <-t.C:
			e.m.SetTime(now)
			e.m.FastForward(now.Sub(last))
			last = now
		}
	}
}

// URL returns the redis:// URL of the embedded server.
func (e *Redis) URL() string { return "redis://" + e.m.Addr() }

// Close stops the embedded server; its data is gone.
func (e *Redis) Close() {
	close(e.stop)
	<-e.done
	e.m.Close()
}
