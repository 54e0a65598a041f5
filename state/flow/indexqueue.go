package flow

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// indexWrite is one write to a deployment-wide sorted set (the deadline index, a listing
// bucket, an owed bucket): add member with score, or take it out.
type indexWrite struct {
	key    string
	member string
	score  float64
	remove bool
}

// indexSlot names what an indexWrite writes: one member of one set.
type indexSlot struct{ key, member string }

// indexQueue holds, on a Redis Cluster, the writes that steps make to the deployment-wide
// indexes, and sends them for every flow of the replica at once, every
// indexFlushInterval, in one round trip per node (and one command per key and kind).
//
// On a Cluster a step's script stays in its user's slot, so these writes would otherwise
// cost the node that holds each index a round trip of their own for every step that makes
// them. Nothing depends on them being written at once: the sweeper and the listings read
// the records behind the entries, and a replica's own listings send its queue first
// (flushIndexes). What a replica that dies has not sent is lost, as a step's writes after
// its script always could be: the sweeper, the index trim and reads of a record tidy up
// after it (docs/design.md, "Redis key layout").
type indexQueue struct {
	// sending is held for the whole of a flush: two flushes at once (a listing's and the
	// tick's) could otherwise land out of order, an older write of a member after a newer.
	sending sync.Mutex
	mu      sync.Mutex
	pending map[indexSlot]indexWrite // the last write of each slot wins
	// full is signalled when pending reaches indexQueueSoon, to send it before the tick.
	full chan struct{}
}

const (
	// indexFlushInterval is how often a replica sends its queued index writes.
	indexFlushInterval = time.Second
	// indexQueueSoon is how many queued writes make the queue send before the tick.
	indexQueueSoon = 4096
	// indexQueueMax bounds what a queue keeps while Redis does not take its writes.
	indexQueueMax = 1 << 16
)

func newIndexQueue() *indexQueue {
	return &indexQueue{pending: map[indexSlot]indexWrite{}, full: make(chan struct{}, 1)}
}

// add queues writes, each replacing any queued write of the same member of the same key.
func (q *indexQueue) add(writes ...indexWrite) {
	if len(writes) == 0 {
		return
	}
	q.mu.Lock()
	for _, w := range writes {
		q.pending[indexSlot{w.key, w.member}] = w
	}
	n := len(q.pending)
	q.mu.Unlock()
	if n >= indexQueueSoon {
		select {
		case q.full <- struct{}{}:
		default:
		}
	}
}

// flush sends the queued writes in one pipeline: per key, one ZADD of the members added
// and one ZREM of those taken out. On failure the writes go back into the queue, unless a
// newer write of the same member was queued meanwhile, and the queue keeps at most
// indexQueueMax of them; it reports how many it dropped to make room.
func (q *indexQueue) flush(ctx context.Context, rdb redis.UniversalClient) (dropped int, err error) {
	q.sending.Lock()
	defer q.sending.Unlock()
	q.mu.Lock()
	taken := q.pending
	if len(taken) == 0 {
		q.mu.Unlock()
		return 0, nil
	}
	q.pending = map[indexSlot]indexWrite{}
	q.mu.Unlock()

	adds := map[string][]redis.Z{}
	removes := map[string][]any{}
	for _, w := range taken {
		if w.remove {
			removes[w.key] = append(removes[w.key], w.member)
		} else {
			adds[w.key] = append(adds[w.key], redis.Z{Score: w.score, Member: w.member})
		}
	}
	_, err = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, key := range slices.Sorted(maps.Keys(adds)) {
			p.ZAdd(ctx, key, adds[key]...)
		}
		for _, key := range slices.Sorted(maps.Keys(removes)) {
			p.ZRem(ctx, key, removes[key]...)
		}
		return nil
	})
	if err == nil {
		return 0, nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for slot, w := range taken {
		if _, newer := q.pending[slot]; newer {
			continue
		}
		if len(q.pending) >= indexQueueMax {
			dropped++
			continue
		}
		q.pending[slot] = w
	}
	return dropped, fmt.Errorf("write index entries: %w", err)
}

// run sends the queued writes every indexFlushInterval, and sooner when the queue grows
// past indexQueueSoon, until ctx ends; then it sends them once more.
func (q *indexQueue) run(ctx context.Context, rdb redis.UniversalClient, log *slog.Logger) {
	tick := time.NewTicker(indexFlushInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			last, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			q.send(last, rdb, log)
			cancel()
			return
		case <-tick.C:
			q.send(ctx, rdb, log)
		case <-q.full:
			q.send(ctx, rdb, log)
		}
	}
}

// send flushes the queue and logs a failure, which leaves the writes queued.
func (q *indexQueue) send(ctx context.Context, rdb redis.UniversalClient, log *slog.Logger) {
	if dropped, err := q.flush(ctx, rdb); err != nil {
		log.WarnContext(ctx, "index writes not sent; they are tried again", "err", err, "dropped", dropped)
	}
}
