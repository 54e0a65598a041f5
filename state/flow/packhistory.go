package flow

import (
	"bytes"
	"compress/flate"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Compaction. An ended flow whose completion notification is settled (written, given up,
// found with its session ended, or never owed) changes little after: a late answer of its
// client, a retry's link. Its history, a list of JSON lines (about 1.1 KB of Redis for the
// six entries of a secret flow), is then packed into one string, compressed against a
// dictionary of what histories say (packedHistoryKey: about 0.35 KB), by the replica that
// settled it, compactDelay later. An entry recorded after that goes to the list again, and
// History reads both. docs/performance.md ("Footprint") has the figures.

// compactDelay is how long after a flow settles its history is packed: the flow's last
// pages and status reads come before, and read the list as it was written.
const compactDelay = 10 * time.Second

// compactQueueLimit bounds the flows waiting to be packed on one replica (about 8 minutes of
// 200 flows a second, about 15 MB); past it, flows are left unpacked.
const compactQueueLimit = 100_000

// compactBatch is how many histories one round trip packs.
const compactBatch = 200

// packedMarker starts a packed history: a version byte, which no JSON line starts with.
const packedMarker = 1

// historyDictionary is what deflate starts from when it packs a history: the text that
// histories repeat (field names, events, actors, states, reasons urlflow writes). It is
// part of the stored format of packedMarker 1: never change it, add a marker for another.
const historyDictionary = `{"at":"2026-12-01T00:00:00.000000000Z","event":"created","actor":"client","to":"pending","reason":"` +
	`","event":"client_accept","actor":"client","from":"pending","to":"consented","reason":"the client accepted"}` +
	`,"event":"browser_open","actor":"user","from":"consented","to":"in_progress","reason":"the user opened the link"}` +
	`,"event":"page_continue","actor":"user","from":"in_progress","to":"in_progress","reason":"the user continued"}` +
	`,"event":"client_decline","event":"client_cancel","event":"cancel_requested","event":"no_answer","event":"deadline_passed",` +
	`"actor":"operator","by":"token ","actor":"service","actor":"other_user","count":2,"lastAt":"` +
	`"to":"declined","to":"cancelled","to":"expired","to":"unknown","to":"failed","reason":"deadline passed"}` +
	`,"event":"verified","actor":"user","from":"in_progress","to":"complete","reason":"the secret was verified and stored"}` +
	`,"event":"session_ended","actor":"system","from":"complete","to":"complete","reason":"the client session ended before it could be told"}` +
	`,"event":"notified","actor":"system","from":"complete","to":"complete","reason":"completion notification written on the tool call's stream"}`

// packHistory packs the lines of a history (JSON lines, or packed ones, which it opens)
// into one packed history.
func packHistory(lines []string) ([]byte, error) {
	var plain []string
	for _, l := range lines {
		if isPacked(l) {
			inner, err := unpackHistory(l)
			if err != nil {
				return nil, err
			}
			plain = append(plain, inner...)
			continue
		}
		plain = append(plain, l)
	}
	var out bytes.Buffer
	out.WriteByte(packedMarker)
	w := historyWriters.Get().(*flate.Writer)
	defer historyWriters.Put(w)
	w.Reset(&out)
	if _, err := io.WriteString(w, strings.Join(plain, "\n")); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// historyWriters keeps deflate's writers of packHistory for the next history: a new one
// allocates and clears about 1 MB of tables, which cost a flow more CPU than anything else
// it does (13 % of urlflow's at 32 users, docs/performance.md). Reset makes a used one
// the same as new, with the same dictionary.
var historyWriters = sync.Pool{New: func() any {
	w, err := flate.NewWriterDict(nil, flate.BestCompression, []byte(historyDictionary))
	if err != nil {
		panic(err) // only for a level out of range
	}
	return w
}}

// isPacked reports whether a history line is a packed history.
func isPacked(line string) bool { return len(line) > 0 && line[0] == packedMarker }

// unpackHistory returns the JSON lines of a packed history.
func unpackHistory(packed string) ([]string, error) {
	if !isPacked(packed) {
		return nil, errors.New("not a packed history")
	}
	r := flate.NewReaderDict(strings.NewReader(packed[1:]), []byte(historyDictionary))
	defer r.Close()
	text, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("unpack history: %w", err)
	}
	return strings.Split(string(text), "\n"), nil
}

// compactScript packs a history (KEYS[1], the list; KEYS[2], the packed string) if it still
// reads as its packer read it: ARGV[1] entries in the list, the last of them ARGV[2], and
// the packed string ARGV[3] ("" for none). It writes the packed history ARGV[4] with the
// list's lifetime and deletes the list, and answers 1; 0 when the history changed meanwhile
// (a later compaction takes it then).
var compactScript = redis.NewScript(`
if redis.call("LLEN", KEYS[1]) ~= tonumber(ARGV[1]) then return 0 end
if redis.call("LINDEX", KEYS[1], -1) ~= ARGV[2] then return 0 end
if (redis.call("GET", KEYS[2]) or "") ~= ARGV[3] then return 0 end
local ttl = redis.call("PTTL", KEYS[1])
if ttl <= 0 then return 0 end
redis.call("SET", KEYS[2], ARGV[4], "PX", ttl)
redis.call("DEL", KEYS[1])
return 1`)

// settled notes e, just written by this replica, for compaction once it has settled: ended,
// its notification not owed.
func (s *Store) settled(e *Elicitation) {
	if !e.State.Terminal() || e.NotificationOwed() {
		return
	}
	s.compactMu.Lock()
	defer s.compactMu.Unlock()
	if len(s.toCompact) < compactQueueLimit {
		s.toCompact = append(s.toCompact, compactItem{id: e.ID, userKey: e.User.Key(), due: s.now().Add(compactDelay)})
	}
}

// compactItem is a flow to pack the history of, when due.
type compactItem struct {
	id, userKey string
	due         time.Time
}

// compactDue packs the histories of the flows this replica settled whose compactDelay is
// over (all of them with everything), compactBatch a round trip, and returns how many it
// packed. A history that cannot be read or packed is left as it is.
func (s *Store) compactDue(ctx context.Context, everything bool) (int, error) {
	s.compactMu.Lock()
	now, n := s.now(), 0
	for n < len(s.toCompact) && (everything || !s.toCompact[n].due.After(now)) {
		n++
	}
	due := s.toCompact[:n:n]
	s.toCompact = s.toCompact[n:]
	s.compactMu.Unlock()
	packed := 0
	for len(due) > 0 {
		batch := due[:min(len(due), compactBatch)]
		due = due[len(batch):]
		k, err := s.compact(ctx, batch)
		packed += k
		if err != nil {
			return packed, err
		}
	}
	return packed, nil
}

// compact packs the histories of items: one round trip reads them, one more packs them.
func (s *Store) compact(ctx context.Context, items []compactItem) (int, error) {
	lists := make([]*redis.StringSliceCmd, len(items))
	packs := make([]*redis.StringCmd, len(items))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, it := range items {
			lists[i] = p.LRange(ctx, historyKey(it.userKey, it.id), 0, -1)
			packs[i] = p.Get(ctx, packedHistoryKey(it.userKey, it.id))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, fmt.Errorf("read histories to pack: %w", err)
	}
	var runs []*redis.Cmd
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, it := range items {
			lines, old := lists[i].Val(), packs[i].Val()
			if len(lines) == 0 {
				continue // packed already, or gone
			}
			if old != "" {
				lines = append([]string{old}, lines...)
			}
			doc, err := packHistory(lines)
			if err != nil {
				s.log.WarnContext(ctx, "history not packed", "elicitation_id", it.id, "err", err)
				continue
			}
			list := lists[i].Val()
			// EVAL, not EVALSHA: a pipeline cannot load a script it finds missing.
			runs = append(runs, compactScript.Eval(ctx, p, []string{historyKey(it.userKey, it.id), packedHistoryKey(it.userKey, it.id)},
				len(list), list[len(list)-1], old, doc))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, fmt.Errorf("pack histories: %w", err)
	}
	packed := 0
	for _, r := range runs {
		if n, _ := r.Int(); n == 1 {
			packed++
		}
	}
	return packed, nil
}
