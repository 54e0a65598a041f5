// Package browsersession keeps the data of browser sessions in Redis, for the signed
// cookie of package web that names them. A session's data is opaque here (web encodes
// it); every session lives for a given time from its last save. A signed-in session's
// data lives in its user's slot (Key).
package browsersession

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/state"
)

// Store keeps browser sessions in Redis.
type Store struct {
	rdb redis.UniversalClient
}

// NewStore returns a Store on rdb.
func NewStore(rdb redis.UniversalClient) *Store { return &Store{rdb: rdb} }

// Key returns the Redis key of session id. The ID of a signed-in session starts with its
// user's key (state.User.Key) and a dot (UserSessionID): such a session lives in the user's
// slot, beside the user's elicitations, so that a page reads both in one command. Other
// IDs (a sign-in in progress) live outside any user's slot.
func Key(id string) string {
	if uk, rest, ok := splitUserSessionID(id); ok {
		return state.UserTag(uk) + "bs:" + rest
	}
	return state.KeyPrefix + "bs:" + id
}

// InUserSlot reports whether session id lives in its user's slot (UserSessionID).
func InUserSlot(id string) bool {
	_, _, ok := splitUserSessionID(id)
	return ok
}

// UserSessionID returns a new ID for a session of the user whose key is userKey.
func UserSessionID(userKey string) string { return userKey + "." + rand.Text() }

// userKeyLen is the length of a state.User.Key: 16 bytes in unpadded base64url.
const userKeyLen = 22

func splitUserSessionID(id string) (userKey, rest string, ok bool) {
	if len(id) <= userKeyLen+1 || id[userKeyLen] != '.' {
		return "", "", false
	}
	return id[:userKeyLen], id[userKeyLen+1:], true
}

// Save stores data as the data of session id for ttl.
func (s *Store) Save(ctx context.Context, id string, data []byte, ttl time.Duration) error {
	if err := s.rdb.Set(ctx, Key(id), data, ttl).Err(); err != nil {
		return fmt.Errorf("save browser session: %w", err)
	}
	return nil
}

// Load returns the data of session id, or state.ErrNotFound.
func (s *Store) Load(ctx context.Context, id string) ([]byte, error) {
	data, err := s.rdb.Get(ctx, Key(id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, state.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("load browser session: %w", err)
	}
	return data, nil
}

// Delete removes session id.
func (s *Store) Delete(ctx context.Context, id string) error {
	if err := s.rdb.Del(ctx, Key(id)).Err(); err != nil {
		return fmt.Errorf("delete browser session: %w", err)
	}
	return nil
}
