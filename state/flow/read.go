package flow

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/state"
)

// userKeyOf returns the user key of elicitation id: opened from the ID, or for an ID of
// the legacy form remembered or read from the index.
func (s *Store) userKeyOf(ctx context.Context, id string) (string, error) {
	if uk, ok := s.ids.userKey(id); ok {
		return uk, nil
	}
	if !legacyIDPattern.MatchString(id) {
		return "", state.ErrNotFound
	}
	s.mu.Lock()
	uk, ok := s.owners.Get(id, s.now())
	s.mu.Unlock()
	if ok {
		return uk, nil
	}
	uk, err := s.rdb.Get(ctx, indexKey(id)).Result()
	if errors.Is(err, redis.Nil) {
		return "", state.ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("look up elicitation %s: %w", id, err)
	}
	s.rememberOwner(id, uk)
	return uk, nil
}

// rememberOwner notes that elicitation id is user key uk's.
func (s *Store) rememberOwner(id, uk string) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.owners.Set(id, uk, now.Add(ownersTTL), now)
}

// load reads elicitation id of user key uk, and remembers it as seen.
func (s *Store) load(ctx context.Context, uk, id string) (*Elicitation, error) {
	e, doc, err := decodeRecord(id, s.rdb.Get(ctx, elicitationKey(uk, id)))
	if err == nil {
		s.see(e, doc)
	}
	return e, err
}

// seenRecordEntry is a record as this replica last saw it: as stored, and decoded.
type seenRecordEntry struct {
	doc []byte
	e   Elicitation
}

// see remembers e, stored as doc, as the record of its elicitation as this replica just
// read or wrote it, unless the copy kept is of a later revision: a read that was on its way
// while this replica wrote the record, or the answer of a step that wrote before another
// step whose answer came first, brings an older record, which must not replace the newer
// copy. (An older copy once sent a browser that had moved a flow on back to its consent
// page.) Records of revision zero, written before revisions, replace each other.
func (s *Store) see(e *Elicitation, doc []byte) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.seen.Get(e.ID, now); ok && e.Revision <= cur.e.Revision && cur.e.Revision > 0 {
		return
	}
	s.seen.Set(e.ID, seenRecordEntry{doc: doc, e: *e}, now.Add(seenTTL), now)
}

// waitEnding waits, when this replica is writing a transition that ends elicitation id,
// until its outcome is in seen: its script's notice can arrive before its answer.
func (s *Store) waitEnding(ctx context.Context, id string) error {
	s.mu.Lock()
	ending := s.ending[id]
	s.mu.Unlock()
	if ending == nil {
		return nil
	}
	select {
	case <-ending:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// beginEnding notes that this replica is writing a transition that ends elicitation id,
// and returns the function to call once its outcome is in seen.
func (s *Store) beginEnding(id string) func() {
	ch := make(chan struct{})
	s.mu.Lock()
	s.ending[id] = ch
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		if s.ending[id] == ch {
			delete(s.ending, id)
		}
		s.mu.Unlock()
		close(ch)
	}
}

// seeWritten remembers e as step b just wrote it: with the bytes writeRecord encoded when
// b wrote e's record, rather than encoding it again.
func (s *Store) seeWritten(b *batch, e *Elicitation) {
	doc := b.record
	if b.written != e {
		var err error
		if doc, err = json.Marshal(e); err != nil {
			doc = nil
		}
	}
	if doc != nil {
		s.see(e, doc)
	}
	s.settled(e)
}

// seenRecord returns the record of elicitation id as this replica read or wrote it in the
// last two minutes, if it did; the step that uses it must check that it still reads so
// (runIf). The record is a copy of the one kept, which shares what its pointers point to:
// change a field, never what a pointer field points to.
func (s *Store) seenRecord(id string) (*Elicitation, []byte, bool) {
	s.mu.Lock()
	entry, ok := s.seen.Get(id, s.now())
	s.mu.Unlock()
	if !ok {
		return nil, nil, false
	}
	e := entry.e
	return &e, entry.doc, true
}

// decodeRecord decodes the answer of a GET of elicitation id's record, and returns it with
// the record as stored, which a step that changes it compares against (runIf).
func decodeRecord(id string, get *redis.StringCmd) (*Elicitation, []byte, error) {
	doc, err := get.Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil, state.ErrNotFound
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read elicitation %s: %w", id, err)
	}
	e, err := decodeDoc(id, doc)
	return e, doc, err
}

