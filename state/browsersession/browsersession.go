// Package browsersession keeps the data of browser sessions in Redis, for the signed
// cookie of package web that names them. A session's data is opaque here (web encodes
// it); every session lives for a given time from its last save.
package browsersession

import (
	"context"
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

func key(id string) string { return state.KeyPrefix + "bs:" + id }

// Save stores data as the data of session id for ttl.
func (s *Store) Save(ctx context.Context, id string, data []byte, ttl time.Duration) error {
	if err := s.rdb.Set(ctx, key(id), data, ttl).Err(); err != nil {
		return fmt.Errorf("save browser session: %w", err)
	}
	return nil
}

// Load returns the data of session id, or state.ErrNotFound.
func (s *Store) Load(ctx context.Context, id string) ([]byte, error) {
	data, err := s.rdb.Get(ctx, key(id)).Bytes()
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
	if err := s.rdb.Del(ctx, key(id)).Err(); err != nil {
		return fmt.Errorf("delete browser session: %w", err)
	}
	return nil
}
