package flow

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// casScript runs a batch of writes in one user's slot if what the caller read has not
// changed: the record KEYS[1] still reads ARGV[1] (the empty string: it does not exist)
// and, unless ARGV[2] is "-", the key KEYS[2] still exists ("1") or not ("0"). ARGV[3] is
// the number of writes; each follows as its number of arguments, then the arguments: a
// Redis command, or historyOp and the arguments of append_history (historyFunction). The
// other KEYS are the keys the writes touch. It answers 1 when it wrote, 0 when it found a
// change and wrote nothing. One command in one round trip, where WATCH, GET, MULTI … EXEC
// took three round trips and as many commands as the writes plus three.
var casScript = redis.NewScript(historyFunction + `
local cur = redis.call("GET", KEYS[1])
if cur == false then cur = "" end
if cur ~= ARGV[1] then return 0 end
if ARGV[2] ~= "-" and tostring(redis.call("EXISTS", KEYS[2])) ~= ARGV[2] then return 0 end
local i = 4
for c = 1, tonumber(ARGV[3]) do
  local n = tonumber(ARGV[i])
  if ARGV[i + 1] == "` + historyOp + `" then
    append_history(unpack(ARGV, i + 2, i + n))
  else
    redis.call(unpack(ARGV, i + 1, i + n))
  end
  i = i + n + 1
end
return 1`)

// batch collects the writes of one step without sending them: the step's code queues them
// as on any redis.Pipeliner, and runIf sends them all in one script. The script publishes
// the step's notice too (queueNotice), so that a notice leaves only with the change it
// announces, in the same round trip.
type batch struct {
	redis.Pipeliner
	// after holds the writes outside the user's slot (outside), on a Cluster only.
	after []func(redis.Pipeliner)
}

func (s *Store) newBatch() *batch { return &batch{Pipeliner: s.rdb.Pipeline()} }

// outside queues the writes of fn, to keys outside the user's slot (the deadline index).
// On one server or behind Sentinel they go in the step's script; on a Cluster, where a
// script stays in one slot, writeAfter sends them in a round trip of their own to the node
// that holds them, once the script has written.
func (s *Store) outside(b *batch, fn func(redis.Pipeliner)) {
	if s.cluster {
		b.after = append(b.after, fn)
		return
	}
	fn(b)
}

// writeAfter sends the writes that outside kept for after the script (on a Cluster).
func (s *Store) writeAfter(ctx context.Context, b *batch) error {
	if len(b.after) == 0 {
		return nil
	}
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, fn := range b.after {
			fn(p)
		}
		return nil
	})
	return err
}

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
// exist) and, when exists is not nil, the key other still exists as *exists says. It
// reports whether it wrote; false means that something the caller read has changed since.
func (s *Store) runIf(ctx context.Context, key string, read []byte, other string, exists *bool, b *batch) (bool, error) {
	defer b.Discard()
	keys := []string{key, key}
	args := []any{string(read), "-"}
	if exists != nil {
		keys[1], args[1] = other, "0"
		if *exists {
			args[1] = "1"
		}
	}
	cmds := b.Cmds()
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
	ran, err := casScript.Run(ctx, s.rdb, keys, args...).Int()
	if err != nil {
		return false, fmt.Errorf("write in one step: %w", err)
	}
	return ran == 1, nil
}