func decodeDoc(id string, doc []byte) (*Elicitation, error) {
	var e Elicitation
	if err := json.Unmarshal(doc, &e); err != nil {
		return nil, fmt.Errorf("decode elicitation %s: %w", id, err)
	}
	return &e, nil
}

// read reads elicitation id of user key uk as stored and, when other is not empty, whether
// the key other exists, in one round trip.
func (s *Store) read(ctx context.Context, uk, id, other string) (*Elicitation, []byte, bool, error) {
	var get *redis.StringCmd
	var exists *redis.IntCmd
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		get = p.Get(ctx, elicitationKey(uk, id))
		if other != "" {
			exists = p.Exists(ctx, other)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, nil, false, fmt.Errorf("read elicitation %s: %w", id, err)
	}
	e, doc, err := decodeRecord(id, get)
	if err != nil {
		return nil, nil, false, err
	}
	s.see(e, doc)
	return e, doc, exists != nil && exists.Val() > 0, nil
}

// readForChange is read for an attempt of a step that changes elicitation id, starting
// from the record as from says when it is not nil (as this replica last saw it, or as the
// step's script answered when it found the record changed), without a round trip; whether
// other exists is then guessed from the record (the credential a flow replaces exists).
// The step's script checks both.
func (s *Store) readForChange(ctx context.Context, uk, id, other string, from []byte) (*Elicitation, []byte, bool, error) {
	if from != nil {
		if e, doc, ok := s.seenRecord(id); ok && bytes.Equal(doc, from) {
			return e, doc, other != "" && e.Replace, nil // decoded already
		}
		if e, err := decodeDoc(id, from); err == nil {
			return e, from, other != "" && e.Replace, nil
		}
	}
	return s.read(ctx, uk, id, other)
}

// seenDoc returns the record of elicitation id as this replica last saw it, or nil.
func (s *Store) seenDoc(id string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if entry, ok := s.seen.Get(id, s.now()); ok {
		return entry.doc
	}
	return nil
}

// A ReadOption changes what Read may answer with and what it reads along.
type ReadOption func(*readConfig)

type readConfig struct {
	// copyWill says when this replica's copy will do.
	copyWill func(*Elicitation) bool
	// alongKey is read too, into alongValue.
	alongKey   string
	alongValue *[]byte
}

// IfCopy lets Read answer with the copy of the record this replica read or wrote in the
// last two minutes, without a round trip, when will says that copy will do: for example
// (*Elicitation).Ended, since an ended flow never changes again. A transition this replica
// is writing that ends the flow is waited for first: its script's notice, which callers
// act on, can arrive before its answer. With Along, no copy will do: the other key is
// read from Redis, and the record with it.
func IfCopy(will func(*Elicitation) bool) ReadOption {
	return func(c *readConfig) { c.copyWill = will }
}

// Along makes Read read the key too, in the same round trip (one MGET when it is in the
// user's slot of the elicitation, a signed-in browser session of the same user, say), and
// set *value to what it holds, nil if nothing. *value is set also when the elicitation
// does not exist (state.ErrNotFound).
func Along(key string, value *[]byte) ReadOption {
	return func(c *readConfig) { c.alongKey, c.alongValue = key, value }
}

// Read returns elicitation id, read from Redis unless an option lets a copy do. A running
// elicitation whose deadline has passed is moved to expired first, so a reader never sees
// a flow running past its deadline.
func (s *Store) Read(ctx context.Context, id string, opts ...ReadOption) (*Elicitation, error) {
	var cfg readConfig
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.copyWill != nil && cfg.alongKey == "" {
		if err := s.waitEnding(ctx, id); err != nil {
			return nil, err
		}
		if e, _, ok := s.seenRecord(id); ok && cfg.copyWill(e) {
			return e, nil
		}
	}
	if cfg.alongKey != "" {
		return s.readAlong(ctx, id, cfg.alongKey, cfg.alongValue)
	}
	uk, err := s.userKeyOf(ctx, id)
	if err != nil {
		return nil, err
	}
	e, _, err := s.expireIfOverdue(ctx, uk, id)
	return e, err
}

