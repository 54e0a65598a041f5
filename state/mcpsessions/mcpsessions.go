// Package mcpsessions keeps the live MCP sessions (2025-11-25) of every replica in Redis:
// which replica holds each, whose it is, and how many each user has, so that a user's
// sessions can be capped across replicas and the completion notifier and the recovery API
// can tell whether a session still lives.
//
// The one idea to hold: a registration lives only while its replica refreshes it; a
// replica that dies lets its sessions lapse, and nothing else has to clean up after it.
package mcpsessions

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/flow"
)

// Registry keeps the registrations.
type Registry struct {
	rdb redis.UniversalClient
	now func() time.Time
}

// New returns the Registry kept in rdb; now is time.Now if nil.
func New(rdb redis.UniversalClient, now func() time.Time) *Registry {
	if now == nil {
		now = time.Now
	}
	return &Registry{rdb: rdb, now: now}
}

// sessionKey names the registration of MCP session id.
func sessionKey(id string) string { return state.KeyPrefix + "ms:" + id }

// userSessionsKey names the sorted set of a user's live MCP sessions, on every replica,
// each scored by when its registration expires (Unix milliseconds), and of admissions in
// progress (members that start with "+").
func userSessionsKey(userKey string) string { return state.UserTag(userKey) + "mss" }

// Session is a live MCP session (2025-11-25) as registered by the replica that holds it.
type Session struct {
	ID        string           `json:"id"`
	User      state.User       `json:"user"`
	Replica   string           `json:"replica"`
	Client    state.ClientInfo `json:"client"`
	StartedAt time.Time        `json:"startedAt"`
	// LastUsedAt is when the session last received a request, and Busy whether a request
	// of it (a tool call that waits, for one) was in progress, as of the registration.
	LastUsedAt time.Time `json:"lastUsedAt,omitzero"`
	Busy       bool      `json:"busy,omitempty"`
}

// Register records that ms lives, for ttl, and counts it among its user's
// sessions until then. The holding replica refreshes it.
func (r *Registry) Register(ctx context.Context, ms Session, ttl time.Duration) error {
	doc, err := json.Marshal(ms)
	if err != nil {
		return fmt.Errorf("encode MCP session: %w", err)
	}
	expires := r.now().Add(ttl).UnixMilli()
	users := userSessionsKey(ms.User.Key())
	_, err = r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, sessionKey(ms.ID), doc, ttl)
		p.ZAdd(ctx, users, redis.Z{Score: float64(expires), Member: ms.ID})
		p.PExpire(ctx, users, ttl)
		return nil
	})
	if err != nil {
		return fmt.Errorf("register MCP session: %w", err)
	}
	return nil
}

// Live returns the registration of MCP session id, or ErrNotFound once it has
// ended or its replica stopped refreshing it.
func (r *Registry) Live(ctx context.Context, id string) (*Session, error) {
	var ms Session
	if err := state.DecodeJSON(r.rdb.Get(ctx, sessionKey(id)), "MCP session", &ms); err != nil {
		return nil, err
	}
	return &ms, nil
}

// replicaKey names the heartbeat of replica name.
func replicaKey(name string) string { return state.KeyPrefix + "replica:" + name }

// Beat records that replica name lives, for ttl; the replica beats more often than that.
// A session counts as ended once the replica that holds it stops beating, which is seconds
// after it dies or loses Redis, where its sessions' registrations last until they lapse.
func (r *Registry) Beat(ctx context.Context, name string, ttl time.Duration) error {
	if err := r.rdb.Set(ctx, replicaKey(name), r.now().UTC().Format(time.RFC3339Nano), ttl).Err(); err != nil {
		return fmt.Errorf("record that replica %s lives: %w", name, err)
	}
	return nil
}

// Why a session counts as ended (Ended).
const (
	// EndedUnregistered: its registration is gone. Its replica removes it when the client
	// closes the session, the session idles out or the replica shuts down, and it lapses
	// when the replica stops refreshing it.
	EndedUnregistered = "the session was closed (by its client, its idle timeout or its replica's shutdown) or its registration lapsed"
	// endedReplicaSilent is followed by the replica's name: the replica that holds the
	// session stopped beating (it died, or lost its connection to Redis).
	endedReplicaSilent = "the replica that held the session stopped answering: "
)

// Ended says, of each MCP session of ids, why it counts as ended: its registration is gone,
// or the replica that holds it stopped beating. Sessions that live are absent from the
// answer.
func (r *Registry) Ended(ctx context.Context, ids ...string) (map[string]string, error) {
	docs := make([]*redis.StringCmd, len(ids))
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			docs[i] = p.Get(ctx, sessionKey(id))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("read MCP sessions: %w", err)
	}
	ended := map[string]string{}
	replicaOf := map[string]string{} // session ID → replica, of those registered
	for i, id := range ids {
		var ms Session
		switch err := state.DecodeJSON(docs[i], "MCP session", &ms); {
		case errors.Is(err, state.ErrNotFound):
			ended[id] = EndedUnregistered
		case err != nil:
			return nil, err
		default:
			replicaOf[id] = ms.Replica
		}
	}
	if len(replicaOf) == 0 {
		return ended, nil
	}
	beats := map[string]*redis.IntCmd{}
	_, err = r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, name := range replicaOf {
			if beats[name] == nil {
				beats[name] = p.Exists(ctx, replicaKey(name))
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read replica heartbeats: %w", err)
	}
	for id, name := range replicaOf {
		if beats[name].Val() == 0 {
			ended[id] = endedReplicaSilent + name
		}
	}
	return ended, nil
}

