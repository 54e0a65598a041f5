package flow

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/state"
)

func mcpSessionKey(id string) string { return state.KeyPrefix + "ms:" + id }

// MCPSession is a live MCP session (2025-11-25) as registered by the replica that holds it.
type MCPSession struct {
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

// RegisterMCPSession records that ms lives, for ttl, and counts it among its user's
// sessions until then. The holding replica refreshes it.
func (s *Store) RegisterMCPSession(ctx context.Context, ms MCPSession, ttl time.Duration) error {
	doc, err := json.Marshal(ms)
	if err != nil {
		return fmt.Errorf("encode MCP session: %w", err)
	}
	expires := s.now().Add(ttl).UnixMilli()
	users := userSessionsKey(ms.User.Key())
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, mcpSessionKey(ms.ID), doc, ttl)
		p.ZAdd(ctx, users, redis.Z{Score: float64(expires), Member: ms.ID})
		p.PExpire(ctx, users, ttl)
		return nil
	})
	if err != nil {
		return fmt.Errorf("register MCP session: %w", err)
	}
	return nil
}

// LiveMCPSession returns the registration of MCP session id, or ErrNotFound once it has
// ended or its replica stopped refreshing it.
func (s *Store) LiveMCPSession(ctx context.Context, id string) (*MCPSession, error) {
	var ms MCPSession
	if err := state.DecodeJSON(s.rdb.Get(ctx, mcpSessionKey(id)), "MCP session", &ms); err != nil {
		return nil, err
	}
	return &ms, nil
}

// ForgetMCPSession removes the registration of user's MCP session id.
func (s *Store) ForgetMCPSession(ctx context.Context, user state.User, id string) error {
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, mcpSessionKey(id))
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

// AdmitMCPSession reserves a place for a new MCP session of user, for hold, if user has
// fewer than limit live sessions on all replicas (admissions in progress count). When the
// user has that many, it returns a nil Admission and the IDs of the live sessions, one of
// which the caller may end (EvictMCPSession) before it tries again.
func (s *Store) AdmitMCPSession(ctx context.Context, user state.User, limit int, hold time.Duration) (*Admission, []string, error) {
	now := s.now()
	a := &Admission{user: user, token: "+" + rand.Text()}
	res, err := admitScript.Run(ctx, s.rdb, []string{userSessionsKey(user.Key())},
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
// (RegisterMCPSession counts it from then on) or did not start.
func (s *Store) Release(ctx context.Context, a *Admission) error {
	if err := s.rdb.ZRem(ctx, userSessionsKey(a.user.Key()), a.token).Err(); err != nil {
		return fmt.Errorf("release MCP session admission: %w", err)
	}
	return nil
}

// MCPSessionStanding is what AdmitMCPSession's caller needs to choose a session to end.
type MCPSessionStanding struct {
	MCPSession
	// Undelivered counts the completion notifications owed to the session.
	Undelivered int64
}

// MCPSessionStandings returns the registrations of user's sessions ids that still live,
// with the notifications owed to each.
func (s *Store) MCPSessionStandings(ctx context.Context, user state.User, ids []string) ([]MCPSessionStanding, error) {
	docs := make([]*redis.StringCmd, len(ids))
	owed := make([]*redis.IntCmd, len(ids))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			docs[i] = p.Get(ctx, mcpSessionKey(id))
			owed[i] = p.SCard(ctx, undeliveredKey(user.Key(), id))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("read the user's MCP sessions: %w", err)
	}
	var out []MCPSessionStanding
	for i := range ids {
		var st MCPSessionStanding
		if err := state.DecodeJSON(docs[i], "MCP session", &st.MCPSession); err != nil {
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

// EvictMCPSession stops counting user's session id among the user's sessions, so that a
// new one can take its place, and asks the replica that holds it to close it (a Notice of
// kind NoticeCloseSession). It reports false when the session no longer counted (it ended,
// or a concurrent admission evicted it first).
func (s *Store) EvictMCPSession(ctx context.Context, user state.User, id string) (bool, error) {
	n, err := s.rdb.ZRem(ctx, userSessionsKey(user.Key()), id).Result()
	if err != nil {
		return false, fmt.Errorf("evict MCP session: %w", err)
	}
	if n == 0 {
		return false, nil
	}
	msg, err := json.Marshal(Notice{What: NoticeCloseSession, UserKey: user.Key(), SessionID: id})
	if err == nil {
		err = s.rdb.Publish(ctx, EventsChannel, msg).Err()
	}
	if err != nil {
		return true, fmt.Errorf("ask to close MCP session: %w", err)
	}
	return true, nil
}
