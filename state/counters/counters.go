// Package counters keeps deployment-wide counters in Redis, so that every replica adds to
// the same numbers and /metrics shows the totals of the whole deployment. A counter counts
// kinds of events only: never a user, an ID or a value.
//
// Counting costs no Redis command: each replica adds up in memory and writes what it
// counted in one round trip every FlushInterval (Run), and before every read, so that a
// replica always reads its own counts; another replica's reach Redis within an interval.
package counters

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/state"
)

// key is the hash of the counters.
const key = state.KeyPrefix + "counters"

// FlushInterval is how often Run writes the counts of this replica to Redis.
const FlushInterval = time.Second

// Counters adds to and reads the counters.
type Counters struct {
	rdb redis.UniversalClient
	log *slog.Logger

	mu sync.Mutex
	// pending holds what this replica counted since its last write, by series.
	pending map[string]int64
}

// New returns the counters on rdb; failures to count are logged to log (slog.Default() if
// nil).
func New(rdb redis.UniversalClient, log *slog.Logger) *Counters {
	if log == nil {
		log = slog.Default()
	}
	return &Counters{rdb: rdb, log: log, pending: map[string]int64{}}
}

// Add adds one to the counter name with labels (pairs of label name and value), in memory:
// Run and All write it to Redis. Add on a nil Counters counts nothing.
func (c *Counters) Add(ctx context.Context, name string, labels ...string) {
	if c == nil {
		return
	}
	var ls []Label
	for i := 0; i+1 < len(labels); i += 2 {
		ls = append(ls, Label{Name: labels[i], Value: labels[i+1]})
	}
	c.mu.Lock()
	c.pending[series(name, ls)]++
	c.mu.Unlock()
}

// Flush writes what this replica counted since its last write to Redis, in one round trip.
// What it could not write stays to be written next time: nothing counted is lost while the
// process lives.
func (c *Counters) Flush(ctx context.Context) error {
	c.mu.Lock()
	pending := c.pending
	c.pending = map[string]int64{}
	c.mu.Unlock()
	if len(pending) == 0 {
		return nil
	}
	_, err := c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for s, n := range pending {
			p.HIncrBy(ctx, key, s, n)
		}
		return nil
	})
	if err != nil {
		// HINCRBY of a pipeline that failed may have been applied in part; counting some
		// twice is better than losing them.
		c.mu.Lock()
		for s, n := range pending {
			c.pending[s] += n
		}
		c.mu.Unlock()
		return fmt.Errorf("write counters: %w", err)
	}
	return nil
}

// Run writes the counts every FlushInterval until ctx ends, and once more then.
func (c *Counters) Run(ctx context.Context) {
	t := time.NewTicker(FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			if err := c.Flush(ctx); err != nil {
				c.log.WarnContext(ctx, "counters not written; will try again", "err", err)
			}
		case <-ctx.Done():
			last, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := c.Flush(last); err != nil {
				c.log.WarnContext(last, "counters not written at shutdown; these counts are lost", "err", err)
			}
			return
		}
	}
}

// Label is one label of a counter.
type Label struct{ Name, Value string }

// Counter is one counter and its value.
type Counter struct {
	// Series is the counter's name with its labels, as Prometheus writes it: the field of
	// the counter in Redis.
	Series string
	Name   string
	Labels []Label
	Value  int64
}

// series returns the Prometheus series of name with labels: name{a="x",b="y"}.
func series(name string, labels []Label) string {
	if len(labels) == 0 {
		return name
	}
	var b strings.Builder
	b.WriteString(name + "{")
	for i, l := range labels {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", l.Name, l.Value)
	}
	b.WriteByte('}')
	return b.String()
}

// errSeries says that a field of the counters is not a series that Add writes.
var errSeries = errors.New("not a counter series")

// parseSeries reads a series that series wrote.
func parseSeries(s string) (name string, labels []Label, err error) {
	name, rest, hasLabels := strings.Cut(s, "{")
	if name == "" {
		return "", nil, errSeries
	}
	if !hasLabels {
		return name, nil, nil
	}
	rest, ok := strings.CutSuffix(rest, "}")
	if !ok || rest == "" {
		return "", nil, errSeries
	}
	for rest != "" {
		label, after, ok := strings.Cut(rest, "=")
		if !ok || label == "" {
			return "", nil, errSeries
		}
		quoted, err := strconv.QuotedPrefix(after)
		if err != nil {
			return "", nil, errSeries
		}
		value, err := strconv.Unquote(quoted)
		if err != nil {
			return "", nil, errSeries
		}
		labels = append(labels, Label{Name: label, Value: value})
		rest = after[len(quoted):]
		if rest != "" {
			if rest, ok = strings.CutPrefix(rest, ","); !ok || rest == "" {
				return "", nil, errSeries
			}
		}
	}
	return name, labels, nil
}

// All returns every counter, sorted by series. A field that is not a counter (written by
// something else) is left out.
func (c *Counters) All(ctx context.Context) ([]Counter, error) {
	if err := c.Flush(ctx); err != nil {
		c.log.WarnContext(ctx, "counters not written before reading; they come later", "err", err)
	}
	all, err := c.rdb.HGetAll(ctx, key).Result()
	if err != nil {
		return nil, fmt.Errorf("read counters: %w", err)
	}
	out := make([]Counter, 0, len(all))
	for _, field := range slices.Sorted(maps.Keys(all)) {
		v, err := strconv.ParseInt(all[field], 10, 64)
		if err != nil {
			continue
		}
		name, labels, err := parseSeries(field)
		if err != nil {
			continue
		}
		out = append(out, Counter{Series: field, Name: name, Labels: labels, Value: v})
	}
	return out, nil
}
