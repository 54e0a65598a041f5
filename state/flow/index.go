package flow

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"hash/fnv"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/state"
)

// The listing indexes (docs/design.md, "Redis key layout"). Every elicitation has an entry
// in one of IndexBuckets sorted sets, chosen by its ID, and in its user's own; an ended
// elicitation whose completion notification is owed has one in the owed set of its bucket
// until the notification is written or given up. The running ones are in the deadline index
// already. An entry of a listing index is the member createdAt:ID (createdAt in Unix
// milliseconds, 13 digits) with score 0, so that Redis orders a set by (createdAt, ID) and a
// listing continues after any entry (ZRANGE BYLEX). An owed entry is the ID, scored by when
// the notification was queued.
//
// The buckets spread the indexes over IndexBuckets hash slots on a Redis Cluster: no key is
// written by every flow. The user's set lives in the user's slot and is written by the same
// script as the record; the buckets are written with the deadline index (outside).

// Index lists the elicitations of every user, or of one, for operators: pages, the
// flows that need attention, a summary. It reads the listing indexes that the steps of
// the Store write (flow.Store.Index).
type Index struct {
	s *Store
}

// Index returns the listing of s's elicitations.
func (s *Store) Index() *Index { return &Index{s: s} }

// IndexBuckets is the number of keys each deployment-wide index is spread over.
const IndexBuckets = 16

// bucketOf returns the bucket of elicitation id.
func bucketOf(id string) int {
	h := fnv.New32a()
	h.Write([]byte(id))
	return int(h.Sum32() % IndexBuckets)
}

// flowsKey names the bucket of the index of every elicitation.
func flowsKey(bucket int) string {
	return state.KeyPrefix + "{flows:" + strconv.Itoa(bucket) + "}:all"
}

// owedKey names the bucket of the index of ended elicitations whose notification is owed.
func owedKey(bucket int) string {
	return state.KeyPrefix + "{flows:" + strconv.Itoa(bucket) + "}:owed"
}

// indexedKey marks the indexes as complete: every record written before they existed has
// been added (Index.AddExisting, state.Once).
const indexedKey = state.KeyPrefix + "indexed"

// indexEntry returns the entry of e in a listing index.
func indexEntry(e *Elicitation) string {
	return fmt.Sprintf("%013d:%s", e.CreatedAt.UnixMilli(), e.ID)
}

var indexEntryPattern = regexp.MustCompile(`^[0-9]{13}:([A-Z2-7]{26}|[A-Z2-7]{64})$`)

// entryID returns the ID of index entry m.
func entryID(m string) string { return m[14:] }

// ErrBadCursor is returned for a listing cursor that no listing handed out.
var ErrBadCursor = errors.New("not a cursor of this listing")

// position is where a page of a listing starts: after an index entry (a next page), before
// one or through it (a previous page), or, when entry is empty, at the oldest.
type position struct {
	entry   string
	before  bool
	through bool // before: the entry itself too
}

// admits reports whether index entry entry lies on the page's side of p.
func (p position) admits(entry string) bool {
	switch {
	case p.entry == "":
		return true
	case !p.before:
		return entry > p.entry
	case p.through:
		return entry <= p.entry
	}
	return entry < p.entry
}

// The marks that start the entry of a previous page's cursor.
const (
	beforeMark  = "<"
	throughMark = "<="
)

// cursorAfter returns the opaque cursor of the page after index entry entry,
// cursorBefore of the page before it, and cursorThrough of the page that ends with it;
// decodeCursor reads each back.
func cursorAfter(entry string) string   { return encodeCursor(entry) }
func cursorBefore(entry string) string  { return encodeCursor(beforeMark + entry) }
func cursorThrough(entry string) string { return encodeCursor(throughMark + entry) }

