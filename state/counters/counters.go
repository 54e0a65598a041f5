// Package counters keeps deployment-wide counters in Redis, so that every replica adds to
// the same numbers and /metrics shows the totals of the whole deployment. A counter counts
// kinds of events only: never a user, an ID or a value.
package counters

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/state"
)

// key is the hash of the counters.
const key = state.KeyPrefix + "counters"

// Counters adds to and reads the counters.
type Counters struct {
	rdb redis.UniversalClient
	log *slog.Logger
}

// New returns the counters on rdb; failures to count are logged to log (slog.Default() if
// nil).
func New(rdb redis.UniversalClient, log *slog.Logger) *Counters {
	if log == nil {
		log = slog.Default()
	}
	return &Counters{rdb: rdb, log: log}
}

// Add adds one to the counter name with labels (pairs of label name and value). A failure
// to count is logged, not returned: counting never stops the work it counts. Add on a nil
// Counters counts nothing.
func (c *Counters) Add(ctx context.Context, name string, labels ...string) {
	if c == nil {
		return
	}
	field := name
	if len(labels) > 0 {
		var b strings.Builder
		for i := 0; i+1 < len(labels); i += 2 {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%s=%q", labels[i], labels[i+1])
		}
		field += "{" + b.String() + "}"
	}
	if err := c.rdb.HIncrBy(ctx, key, field, 1).Err(); err != nil {
		c.log.WarnContext(ctx, "counter not counted", "counter", name, "err", err)
	}
}

// Counter is one counter and its value.
type Counter struct {
	// Series is the counter's name with its labels, as Prometheus writes it.
	Series string
	Value  int64
}

// All returns every counter, sorted by series.
func (c *Counters) All(ctx context.Context) ([]Counter, error) {
	all, err := c.rdb.HGetAll(ctx, key).Result()
	if err != nil {
		return nil, fmt.Errorf("read counters: %w", err)
	}
	out := make([]Counter, 0, len(all))
	for _, series := range slices.Sorted(maps.Keys(all)) {
		v, err := strconv.ParseInt(all[series], 10, 64)
		if err != nil {
			continue
		}
		out = append(out, Counter{Series: series, Value: v})
	}
	return out, nil
}
