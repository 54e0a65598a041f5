package flow

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/state"
)

// An elicitation's history keeps its first HistoryFirst entries and its newest
// HistoryNewest entries. The entries between them are dropped into one HistoryDropped
// entry that counts their events, so a history has at most HistoryFirst + 1 +
// HistoryNewest entries however many events a link draws (a page reloaded by another user
// again and again, a client that answers again and again). The first entries say how the
// flow began; the newest how it stands or ended.
const (
	HistoryFirst  = 10
	HistoryNewest = 90
)

// HistoryDropped is not an event: it is the Entry that stands, in a history, for the entries
// dropped between its first and its newest.
const HistoryDropped Event = "history_dropped"

// droppedReason is the reason of the HistoryDropped entry.
const droppedReason = "events dropped here to keep the history short; count says how many"

// historyScript appends the entry ARGV[1] to the history KEYS[1] and sets the key's lifetime
// to ARGV[2] milliseconds. An entry identical to the newest one but for its times is counted
// on it instead (count, lastAt). When the history then has more than ARGV[3] + ARGV[4]
// entries, the entries after the first ARGV[3] and before the newest ARGV[4] become one entry
// of event ARGV[5], actor ARGV[6] and reason ARGV[7], which counts their events and keeps
// when the first and the last of them happened and the states before and after them. The
// entries it replaces are overwritten with "" (no entry is empty) and removed with one LREM
// from the head, so an append to a history that is capped already costs two LSETs and an
// LREM that stop ARGV[3] + 2 elements from the head, however long the history was.
//
// It runs inside the MULTI of the step that records the event, and is sent whole (EVAL, not
// EVALSHA; Redis keeps it compiled all the same): a script that Redis no longer knows (after
// a restart or a failover) would fail inside the MULTI while the rest of the step is applied.
var historyScript = redis.NewScript(`
local key, first, newest, dropped = KEYS[1], tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5]
local function decode(s)
  if not s then return nil end
  local ok, v = pcall(cjson.decode, s)
  if ok and type(v) == "table" then return v end
  return nil
end
local function events(e) return tonumber(e.count) or 1 end
local entry = decode(ARGV[1])
local last = decode(redis.call("LINDEX", key, -1))
if entry and last and last.event ~= dropped and last.event == entry.event and last.actor == entry.actor and
    last.from == entry.from and last.to == entry.to and last.reason == entry.reason then
  last.count = events(last) + events(entry)
  last.lastAt = entry.lastAt or entry.at
  redis.call("LSET", key, -1, cjson.encode(last))
else
  local n = redis.call("RPUSH", key, ARGV[1])
  if n > first + newest then
    local gone = redis.call("LRANGE", key, first, n - newest - 1)
    local mark, from = decode(gone[1]), 2
    if not mark or mark.event ~= dropped then
      mark, from = {event = dropped, actor = ARGV[6], reason = ARGV[7], count = 0}, 1
    end
    for i = from, #gone do
      local e = decode(gone[i]) or {}
      if mark.count == 0 then mark.at, mark.from = e.at, e.from end
      mark.count = mark.count + events(e)
      mark.lastAt, mark.to = e.lastAt or e.at, e.to
    end
    redis.call("LSET", key, first + #gone - 1, cjson.encode(mark))
    for i = 0, #gone - 2 do redis.call("LSET", key, first + i, "") end
    if #gone > 1 then redis.call("LREM", key, #gone - 1, "") end
  end
end
redis.call("PEXPIRE", key, ARGV[2])
return 1`)

// appendHistory queues on p the append of entry to e's history (historyScript).
func (s *Store) appendHistory(ctx context.Context, p redis.Pipeliner, e *Elicitation, entry Entry) error {
	line, err := json.Marshal(entry)
	if err != nil {
		return fmt.Errorf("encode history of %s: %w", e.ID, err)
	}
	historyScript.Eval(ctx, p, []string{historyKey(e.User.Key(), e.ID)},
		line, s.keep(e).Milliseconds(), HistoryFirst, HistoryNewest, string(HistoryDropped), string(state.ActorSystem), droppedReason)
	return nil
}
