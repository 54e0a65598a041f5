// Package authorizations keeps the third-party authorizations in progress: what urlflow
// needs between sending a browser to a provider and the provider sending it back.
//
// The one idea to hold: an attempt is found by its single-use state parameter and taken
// once (Take), so a replayed or late callback finds nothing.
package authorizations

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/state"
)

// Attempt is a third-party authorization in progress, bound to the elicitation and the
// browser session that started it.
type Attempt struct {
	ElicitationID  string    `json:"elicitationId"`
	BrowserSession string    `json:"browserSession"`
	Provider       string    `json:"provider"`
	Verifier       string    `json:"verifier"`
	Scopes         []string  `json:"scopes,omitempty"`
	StartedAt      time.Time `json:"startedAt"`
}

// Store keeps the attempts in Redis.
type Store struct {
	rdb redis.UniversalClient
}

// New returns the Store kept in rdb.
func New(rdb redis.UniversalClient) *Store { return &Store{rdb: rdb} }

// key names an attempt by its state parameter.
func key(param string) string { return state.KeyPrefix + "oauth:" + param }

// Save keeps a for ttl under its state parameter param.
func (s *Store) Save(ctx context.Context, param string, a Attempt, ttl time.Duration) error {
	doc, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("encode authorization attempt: %w", err)
	}
	if err := s.rdb.Set(ctx, key(param), doc, ttl).Err(); err != nil {
		return fmt.Errorf("save authorization attempt: %w", err)
	}
	return nil
}

// Take returns the attempt of state parameter param and deletes it, so that a state is
// spent once: a replayed or late callback gets state.ErrNotFound.
func (s *Store) Take(ctx context.Context, param string) (*Attempt, error) {
	var a Attempt
	if err := state.DecodeJSON(s.rdb.GetDel(ctx, key(param)), "authorization attempt", &a); err != nil {
		return nil, err
	}
	return &a, nil
}
