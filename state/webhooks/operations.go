package webhooks

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/internal/zcursor"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/flow"
)

// Operations on deliveries: the given-up ones of each service are indexed (GivenUp), and
// any delivery that is not pending may be sent again (Redeliver).

// givenUpKey is the sorted set of the deliveries of service that were given up, scored by
// when (Unix milliseconds). It is trimmed of what is older than Keep whenever written, and
// its entries whose record expired are dropped when read.
func givenUpKey(service string) string { return state.KeyPrefix + "wh:givenup:" + service }

// indexGivenUp adds to p the writes that index the delivery of elicitationID of service,
// given up at.
func indexGivenUp(ctx context.Context, p redis.Pipeliner, service, elicitationID string, at time.Time) {
	key := givenUpKey(service)
	p.ZAdd(ctx, key, redis.Z{Score: float64(at.UnixMilli()), Member: elicitationID})
	p.ZRemRangeByScore(ctx, key, "-inf", "("+strconv.FormatInt(at.Add(-Keep).UnixMilli(), 10))
	p.Expire(ctx, key, Keep)
}

// ErrBadCursor is GivenUp's error for a cursor it did not hand out.
var ErrBadCursor = zcursor.ErrBadCursor

// GivenUpPage is a page of the given-up deliveries of a service, newest first. Next, when
// set, is the cursor of the page after; a full page may be followed by an empty one.
type GivenUpPage struct {
	Deliveries []Delivery `json:"deliveries"`
	Next       string     `json:"next,omitempty"`
}

// position is where a page of the index ends: the score (when given up) and member (the
// delivery's Key) of its last entry.
type position = zcursor.Position

// indexBatch is how many index entries GivenUp reads at once.
const indexBatch = 50

// GivenUp returns up to limit deliveries of service that were given up, newest first,
// after cursor (empty for the first page; ErrBadCursor if it is not one GivenUp handed
// out). An entry whose record expired, or was redelivered since, leaves the index.
func (q *Queue) GivenUp(ctx context.Context, service, cursor string, limit int) (GivenUpPage, error) {
	page := GivenUpPage{Deliveries: []Delivery{}}
	var after *position
	if cursor != "" {
		p, err := zcursor.Parse(cursor, ValidKey)
		if err != nil {
			return page, err
		}
		after = &p
	}
	var stale []any
	for offset := int64(0); len(page.Deliveries) < limit; offset += indexBatch {
		entries, read, err := q.indexEntries(ctx, service, after, offset)
		if err != nil {
			return page, err
		}
		found, gone, err := q.givenUpRecords(ctx, entries)
		if err != nil {
			return page, err
		}
		stale = append(stale, gone...)
		for i := 0; i < len(found) && len(page.Deliveries) < limit; i++ {
			page.Deliveries = append(page.Deliveries, found[i].Delivery)
			page.Next = found[i].at.Cursor()
		}
		if read < indexBatch {
			break
		}
	}
	if len(page.Deliveries) < limit {
		page.Next = ""
	}
	if len(stale) > 0 {
		if err := q.rdb.ZRem(ctx, givenUpKey(service), stale...).Err(); err != nil {
			return page, fmt.Errorf("drop stale given-up webhooks of %s: %w", service, err)
		}
	}
	return page, nil
}

// indexEntries reads a batch of the given-up index of service, newest first, from offset
// among those at or before after (all if nil), leaving out after and what precedes it at
// the same millisecond. read is how many entries it read, those left out too.
func (q *Queue) indexEntries(ctx context.Context, service string, after *position, offset int64) (entries []position, read int, err error) {
	upper := "+inf"
	if after != nil {
		upper = strconv.FormatInt(after.At, 10)
	}
	zs, err := q.rdb.ZRevRangeByScoreWithScores(ctx, givenUpKey(service), &redis.ZRangeBy{
		Min: "-inf", Max: upper, Offset: offset, Count: indexBatch}).Result()
	if err != nil {
		return nil, 0, fmt.Errorf("read given-up webhooks of %s: %w", service, err)
	}
	for _, z := range zs {
		p := position{At: int64(z.Score), Member: fmt.Sprint(z.Member)}
		// Members of one score come in reverse lexical order: those at or before after's
		// were on the pages before.
		if after != nil && p.At == after.At && p.Member >= after.Member {
			continue
		}
		entries = append(entries, p)
	}
	return entries, len(zs), nil
}

