package flow

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/internal/redistest"
)

// zset returns the members of sorted set key with their scores.
func zset(t *testing.T, rdb redis.UniversalClient, key string) map[string]float64 {
	t.Helper()
	zs, err := rdb.ZRangeWithScores(t.Context(), key, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, z := range zs {
		got[z.Member.(string)] = z.Score
	}
	return got
}

func TestIndexQueueSendsTheLastWriteOfEachMember(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		// Keys in two slots, which a Cluster may keep on two nodes.
		one, two := flowsKey(1), owedKey(7)
		if err := b.Client.ZAdd(t.Context(), one, redis.Z{Score: 1, Member: "old"}).Err(); err != nil {
			t.Fatal(err)
		}
		q := newIndexQueue()
		q.add(indexWrite{key: one, member: "a", score: 1}, indexWrite{key: one, member: "b", score: 2})
		q.add(indexWrite{key: one, member: "b", remove: true}, indexWrite{key: two, member: "c", score: 3})
		q.add(indexWrite{key: one, member: "old", remove: true}, indexWrite{key: one, member: "a", score: 5})
		if got := zset(t, b.Client, one); !reflect.DeepEqual(got, map[string]float64{"old": 1}) {
			t.Fatalf("before the flush %s = %v, want what it held", one, got)
		}
		if dropped, err := q.flush(t.Context(), b.Client); err != nil || dropped != 0 {
			t.Fatalf("flush = %d dropped, %v", dropped, err)
		}
		if got := zset(t, b.Client, one); !reflect.DeepEqual(got, map[string]float64{"a": 5}) {
			t.Errorf("%s = %v, want a at 5 (its last write) and no b or old", one, got)
		}
		if got := zset(t, b.Client, two); !reflect.DeepEqual(got, map[string]float64{"c": 3}) {
			t.Errorf("%s = %v, want c at 3", two, got)
		}
		if len(q.pending) != 0 {
			t.Errorf("%d writes still queued after a flush that sent them", len(q.pending))
		}
	})
}

// failingPipelines makes every pipeline of a client fail, after calling during.
type failingPipelines struct{ during func() }

func (failingPipelines) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (failingPipelines) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h failingPipelines) ProcessPipelineHook(redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(context.Context, []redis.Cmder) error {
		h.during()
		return errors.New("connection refused")
	}
}

func TestIndexQueueKeepsWhatAFailedFlushDidNotSend(t *testing.T) {
	b := redistest.StartEmbedded(t)
	key := flowsKey(3)
	q := newIndexQueue()
	q.add(indexWrite{key: key, member: "a", score: 1}, indexWrite{key: key, member: "b", score: 2})

	broken := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { broken.Close() })
	// A step writes b again while the flush is under way: that write is newer than the
	// one the flush failed to send.
	broken.AddHook(failingPipelines{during: func() { q.add(indexWrite{key: key, member: "b", remove: true}) }})
	if _, err := q.flush(t.Context(), broken); err == nil {
		t.Fatal("flush through a broken connection reported no error")
	}
	if dropped, err := q.flush(t.Context(), b.Client); err != nil || dropped != 0 {
		t.Fatalf("second flush = %d dropped, %v", dropped, err)
	}
	if got := zset(t, b.Client, key); !reflect.DeepEqual(got, map[string]float64{"a": 1}) {
		t.Errorf("%s = %v, want a (kept from the failed flush) and not b (taken out since)", key, got)
	}
}

func TestIndexQueueIsBoundedWhileRedisRefusesItsWrites(t *testing.T) {
	key := flowsKey(0)
	q := newIndexQueue()
	for i := range indexQueueMax {
		q.add(indexWrite{key: key, member: fmt.Sprint(i)})
	}
	select {
	case <-q.full:
	default:
		t.Errorf("a queue of %d writes did not ask to be sent before the tick", indexQueueMax)
	}
	broken := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { broken.Close() })
	broken.AddHook(failingPipelines{during: func() { q.add(indexWrite{key: key, member: "newer"}) }})
	dropped, err := q.flush(t.Context(), broken)
	if err == nil {
		t.Fatal("flush through a broken connection reported no error")
	}
	if dropped != 1 || len(q.pending) != indexQueueMax {
		t.Errorf("after the failed flush: %d dropped, %d queued; want 1 dropped and the queue full (%d)", dropped, len(q.pending), indexQueueMax)
	}
	if _, ok := q.pending[indexSlot{key, "newer"}]; !ok {
		t.Error("the write queued during the failed flush was dropped; the older ones should make room")
	}
}

// pipelineHook calls before ahead of the first pipeline of a client.
type pipelineHook struct{ before func() }

func (pipelineHook) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (pipelineHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h pipelineHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.before()
		return next(ctx, cmds)
	}
}

func TestIndexQueueFlushesOneAtATime(t *testing.T) {
	b := redistest.StartEmbedded(t)
	key := deadlinesKey
	q := newIndexQueue()
	q.add(indexWrite{key: key, member: "x", score: 1})

	rdb := redis.NewClient(&redis.Options{Addr: b.Client.(*redis.Client).Options().Addr})
	t.Cleanup(func() { rdb.Close() })
	second := make(chan error, 1)
	var first atomic.Bool
	// While the first flush (which adds x) is on its way, the flow ends (x is taken out)
	// and a listing flushes too. Its removal must not land before the first flush's add.
	rdb.AddHook(pipelineHook{before: func() {
		if first.CompareAndSwap(false, true) {
			q.add(indexWrite{key: key, member: "x", remove: true})
			go func() {
				_, err := q.flush(context.Background(), rdb)
				second <- err
			}()
			select {
			case err := <-second:
				second <- err
			case <-time.After(200 * time.Millisecond): // waiting for the first, as it should
			}
		}
	}})
	if _, err := q.flush(t.Context(), rdb); err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	if got := zset(t, b.Client, key); len(got) != 0 {
		t.Errorf("%s = %v after the add and then the removal of x, want it empty", key, got)
	}
}
