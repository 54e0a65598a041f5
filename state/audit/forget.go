package audit

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/state"
)

// UserForgotten is the event of an operator's forgetting a user: its User is the tombstone
// that stands for the user in the trail from then on.
const UserForgotten = "user_forgotten"

// rewriteScript copies the next part of one bucket of the trail (KEYS[1]) into a copy
// (KEYS[2], in the same slot): at most ARGV[3] entries after position ARGV[2] ("-" to
// begin, which empties the copy first), each at its own position, with the event documents
// of ARGV[4...] (pairs of a position and a document) in place of what those positions
// hold. A stream's entries cannot change, and an entry cannot be added before the last
// one, so the copy is what changes them: once a part comes short (the bucket's end, with
// whatever was appended meanwhile), the same script renames the copy over the bucket, so
// that nothing appended is lost. Parts keep each script short (Redis serves nobody else
// while one runs). KEYS[3] is the lock of the bucket's rewrite, which must still hold
// ARGV[1]. It answers how many entries it changed and the position to continue after, ""
// when the copy has replaced the bucket.
var rewriteScript = redis.NewScript(`
if redis.call("GET", KEYS[3]) ~= ARGV[1] then return redis.error_reply("the lock of the audit bucket's rewrite was lost") end
redis.call("PEXPIRE", KEYS[3], ARGV[4])
local docs = {}
for i = 5, #ARGV, 2 do docs[ARGV[i]] = ARGV[i + 1] end
if ARGV[2] == "-" then redis.call("DEL", KEYS[2]) end
local limit = tonumber(ARGV[3])
local batch = redis.call("XRANGE", KEYS[1], ARGV[2], "+", "COUNT", limit)
local changed = 0
for _, entry in ipairs(batch) do
  local id, fields = entry[1], entry[2]
  if docs[id] then
    fields = {"e", docs[id]}
    changed = changed + 1
  end
  redis.call("XADD", KEYS[2], id, unpack(fields))
end
if #batch < limit then
  if redis.call("EXISTS", KEYS[2]) == 1 then
    redis.call("RENAME", KEYS[2], KEYS[1])
    redis.call("PERSIST", KEYS[1])
  end
  return {changed, ""}
end
redis.call("PEXPIRE", KEYS[2], ARGV[4])
return {changed, "(" .. batch[#batch][1]}`)

// rewritePart is how many entries one run of rewriteScript copies: about 4 ms of Redis's
// time (BenchmarkForgetInAFullBucket: 3.8 ms a part).
const rewritePart = 500

// rewriteLease is how long a bucket's rewrite holds its lock, and its copy lives, after
// its last part: a Forget that stopped part way leaves neither for longer.
const rewriteLease = time.Minute

// ErrRewriting says that another Forget is rewriting a bucket of the trail.
var ErrRewriting = errors.New("another forget is rewriting the audit trail: run it again in a minute")

// forgetBatch is how many entries of a bucket Forget reads at once.
const forgetBatch = 1000

// Forget replaces, in every event of the trail about the user whose key is userKey (and
// whose subject is subject), the user's identity by tombstone: its issuer, subject and
// key, and the subject where a reason quotes it; the client address of such an event is
// removed. The events themselves stay, at their positions, so that the trail still says
// what happened and in which order, about someone it no longer names. It returns how many
// events it changed.
//
// A bucket that holds such an event is rewritten whole, in parts of rewritePart entries
// (rewriteScript), one Forget at a time (ErrRewriting otherwise). An event about the user
// appended between the read and the rewrite of its bucket keeps the identity: forget a user
// who no longer uses urlflow (its sessions are ended first, package forget).
func (t *Trail) Forget(ctx context.Context, userKey, subject string, tombstone state.User) (int, error) {
	changed := 0
	for b := range Buckets {
		docs, err := t.tombstoned(ctx, Key(b), userKey, subject, tombstone)
		if err != nil {
			return changed, err
		}
		if len(docs) == 0 {
			continue
		}
		n, err := t.rewrite(ctx, b, docs)
		changed += n
		if err != nil {
			return changed, err
		}
	}
	return changed, nil
}