// listedDelivery is a given-up delivery and its place in the index.
type listedDelivery struct {
	Delivery
	at position
}

// givenUpRecords reads the records of entries (one GET each: they are in different slots),
// and returns those still given up, and the members whose record expired or was
// redelivered.
func (q *Queue) givenUpRecords(ctx context.Context, entries []position) (found []listedDelivery, gone []any, err error) {
	if len(entries) == 0 {
		return nil, nil, nil
	}
	cmds := make([]*redis.StringCmd, len(entries))
	_, err = q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, e := range entries {
			cmds[i] = p.Get(ctx, deliveryKey(e.Member))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, nil, fmt.Errorf("read given-up webhooks: %w", err)
	}
	for i, e := range entries {
		var rec record
		err := state.DecodeJSON(cmds[i], "webhook delivery", &rec)
		switch {
		case errors.Is(err, state.ErrNotFound):
			gone = append(gone, e.Member)
		case err != nil:
			return nil, nil, err
		case rec.GivenUpAt == nil:
			gone = append(gone, e.Member) // redelivered since
		default:
			found = append(found, listedDelivery{rec.Delivery, e})
		}
	}
	return found, gone, nil
}

// ErrPending is Redeliver's error for a delivery whose attempts are not over.
var ErrPending = errors.New("the webhook delivery is pending: an attempt is due")

// redeliverScript sets KEYS[1] to ARGV[2] for ARGV[3] milliseconds if it still holds the
// document ARGV[1] that was read, and answers 1 if it did.
var redeliverScript = redis.NewScript(`
if redis.call("GET", KEYS[1]) == ARGV[1] then
  redis.call("SET", KEYS[1], ARGV[2], "PX", ARGV[3])
  return 1
end
return 0`)

// Redeliver queues the delivery of the flow elicitationID again, due at now: the same
// message (webhook-id and body), signed anew when sent, on a fresh schedule. It returns
// the record as queued; state.ErrNotFound without one, ErrPending while an attempt is due,
// flow.ErrConflict if the record changed while this ran.
//
// The writes are ordered so that a crash between them leaves nothing stuck: the due entry
// first (a stray one, whose record is not pending, Claim drops), then the record, compared
// and set, then the due entry again (in case a Claim dropped it in between) and the
// given-up index.
func (q *Queue) Redeliver(ctx context.Context, elicitationID string, now time.Time) (*Delivery, error) {
	rec, read, err := q.read(ctx, elicitationID)
	if err != nil {
		return nil, err
	}
	if rec.NextAttemptAt != nil {
		return nil, ErrPending
	}
	d := rec.Delivery
	d.attemptsBefore, d.Redeliveries, d.RedeliveredAt = d.Attempts, d.Redeliveries+1, &now
	d.NextAttemptAt, d.DeliveredAt, d.GivenUpAt = &now, nil, nil
	doc, err := encode(&d, rec.Body)
	if err != nil {
		return nil, err
	}
	due := redis.Z{Score: float64(now.UnixMilli()), Member: elicitationID}
	if err := q.rdb.ZAdd(ctx, dueKeyOf(elicitationID), due).Err(); err != nil {
		return nil, fmt.Errorf("queue the webhook %s again: %w", elicitationID, err)
	}
	set, err := redeliverScript.Run(ctx, q.rdb, []string{deliveryKey(elicitationID)}, read, doc, Keep.Milliseconds()).Int()
	if err != nil {
		return nil, fmt.Errorf("redeliver the webhook %s: %w", elicitationID, err)
	}
	if set == 0 {
		return nil, flow.ErrConflict
	}
	_, err = q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.ZAdd(ctx, dueKeyOf(elicitationID), due)
		p.ZRem(ctx, givenUpKey(d.Service), elicitationID)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("queue the webhook %s again: %w", elicitationID, err)
	}
	return &d, nil
}
