package flow

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/state/audit"
)

// casScript runs a batch of writes in one user's slot if what the caller read has not
// changed. ARGV[2] has one character per key KEYS[2] … KEYS[1+n]: "=" when the key must
// still hold a value, given in order from ARGV[3] on, and "1" or "0" when it must still
// exist or not. Then the record KEYS[1] must still read ARGV[1] (the empty string: it does
// not exist). After the values comes the number of writes; each follows as its number of
// arguments, then the arguments: a Redis command, historyOp and the arguments of
// append_history (historyFunction), or delIfOp, a key and a value (delete the key if it
// holds the value). The other KEYS are the keys the writes touch. It answers {1} when it
// wrote; {0, record} when the record changed (record as it reads now, so that the step
// starts over from it without reading it), {0} when a key's existence changed, and {2}
// when a key's value changed, writing nothing. One command in one round trip, where WATCH, GET, MULTI … EXEC took
// three round trips and as many commands as the writes plus three.
var casScript = redis.NewScript(historyFunction + `
local i = 3
local stale = false
for c = 1, #ARGV[2] do
  if string.sub(ARGV[2], c, c) == "=" then
    if redis.call("GET", KEYS[1 + c]) ~= ARGV[i] then stale = true end
    i = i + 1
  end
end
if stale then return {2} end
local cur = redis.call("GET", KEYS[1])
if cur == false then cur = "" end
if cur ~= ARGV[1] then return {0, cur} end
for c = 1, #ARGV[2] do
  local f = string.sub(ARGV[2], c, c)
  if f ~= "=" and tostring(redis.call("EXISTS", KEYS[1 + c])) ~= f then return {0} end
end
local writes = tonumber(ARGV[i])
i = i + 1
for c = 1, writes do
  local n = tonumber(ARGV[i])
  local op = ARGV[i + 1]
  if op == "` + historyOp + `" then
    append_history(unpack(ARGV, i + 2, i + n))
  elseif op == "` + delIfOp + `" then
    if redis.call("GET", ARGV[i + 2]) == ARGV[i + 3] then redis.call("DEL", ARGV[i + 2]) end
  else
    redis.call(unpack(ARGV, i + 1, i + n))
  end
  i = i + n + 1
end
return {1}`)

// delIfOp names, in a batch (casScript), the deletion of a key if it still holds a value:
// it is not a Redis command.
const delIfOp = "urlflow.delif"

// check is what a step read of a key other than the record: whether it exists or, when
// value is not nil, the value it holds.
type check struct {
	key    string
	exists bool
	value  []byte
}

// ranResult is what casScript answered.
type ranResult int

const (
	ranChanged ranResult = 0 // the record or a key's existence changed: read again
	ranWrote   ranResult = 1
	ranStale   ranResult = 2 // a key's value changed: what the caller started from is stale
)

// batch collects the writes of one step without sending them: the step's code queues them
// as on any redis.Pipeliner, and runIf sends them all in one script. The script publishes
// the step's notice too (queueNotice), so that a notice leaves only with the change it
// announces, in the same round trip.
type batch struct {
	redis.Pipeliner
	// after holds the writes outside the user's slot (outside), on a Cluster only.
	after []func(redis.Pipeliner)
	// indexes holds the step's writes of the deployment-wide indexes (writeIndex), on a
	// Cluster only.
	indexes []indexWrite
	// audits holds the step's audit events on a Cluster, which go with the replica's next
	// batch of them once the step has written (trail.go).
	audits []audit.Event
	// record is the encoded record of written, the elicitation whose record the step
	// writes (writeRecord), which seeWritten keeps once the step has written.
	written *Elicitation
	record  []byte
}

func (s *Store) newBatch() *batch { return &batch{Pipeliner: s.rdb.Pipeline()} }

// outside queues the writes of fn, to keys outside the user's slot (a service's event
// stream, its webhook). On one server or behind Sentinel they go in the step's script; on a
// Cluster, where a script stays in one slot, writeAfter sends them in a round trip of their
// own to the node that holds them, once the script has written.
func (s *Store) outside(b *batch, fn func(redis.Pipeliner)) {
	if s.cluster {
		b.after = append(b.after, fn)
		return
	}
	fn(b)
}