// Forget removes the registration of user's MCP session id.
func (r *Registry) Forget(ctx context.Context, user state.User, id string) error {
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, sessionKey(id))
		p.ZRem(ctx, userSessionsKey(user.Key()), id)
		return nil
	})
	if err != nil {
		return fmt.Errorf("forget MCP session: %w", err)
	}
	return nil
}

// admitScript admits a new session of a user if the user has fewer than ARGV[2] live
// sessions (expired ones dropped first, ARGV[1] being now): it adds the admission ARGV[3]
// until ARGV[4], so that concurrent admissions count each other, and answers {1}.
// Otherwise it answers {0, the live sessions...}.
var admitScript = redis.NewScript(`
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", ARGV[1])
local live = redis.call("ZRANGE", KEYS[1], 0, -1)
if #live < tonumber(ARGV[2]) then
  redis.call("ZADD", KEYS[1], ARGV[4], ARGV[3])
  local ttl = tonumber(ARGV[4]) - tonumber(ARGV[1])
  if redis.call("PTTL", KEYS[1]) < ttl then redis.call("PEXPIRE", KEYS[1], ttl) end
  return {1}
end
local out = {0}
for _, id in ipairs(live) do
  if string.sub(id, 1, 1) ~= "+" then table.insert(out, id) end
end
return out`)

// Admission is a place among a user's MCP sessions, held while a new session starts.
type Admission struct {
	user  state.User
	token string
}

// Admit reserves a place for a new MCP session of user, for hold, if user has
// fewer than limit live sessions on all replicas (admissions in progress count). When the
// user has that many, it returns a nil Admission and the IDs of the live sessions, one of
// which the caller may end (Evict) before it tries again.
func (r *Registry) Admit(ctx context.Context, user state.User, limit int, hold time.Duration) (*Admission, []string, error) {
	now := r.now()
	a := &Admission{user: user, token: "+" + rand.Text()}
	res, err := admitScript.Run(ctx, r.rdb, []string{userSessionsKey(user.Key())},
		now.UnixMilli(), limit, a.token, now.Add(hold).UnixMilli()).Slice()
	if err != nil {
		return nil, nil, fmt.Errorf("count the user's MCP sessions: %w", err)
	}
	if len(res) > 0 && res[0] == int64(1) {
		return a, nil, nil
	}
	var live []string
	for _, v := range res[1:] {
		if id, ok := v.(string); ok {
			live = append(live, id)
		}
	}
	return nil, live, nil
}

// Release gives the place of admission a back: the session it was for is registered
// (Register counts it from then on) or did not start.
func (r *Registry) Release(ctx context.Context, a *Admission) error {
	if err := r.rdb.ZRem(ctx, userSessionsKey(a.user.Key()), a.token).Err(); err != nil {
		return fmt.Errorf("release MCP session admission: %w", err)
	}
	return nil
}

// Standing is what Admit's caller needs to choose a session to end.
type Standing struct {
	Session
	// Undelivered counts the completion notifications owed to the session.
	Undelivered int64
}

// Standings returns the registrations of user's sessions ids that still live,
// with the notifications owed to each.
func (r *Registry) Standings(ctx context.Context, user state.User, ids []string) ([]Standing, error) {
	docs := make([]*redis.StringCmd, len(ids))
	owed := make([]*redis.IntCmd, len(ids))
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			docs[i] = p.Get(ctx, sessionKey(id))
			owed[i] = p.SCard(ctx, flow.UndeliveredKey(user.Key(), id))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("read the user's MCP sessions: %w", err)
	}
	var out []Standing
	for i := range ids {
		var st Standing
		if err := state.DecodeJSON(docs[i], "MCP session", &st.Session); err != nil {
			if errors.Is(err, state.ErrNotFound) {
				continue // ended meanwhile
			}
			return nil, err
		}
		if st.User != user {
			continue
		}
		st.Undelivered = owed[i].Val()
		out = append(out, st)
	}
	return out, nil
}

// Evict stops counting user's session id among the user's sessions, so that a
// new one can take its place, and asks the replica that holds it to close it (a Notice of
// kind flow.NoticeCloseSession). It reports false when the session no longer counted (it ended,
// or a concurrent admission evicted it first).
func (r *Registry) Evict(ctx context.Context, user state.User, id string) (bool, error) {
	n, err := r.rdb.ZRem(ctx, userSessionsKey(user.Key()), id).Result()
	if err != nil {
		return false, fmt.Errorf("evict MCP session: %w", err)
	}
	if n == 0 {
		return false, nil
	}
	msg, err := json.Marshal(flow.Notice{What: flow.NoticeCloseSession, UserKey: user.Key(), SessionID: id})
	if err == nil {
		err = r.rdb.Publish(ctx, flow.EventsChannel, msg).Err()
	}
	if err != nil {
		return true, fmt.Errorf("ask to close MCP session: %w", err)
	}
	return true, nil
}

// EndAll ends every live MCP session of user (Evict: the replica that holds one closes it)
// and deletes their registrations. It returns how many it ended.
func (r *Registry) EndAll(ctx context.Context, user state.User) (int, error) {
	ids, err := r.rdb.ZRange(ctx, userSessionsKey(user.Key()), 0, -1).Result()
	if err != nil {
		return 0, fmt.Errorf("read the user's MCP sessions: %w", err)
	}
	ended := 0
	for _, id := range ids {
		if strings.HasPrefix(id, "+") {
			continue // an admission in progress: no session yet
		}
		if _, err := r.Evict(ctx, user, id); err != nil {
			return ended, err
		}
		if err := r.rdb.Del(ctx, sessionKey(id)).Err(); err != nil {
			return ended, fmt.Errorf("delete an MCP session's registration: %w", err)
		}
		ended++
	}
	return ended, nil
}
