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

// historyFunction is the Lua function append_history(key, line, ttl, first, newest,
// dropped, actor, reason), which the step that records an event runs inside its script
// (casScript): it appends the entry line to the history key and sets the key's lifetime to
// ttl milliseconds. An entry identical to the newest one but for its times is counted on it
// instead (count, lastAt). When the history then has more than first + newest entries, the
// entries after the first first and before the newest newest become one entry of event
// dropped, actor actor and reason reason, which counts their events and keeps when the
// first and the last of them happened and the states before and after them. The entries it
// replaces are overwritten with "" (no entry is empty) and removed with one LREM from the
// head, so an append to a history that is capped already costs two LSETs and an LREM that
// stop first + 2 elements from the head, however long the history was.
const historyFunction = `
local function append_history(key, line, ttl, first, newest, dropped, actor, reason)
  first, newest = tonumber(first), tonumber(newest)
  local function decode(s)
    if not s then return nil end
    local ok, v = pcall(cjson.decode, s)
    if ok and type(v) == "table" then return v end
    return nil
  end
  local function events(e) return tonumber(e.count) or 1 end
  local entry = decode(line)
  local last = decode(redis.call("LINDEX", key, -1))
  if entry and last and last.event ~= dropped and last.event == entry.event and last.actor == entry.actor and
      last.from == entry.from and last.to == entry.to and last.reason == entry.reason and last.by == entry.by then
    last.count = events(last) + events(entry)
    last.lastAt = entry.lastAt or entry.at
    redis.call("LSET", key, -1, cjson.encode(last))
  else
    local n = redis.call("RPUSH", key, line)
    if n > first + newest then
      local gone = redis.call("LRANGE", key, first, n - newest - 1)
      local mark, from = decode(gone[1]), 2
      if not mark or mark.event ~= dropped then
        mark, from = {event = dropped, actor = actor, reason = reason, count = 0}, 1
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
  redis.call("PEXPIRE", key, ttl)
end
`

// historyOp names, in a batch (casScript), the append of an entry to a history: it is not
// a Redis command, and is never sent as one.
const historyOp = "urlflow.history"

// appendHistory queues on p, a batch that runIf sends, the append of entry to e's history
// (historyFunction).
func (s *Store) appendHistory(ctx context.Context, p redis.Pipeliner, e *Elicitation, entry Entry) error {
	line, err := json.Marshal(entry)
	if err != nil {
		return fmt.Errorf("encode history of %s: %w", e.ID, err)
	}
	p.Do(ctx, historyOp, historyKey(e.User.Key(), e.ID), line, s.keep(e).Milliseconds(),
		HistoryFirst, HistoryNewest, string(HistoryDropped), string(state.ActorSystem), droppedReason)
	return nil
}