// writeIndex queues w, a write of a deployment-wide index. On one server or behind Sentinel
// it goes in the step's script; on a Cluster, once the script has written (writeAfter), it
// goes into the replica's index queue, which sends the writes of all its flows together
// (indexQueue): the index's node then sees a round trip a second, not one per step.
func (s *Store) writeIndex(ctx context.Context, b *batch, w indexWrite) {
	if s.cluster {
		b.indexes = append(b.indexes, w)
		return
	}
	if w.remove {
		b.ZRem(ctx, w.key, w.member)
		return
	}
	b.ZAdd(ctx, w.key, redis.Z{Score: w.score, Member: w.member})
}

// writeAfter sends the writes that outside kept for after the script (on a Cluster). The
// step has written by then, so they are sent even when the request that made the step has
// ended, and tried again after a failure: a lost webhook or service event would otherwise
// leave no trace. (Each write is idempotent but a service event, which a reader may then
// see twice.)
func (s *Store) writeAfter(ctx context.Context, b *batch) error {
	for _, ev := range b.audits {
		s.audit.Later(ctx, ev)
	}
	s.indexes.add(b.indexes...)
	if len(b.after) == 0 {
		return nil
	}
	ctx = context.WithoutCancel(ctx)
	for attempt := 1; ; attempt++ {
		_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, fn := range b.after {
				fn(p)
			}
			return nil
		})
		if err == nil || attempt == writeAfterAttempts {
			return err
		}
		time.Sleep(writeAfterPause)
	}
}

// writeAfterOrLog is writeAfter for a step that has changed elicitation id already: the
// record is the truth, so a failure is logged, not returned.
func (s *Store) writeAfterOrLog(ctx context.Context, b *batch, id string) {
	if err := s.writeAfter(ctx, b); err != nil {
		s.log.WarnContext(ctx, "service event or webhook of a step not written", "elicitation_id", id, "err", err)
	}
}

// writeAfterAttempts and writeAfterPause bound writeAfter's tries.
const (
	writeAfterAttempts = 3
	writeAfterPause    = 100 * time.Millisecond
)

// queueNotice queues the notice of what happened to e on EventsChannel.
func (s *Store) queueNotice(ctx context.Context, b *batch, e *Elicitation, what NoticeKind) error {
	msg, err := json.Marshal(Notice{ID: e.ID, What: what, State: e.State, UserKey: e.User.Key(), SessionID: e.SessionID})
	if err != nil {
		return fmt.Errorf("encode notice of %s: %w", e.ID, err)
	}
	b.Publish(ctx, EventsChannel, msg)
	return nil
}

// runIf makes the writes of b if the record key still reads read (nil: it does not
// exist) and each key of checks still reads as it says. It reports whether it wrote, or
// why not; when the record changed, it returns the record as it reads now (nil if it no
// longer exists), to start over from.
func (s *Store) runIf(ctx context.Context, key string, read []byte, checks []check, b *batch) (ranResult, []byte, error) {
	defer b.Discard()
	cmds := b.Cmds()
	size := 3 + len(checks) // the record, the flags, the values of checks, the number of writes
	for _, c := range cmds {
		size += 1 + len(c.Args())
	}
	keys := make([]string, 1, 1+len(checks)+len(cmds))
	keys[0] = key
	flags := make([]byte, len(checks))
	args := make([]any, 2, size)
	args[0] = string(read)
	for i, c := range checks {
		keys = append(keys, c.key)
		switch {
		case c.value != nil:
			flags[i] = '='
			args = append(args, string(c.value))
		case c.exists:
			flags[i] = '1'
		default:
			flags[i] = '0'
		}
	}
	args[1] = string(flags)
	args = append(args, len(cmds))
	for _, c := range cmds {
		a := c.Args()
		if len(a) > 1 && c.Name() != "publish" { // a channel is not a key
			if k, ok := a[1].(string); ok {
				keys = append(keys, k) // every key a write touches is declared (Redis Cluster)
			}
		}
		args = append(args, len(a))
		args = append(args, a...)
	}
	answer, err := casScript.Run(ctx, s.rdb, keys, args...).Slice()
	if err != nil {
		return ranChanged, nil, fmt.Errorf("write in one step: %w", err)
	}
	code, _ := answer[0].(int64)
	var current []byte
	if len(answer) > 1 {
		if doc, _ := answer[1].(string); doc != "" {
			current = []byte(doc)
		}
	}
	return ranResult(code), current, nil
}