// rewrite rewrites bucket b with docs (tombstoned's pairs, in the order of their
// positions) in place of what their positions hold, and returns how many it changed.
func (t *Trail) rewrite(ctx context.Context, b int, docs []any) (int, error) {
	lock, token := Key(b)+":rewriting", rand.Text()
	got, err := t.rdb.SetNX(ctx, lock, token, rewriteLease).Result()
	if err != nil {
		return 0, fmt.Errorf("lock audit bucket %d: %w", b, err)
	}
	if !got {
		return 0, ErrRewriting
	}
	defer releaseScript.Run(context.WithoutCancel(ctx), t.rdb, []string{lock}, token)
	keys := []string{Key(b), Key(b) + ":rewrite", lock}
	changed := 0
	for after := "-"; ; {
		// Only the documents of positions still ahead go with each part.
		for len(docs) > 0 && after != "-" && !positionAfter(docs[0].(string), strings.TrimPrefix(after, "(")) {
			docs = docs[2:]
		}
		args := append([]any{token, after, rewritePart, rewriteLease.Milliseconds()}, docs...)
		res, err := rewriteScript.Run(ctx, t.rdb, keys, args...).Slice()
		if err != nil || len(res) != 2 {
			return changed, fmt.Errorf("rewrite audit bucket %d: %w", b, err)
		}
		n, _ := res[0].(int64)
		changed += int(n)
		if after, _ = res[1].(string); after == "" {
			return changed, nil
		}
	}
}

// releaseScript deletes a lock (KEYS[1]) if it still holds ARGV[1].
var releaseScript = redis.NewScript(`
if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end
return 0`)

// positionAfter reports whether stream position a (MS-SEQ) comes after b.
func positionAfter(a, b string) bool {
	ams, aseq, _ := strings.Cut(a, "-")
	bms, bseq, _ := strings.Cut(b, "-")
	am, _ := strconv.ParseUint(ams, 10, 64)
	bm, _ := strconv.ParseUint(bms, 10, 64)
	if am != bm {
		return am > bm
	}
	as, _ := strconv.ParseUint(aseq, 10, 64)
	bs, _ := strconv.ParseUint(bseq, 10, 64)
	return as > bs
}

// tombstoned reads the bucket key and returns, for each event about the user whose key is
// userKey, its position and its document with the user replaced by tombstone, as the
// arguments of rewriteScript.
func (t *Trail) tombstoned(ctx context.Context, key, userKey, subject string, tombstone state.User) ([]any, error) {
	var docs []any
	for from := "-"; ; {
		msgs, err := t.rdb.XRangeN(ctx, key, from, "+", forgetBatch).Result()
		if err != nil {
			return nil, fmt.Errorf("read audit trail: %w", err)
		}
		for _, m := range msgs {
			doc, _ := m.Values["e"].(string)
			if !strings.Contains(doc, userKey) && !strings.Contains(doc, subject) {
				continue
			}
			var e Event
			if json.Unmarshal([]byte(doc), &e) != nil || !e.isAbout(userKey, subject) {
				continue
			}
			e = e.withUser(tombstone, subject)
			out, err := json.Marshal(e)
			if err != nil {
				return nil, fmt.Errorf("encode a tombstoned audit event: %w", err)
			}
			docs = append(docs, m.ID, string(out))
		}
		if len(msgs) < forgetBatch {
			return docs, nil
		}
		from = "(" + msgs[len(msgs)-1].ID
	}
}

// isAbout reports whether e is about the user whose key is userKey and whose subject is
// subject.
func (e Event) isAbout(userKey, subject string) bool {
	return e.UserKey == userKey || (e.User != nil && (state.User{Issuer: e.User.Issuer, Subject: e.User.Subject}).Key() == userKey)
}

// withUser returns e about tombstone instead of its user, whose subject was subject, and
// without its client address.
func (e Event) withUser(tombstone state.User, subject string) Event {
	e.ID = ""
	e.Address = ""
	e.Reason = Unquote(e.Reason, subject, tombstone.Subject)
	e.User = nil
	return e.About(tombstone)
}

// minQuotedSubject is the shortest subject Unquote replaces: a shorter one would match
// words that do not name the user.
const minQuotedSubject = 4

// Unquote returns text with subject, where it quotes it, replaced by tombstone: for the
// reasons of the events about a forgotten user, and of the forgetting itself (an operator
// may name the person whose data they erase).
func Unquote(text, subject, tombstone string) string {
	if len(subject) < minQuotedSubject {
		return text
	}
	return strings.ReplaceAll(text, subject, tombstone)
}