// Seen returns elicitation id as this replica last read or wrote it in the last two
// minutes, if it did, without a round trip: a hint that may be stale, for a step whose
// write checks it (Apply starts from the same copy). Whose an elicitation is never
// changes.
func (s *Store) Seen(id string) (*Elicitation, bool) {
	e, _, ok := s.seenRecord(id)
	return e, ok
}

// readAlong is Read with Along(other, value).
func (s *Store) readAlong(ctx context.Context, id, other string, value *[]byte) (*Elicitation, error) {
	uk, err := s.userKeyOf(ctx, id)
	if errors.Is(err, state.ErrNotFound) {
		val, err := valueOf(s.rdb.Get(ctx, other))
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", other, err)
		}
		*value = val
		return nil, state.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	doc, otherVal, err := s.readTwo(ctx, elicitationKey(uk, id), other, strings.HasPrefix(other, state.UserTag(uk)))
	*value = otherVal
	if err != nil {
		return nil, fmt.Errorf("read elicitation %s: %w", id, err)
	}
	if doc == nil {
		return nil, state.ErrNotFound
	}
	e, err := decodeDoc(id, doc)
	if err != nil {
		return nil, err
	}
	s.see(e, doc)
	e, _, err = s.current(ctx, e)
	return e, err
}

// readTwo reads keys a and b in one round trip: one MGET when they are in one slot, two
// GETs in a pipeline otherwise. A key that does not exist reads as nil.
func (s *Store) readTwo(ctx context.Context, a, b string, oneSlot bool) ([]byte, []byte, error) {
	if oneSlot {
		vals, err := s.rdb.MGet(ctx, a, b).Result()
		if err != nil {
			return nil, nil, err
		}
		return bytesOf(vals[0]), bytesOf(vals[1]), nil
	}
	var ga, gb *redis.StringCmd
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		ga, gb = p.Get(ctx, a), p.Get(ctx, b)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, nil, err
	}
	va, err := valueOf(ga)
	if err != nil {
		return nil, nil, err
	}
	vb, err := valueOf(gb)
	return va, vb, err
}

// bytesOf is an MGET value as bytes, nil for a key that does not exist.
func bytesOf(v any) []byte {
	if str, ok := v.(string); ok {
		return []byte(str)
	}
	return nil
}

// valueOf is a GET's value, nil for a key that does not exist.
func valueOf(get *redis.StringCmd) ([]byte, error) {
	v, err := get.Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	return v, err
}

// expireIfOverdue reads elicitation id and expires it if its deadline has passed. It
// reports whether this call expired it.
func (s *Store) expireIfOverdue(ctx context.Context, userKey, id string) (*Elicitation, bool, error) {
	e, err := s.load(ctx, userKey, id)
	if err != nil {
		return nil, false, err
	}
	return s.current(ctx, e)
}

// current returns e, or e moved to expired when its deadline has passed; it reports whether
// this call expired it.
func (s *Store) current(ctx context.Context, e *Elicitation) (*Elicitation, bool, error) {
	if !e.Overdue(s.now()) {
		return e, false, nil
	}
	c, err := s.Apply(ctx, e.ID, DeadlinePassed, state.ActorSystem, "deadline passed")
	if err != nil {
		return nil, false, err
	}
	return c.Elicitation, c.Changed(), nil
}

// History returns the history of elicitation id, oldest first: at most HistoryFirst + 1 +
// HistoryNewest entries, some of which may stand for several events (Entry).
func (s *Store) History(ctx context.Context, id string) ([]Entry, error) {
	uk, err := s.userKeyOf(ctx, id)
	if err != nil {
		return nil, err
	}
	var list *redis.StringSliceCmd
	var packed *redis.StringCmd
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		packed = p.Get(ctx, packedHistoryKey(uk, id))
		list = p.LRange(ctx, historyKey(uk, id), 0, -1)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("read history of %s: %w", id, err)
	}
	lines := list.Val()
	if packed.Val() != "" {
		older, err := unpackHistory(packed.Val())
		if err != nil {
			return nil, fmt.Errorf("read history of %s: %w", id, err)
		}
		lines = append(older, lines...)
	}
	entries := make([]Entry, 0, len(lines))
	for _, l := range lines {
		var en Entry
		if err := json.Unmarshal([]byte(l), &en); err != nil {
			return nil, fmt.Errorf("decode history of %s: %w", id, err)
		}
		entries = append(entries, en)
	}
	return entries, nil
}
