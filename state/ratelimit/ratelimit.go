// Package ratelimit counts what each user makes urlflow do, in fixed windows kept in Redis
// and shared by every replica, and says when a user is over a limit.
package ratelimit

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/urlflow/urlflow/state"
)

// Limit is how many events of one kind a user may cause per window. The zero Limit
// allows everything.
type Limit struct {
	Events int
	Window time.Duration
}

// Off reports whether l allows everything: no events or no window given.
func (l Limit) Off() bool { return l.Events <= 0 || l.Window <= 0 }

// ParseLimit reads "EVENTS/WINDOW" (for example "600/1m") or "off".
func ParseLimit(s string) (Limit, error) {
	if s == "off" {
		return Limit{}, nil
	}
	events, window, ok := strings.Cut(s, "/")
	n, err := strconv.Atoi(events)
	if !ok || err != nil || n < 1 {
		return Limit{}, fmt.Errorf("want EVENTS/WINDOW like 600/1m, or off; got %q", s)
	}
	d, err := time.ParseDuration(window)
	if err != nil || d < time.Second || d > 24*time.Hour || d%time.Second != 0 {
		return Limit{}, fmt.Errorf("want a window of whole seconds between 1s and 24h, like 600/1m; got %q", s)
	}
	return Limit{Events: n, Window: d}, nil
}

// Decision is the answer of Allow.
type Decision struct {
	Allowed bool
	// RetryAfter is the time until the window ends, when not allowed.
	RetryAfter time.Duration
	// FirstRefusal is set on the first event of a window that is not allowed, so that a
	// caller logs and counts a client that keeps trying once, not on every try.
	FirstRefusal bool
}

// Limiter counts events in Redis.
type Limiter struct {
	rdb redis.UniversalClient
	now func() time.Time
}

// NewLimiter returns a Limiter on rdb; now is time.Now if nil.
func NewLimiter(rdb redis.UniversalClient, now func() time.Time) *Limiter {
	if now == nil {
		now = time.Now
	}
	return &Limiter{rdb: rdb, now: now}
}

// key counts a user's events of kind what in one window of a limit.
func key(userKey, what string, window int64) string {
	return state.UserTag(userKey) + "rl:" + what + ":" + strconv.FormatInt(window, 10)
}

// countScript counts one event in KEYS[1] and answers the count; the first event of a
// window sets its expiry, ARGV[1] milliseconds (the window, and slack for clocks). One
// command, where INCR and PEXPIRE in a transaction were four.
var countScript = redis.NewScript(`
local n = redis.call("INCR", KEYS[1])
if n == 1 then redis.call("PEXPIRE", KEYS[1], ARGV[1]) end
return n`)

// Allow counts one event of kind what for user and decides whether it is within l. Windows
// are fixed and shared by every replica: the count lives in Redis, in the user's slot. An
// event over the limit is counted too, so a client that keeps trying stays refused until
// the window ends.
func (r *Limiter) Allow(ctx context.Context, user state.User, what string, l Limit) (Decision, error) {
	if l.Off() {
		return Decision{Allowed: true}, nil
	}
	now := r.now()
	window := now.UnixMilli() / l.Window.Milliseconds()
	k := key(user.Key(), what, window)
	count, err := countScript.Run(ctx, r.rdb, []string{k}, (l.Window + time.Minute).Milliseconds()).Int64()
	if err != nil {
		return Decision{}, fmt.Errorf("count %s for rate limit: %w", what, err)
	}
	if count <= int64(l.Events) {
		return Decision{Allowed: true}, nil
	}
	end := time.UnixMilli((window + 1) * l.Window.Milliseconds())
	return Decision{RetryAfter: end.Sub(now), FirstRefusal: count == int64(l.Events)+1}, nil
}
