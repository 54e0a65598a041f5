package state

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// countersKey is the hash of deployment-wide counters.
const countersKey = keyPrefix + "counters"

// Count adds one to the deployment-wide counter name with labels (pairs of label name and
// value). Counters live in Redis, so every replica adds to the same numbers. They carry
// kinds of events only: never a user, an ID or a value. A failure to count is logged, not
// returned: counting never stops the work it counts.
func (s *Store) Count(ctx context.Context, name string, labels ...string) {
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
	if err := s.rdb.HIncrBy(ctx, countersKey, field, 1).Err(); err != nil {
		s.log.WarnContext(ctx, "counter not counted", "counter", name, "err", err)
	}
}

// Counter is one counter and its value.
type Counter struct {
	// Series is the counter's name with its labels, as Prometheus writes it.
	Series string
	Value  int64
}

// Counters returns every counter, sorted by series.
func (s *Store) Counters(ctx context.Context) ([]Counter, error) {
	all, err := s.rdb.HGetAll(ctx, countersKey).Result()
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