func encodeCursor(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

func decodeCursor(cursor string) (position, error) {
	if cursor == "" {
		return position{}, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		return position{}, ErrBadCursor
	}
	var p position
	p.entry, p.through = strings.CutPrefix(string(b), throughMark)
	if !p.through {
		p.entry, p.before = strings.CutPrefix(p.entry, beforeMark)
	}
	p.before = p.before || p.through
	if !indexEntryPattern.MatchString(p.entry) {
		return position{}, ErrBadCursor
	}
	return p, nil
}

// queueIndex queues the index entries of new elicitation e: in its user's set (in the
// user's slot) and in its bucket (outside).
func (s *Store) queueIndex(ctx context.Context, b *batch, e *Elicitation) {
	entry := indexEntry(e)
	uk := e.User.Key()
	b.ZAdd(ctx, userIndexKey(uk), redis.Z{Member: packEntry(entry)})
	b.PExpire(ctx, userIndexKey(uk), s.keepIndex(e))
	s.writeIndex(ctx, b, indexWrite{key: flowsKey(bucketOf(e.ID)), member: entry})
}

// keepIndex is how long a user's index lives from the creation of e: as long as e's keys
// and a retention more, so that a newer elicitation with a shorter deadline does not cut
// short the index of an older one. Entries whose record is gone are skipped and taken out
// by listings.
func (s *Store) keepIndex(e *Elicitation) time.Duration { return s.keep(e) + s.retention }

// queueOwed queues e's entry in the owed index when its notification is owed, and its
// removal when not.
func (s *Store) queueOwed(ctx context.Context, b *batch, e *Elicitation) {
	w := indexWrite{key: owedKey(bucketOf(e.ID)), member: e.ID, remove: !e.NotificationOwed()}
	if !w.remove {
		w.score = float64(e.Delivery.QueuedAt.UnixMilli())
	}
	s.writeIndex(ctx, b, w)
}

// flushIndexes sends this replica's queued index writes (on a Cluster), so that its own
// listings show every flow it has written. A failure leaves them queued for the next try.
func (s *Store) flushIndexes(ctx context.Context) {
	if s.cluster {
		s.indexes.send(ctx, s.rdb, s.log)
	}
}

// indexTrimBatch bounds how many old entries of one bucket a trim looks at.
const indexTrimBatch = 200

// Trim takes out of the deployment-wide indexes the entries whose record is gone:
// those of elicitations created longer ago than the retention (a record lives at least that
// long), at most indexTrimBatch per bucket. It returns how many it took out. Listings skip
// and take out such entries too: this only keeps the indexes from growing while nobody
// lists.
func (x *Index) Trim(ctx context.Context) (int, error) {
	s := x.s
	s.flushIndexes(ctx)
	cutoff := fmt.Sprintf("(%013d", s.now().Add(-s.retention).UnixMilli())
	removed := 0
	for bucket := range IndexBuckets {
		key := flowsKey(bucket)
		old, err := s.rdb.ZRangeByLex(ctx, key, &redis.ZRangeBy{Min: "-", Max: cutoff, Count: indexTrimBatch}).Result()
		if err != nil {
			return removed, fmt.Errorf("trim index: %w", err)
		}
		entries := make([]indexed, len(old))
		for i, m := range old {
			entries[i] = indexed{entry: m, key: key, member: m}
		}
		records, err := s.loadEntries(ctx, entries)
		if err != nil {
			return removed, fmt.Errorf("trim index: %w", err)
		}
		n, err := s.forget(ctx, entries, records)
		removed += n
		if err != nil {
			return removed, fmt.Errorf("trim index: %w", err)
		}
	}
	owed, err := s.trimOwed(ctx)
	return removed + owed, err
}

// trimOwed takes out of the owed index the elicitations whose record is gone or owes
// nothing any more (a tidy-up lost to a failure on a Cluster).
func (s *Store) trimOwed(ctx context.Context) (int, error) {
	cutoff := strconv.FormatInt(s.now().Add(-s.retention).UnixMilli(), 10)
	removed := 0
	for bucket := range IndexBuckets {
		key := owedKey(bucket)
		ids, err := s.rdb.ZRangeByScore(ctx, key, &redis.ZRangeBy{Min: "-inf", Max: cutoff, Count: indexTrimBatch}).Result()
		if err != nil || len(ids) == 0 {
			if err != nil {
				return removed, fmt.Errorf("trim owed index: %w", err)
			}
			continue
		}
		records, err := s.loadIDs(ctx, ids)
		if err != nil {
			return removed, fmt.Errorf("trim owed index: %w", err)
		}
		var gone []any
		for i, id := range ids {
			if records[i] == nil || !records[i].NotificationOwed() {
				gone = append(gone, id)
			}
		}
		if len(gone) > 0 {
			if err := s.rdb.ZRem(ctx, key, gone...).Err(); err != nil {
				return removed, fmt.Errorf("trim owed index: %w", err)
			}
			removed += len(gone)
		}
	}
	return removed, nil
}

// indexed is an entry of a listing index and the index it is in.
type indexed struct {
	entry string
	key   string
	// member is the entry's member in key (indexMember).
	member string
}

// forget takes out of their indexes the entries whose record (records, in the same order)
// is gone, and returns how many.
func (s *Store) forget(ctx context.Context, entries []indexed, records []*Elicitation) (int, error) {
	n := 0
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, x := range entries {
			if records[i] == nil {
				p.ZRem(ctx, x.key, x.member)
				n++
			}
		}
		return nil
	})
	return n, err
}

