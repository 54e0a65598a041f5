// Package ratelimit counts what each user makes urlflow do, in fixed windows shared by
// every replica through Redis, and says when a user is over a limit. Each replica decides
// from memory; the counts meet in Redis once a second.
package ratelimit

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/urlflow/urlflow/internal/every"
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

// SyncInterval is how often Run adds this replica's counts to the shared ones in Redis.
const SyncInterval = time.Second

// idleAfter is how long a user's count stays in memory after its last event. A count
// dropped and needed again starts from zero until the next sync reads the shared total.
const idleAfter = time.Minute

// Limiter counts events per user in fixed windows shared by every replica. Each replica
// counts in memory and decides at once, without a round trip; once per SyncInterval (Run)
// it adds what it counted to the count in Redis, in the user's slot, and reads back the
// total of every replica, in one round trip for all users. On one replica a limit is
// exact; with several, a user can go over it by what the other replicas counted since
// their last sync, at most a second's worth of events.
type Limiter struct {
	rdb redis.UniversalClient
	now func() time.Time

	mu     sync.Mutex
	counts map[string]*count // by Redis key: user, kind and window
}

// count is one user's count of one kind of event in one window.
type count struct {
	shared  int64         // the total in Redis at the last sync, this replica's events included
	sending int64         // events on their way to Redis in a sync: in no total yet
	pending int64         // events counted here since the last sync began
	refused bool          // a refusal of this window was already reported as the first
	expiry  time.Duration // how long the key lives in Redis: the window, and slack for clocks
	end     time.Time     // the end of the window
	last    time.Time     // the last event
}

// NewLimiter returns a Limiter on rdb; now is time.Now if nil. Run must run for the counts
// to be shared.
func NewLimiter(rdb redis.UniversalClient, now func() time.Time) *Limiter {
	if now == nil {
		now = time.Now
	}
	return &Limiter{rdb: rdb, now: now, counts: map[string]*count{}}
}

// key counts a user's events of kind what in one window of a limit.
func key(userKey, what string, window int64) string {
	return state.UserTag(userKey) + "rl:" + what + ":" + strconv.FormatInt(window, 10)
}

// addScript adds ARGV[2] events (at least one) to KEYS[1] and answers the total; the first
// events of a window set its expiry, ARGV[1] milliseconds.
var addScript = redis.NewScript(`
local add = tonumber(ARGV[2])
local n = redis.call("INCRBY", KEYS[1], add)
if n == add then redis.call("PEXPIRE", KEYS[1], ARGV[1]) end
return n`)

// Allow counts one event of kind what for user and decides whether it is within l, from
// this replica's count and the shared total it read at the last sync. An event over the
// limit is counted too, so a client that keeps trying stays refused until the window ends.
// It never waits on Redis: an outage of Redis leaves the limits in force on each replica.
func (r *Limiter) Allow(user state.User, what string, l Limit) Decision {
	if l.Off() {
		return Decision{Allowed: true}
	}
	now := r.now()
	window := now.UnixMilli() / l.Window.Milliseconds()
	end := time.UnixMilli((window + 1) * l.Window.Milliseconds())
	k := key(user.Key(), what, window)

	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.counts[k]
	if c == nil {
		c = &count{expiry: l.Window + time.Minute, end: end}
		r.counts[k] = c
	}
	c.pending++
	c.last = now
	if c.shared+c.sending+c.pending <= int64(l.Events) {
		return Decision{Allowed: true}
	}
	first := !c.refused
	c.refused = true
	return Decision{RetryAfter: end.Sub(now), FirstRefusal: first}
}

// Sync adds this replica's counts since the last sync to the shared counts in Redis and
// reads back their totals, in one round trip, and forgets the counts of windows that
// ended and of users idle for a minute. Only counts with new events are sent: a replica
// learns what the others counted when it adds its own. On failure the counts stay to be
// added next time.
func (r *Limiter) Sync(ctx context.Context) error {
	now := r.now()
	type sent struct {
		key   string
		c     *count
		added int64
		total *redis.Cmd
	}
	var batch []sent
	r.mu.Lock()
	for k, c := range r.counts {
		if !now.Before(c.end.Add(time.Minute)) || (c.pending == 0 && now.Sub(c.last) > idleAfter) {
			delete(r.counts, k) // a count of a window just ended may still have events to add
		}
		if c.pending > 0 {
			batch = append(batch, sent{key: k, c: c, added: c.pending})
			c.sending += c.pending
			c.pending = 0
		}
	}
	r.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	send := func(only func(*redis.Cmd) bool) error {
		_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := range batch {
				if b := &batch[i]; only(b.total) {
					b.total = addScript.EvalSha(ctx, p, []string{b.key}, b.c.expiry.Milliseconds(), b.added)
				}
			}
			return nil
		})
		return err
	}
	err := send(func(*redis.Cmd) bool { return true })
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		// A Redis that has not seen the script yet (new, restarted, failed over): load it,
		// and send again the counts it refused, only those.
		if err = addScript.Load(ctx, r.rdb).Err(); err == nil {
			err = send(func(c *redis.Cmd) bool { return redis.HasErrorPrefix(c.Err(), "NOSCRIPT") })
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var failed error
	for _, b := range batch {
		b.c.sending -= b.added
		total, terr := b.total.Int64()
		if terr != nil {
			b.c.pending += b.added // to be added next time
			if _, ok := r.counts[b.key]; !ok && now.Before(b.c.end.Add(time.Minute)) {
				r.counts[b.key] = b.c
			}
			failed = terr
			continue
		}
		b.c.shared = total // events counted here during the round trip are still pending
	}
	if err == nil {
		err = failed
	}
	if err != nil {
		return fmt.Errorf("share rate limit counts: %w", err)
	}
	return nil
}

// Run syncs the counts every SyncInterval until ctx ends. log receives failed syncs.
func (r *Limiter) Run(ctx context.Context, log *slog.Logger) {
	every.Run(ctx, SyncInterval, func(ctx context.Context) {
		if err := r.Sync(ctx); err != nil && ctx.Err() == nil {
			log.WarnContext(ctx, "rate limit counts not shared", "err", err)
		}
	})
}
