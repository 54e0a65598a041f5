package state

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Connect returns a Redis client for url (redis:// or rediss://, as go-redis parses it)
// and checks that the server answers. The client is a UniversalClient, the interface the
// whole package works on.
func Connect(ctx context.Context, url string) (redis.UniversalClient, error) {
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("parse Redis URL: %w", redactURLError(err))
	}
	rdb := redis.NewClient(opts)
	if err := rdb.Ping(ctx).Err(); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("connect to Redis at %s: %w", opts.Addr, err)
	}
	return rdb, nil
}

// redactURLError keeps go-redis' word on what is wrong but never the URL itself, which
// may hold a password: net/url's errors quote the whole URL.
func redactURLError(err error) error {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return fmt.Errorf("malformed URL: %w", uerr.Err)
	}
	return err
}

// Embedded is an in-process Redis (miniredis) for laptops and the default run. It speaks
// the Redis protocol on a loopback port, so urlflow uses it through the same client and code
// path as a real server. Its clock is driven from the real one, because miniredis does not
// expire keys by itself.
type Embedded struct {
	m    *miniredis.Miniredis
	stop chan struct{}
	done chan struct{}
}

// StartEmbedded starts an embedded Redis on a free loopback port.
func StartEmbedded() (*Embedded, error) {
	m := miniredis.NewMiniRedis()
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("start embedded Redis: %w", err)
	}
	e := &Embedded{m: m, stop: make(chan struct{}), done: make(chan struct{})}
	go e.driveClock()
	return e, nil
}

func (e *Embedded) driveClock() {
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
func (e *Embedded) URL() string { return "redis://" + e.m.Addr() }

// Close stops the embedded server; its data is gone.
func (e *Embedded) Close() {
	close(e.stop)
	<-e.done
	e.m.Close()
}

// Ping checks that Redis answers, for readiness.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("ping Redis: %w", err)
	}
	return nil
}