// loadEntries reads the records of entries, in one round trip (on a Cluster, one per
// node); a record that is gone is nil.
func (s *Store) loadEntries(ctx context.Context, entries []indexed) ([]*Elicitation, error) {
	ids := make([]string, len(entries))
	for i, x := range entries {
		ids[i] = entryID(x.entry)
	}
	return s.loadIDs(ctx, ids)
}

// loadIDs reads the records of elicitations ids, in one round trip (on a Cluster, one per
// node) and one more for each ID of the legacy form this replica has not seen; a record
// that is gone is nil. It does not expire overdue ones: a listing shows what is stored.
func (s *Store) loadIDs(ctx context.Context, ids []string) ([]*Elicitation, error) {
	records := make([]*Elicitation, len(ids))
	if len(ids) == 0 {
		return records, nil
	}
	gets := make([]*redis.StringCmd, len(ids))
	keys := make([]string, len(ids))
	for i, id := range ids {
		uk, err := s.userKeyOf(ctx, id)
		if errors.Is(err, state.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		keys[i] = elicitationKey(uk, id)
	}
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, key := range keys {
			if key != "" {
				gets[i] = p.Get(ctx, key)
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("read elicitations: %w", err)
	}
	for i, get := range gets {
		if get == nil {
			continue
		}
		e, _, err := decodeRecord(ids[i], get)
		if errors.Is(err, state.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		records[i] = e
	}
	return records, nil
}

// indexLease bounds how long a replica that died while indexing holds up the next.
const indexLease = 10 * time.Minute

// AddExisting adds to the listing indexes every elicitation written before they existed,
// once per deployment (state.Once): the first replica to start does it while the others go
// on (a listing misses those elicitations until it has finished), and it reports whether
// this call did it. It reads every record's key with SCAN (on a Cluster, on every primary).
func (x *Index) AddExisting(ctx context.Context) (bool, error) {
	s := x.s
	did, err := state.Once(ctx, s.rdb, indexedKey, indexLease, func(ctx context.Context) error {
		var ids []string
		err := state.ScanKeys(ctx, s.rdb, state.KeyPrefix+"{u:*}:e:*", func(key string) error {
			ids = append(ids, entryIDOfKey(key))
			if len(ids) < 500 {
				return nil
			}
			err := s.indexIDs(ctx, ids)
			ids = ids[:0]
			return err
		})
		if err != nil {
			return err
		}
		return s.indexIDs(ctx, ids)
	})
	if err != nil {
		return false, fmt.Errorf("index existing elicitations: %w", err)
	}
	return did, nil
}

// entryIDOfKey returns the ID at the end of the key of a record.
func entryIDOfKey(key string) string {
	for i := len(key) - 1; i >= 0; i-- {
		if key[i] == ':' {
			return key[i+1:]
		}
	}
	return key
}

// indexIDs adds elicitations ids to the listing indexes, and to the owed index those whose
// notification is owed.
func (s *Store) indexIDs(ctx context.Context, ids []string) error {
	valid := ids[:0:0]
	for _, id := range ids {
		if ValidID(id) {
			valid = append(valid, id)
		}
	}
	records, err := s.loadIDs(ctx, valid)
	if err != nil {
		return err
	}
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, e := range records {
			if e == nil {
				continue
			}
			entry := indexEntry(e)
			p.ZAdd(ctx, userIndexKey(e.User.Key()), redis.Z{Member: packEntry(entry)})
			p.PExpire(ctx, userIndexKey(e.User.Key()), s.keepIndex(e))
			p.ZAdd(ctx, flowsKey(bucketOf(e.ID)), redis.Z{Member: entry})
			if e.NotificationOwed() {
				p.ZAdd(ctx, owedKey(bucketOf(e.ID)), redis.Z{Score: float64(e.Delivery.QueuedAt.UnixMilli()), Member: e.ID})
			}
		}
		return nil
	})
	return err
}
