package flow

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/urlflow/urlflow/state"
)

// OAuthAttempt is a third-party authorization in progress: what urlflow keeps between
// sending the browser to the provider and the provider sending it back. It is found by
// the single-use state parameter and bound to the elicitation and the browser session that
// started it.
type OAuthAttempt struct {
	ElicitationID  string    `json:"elicitationId"`
	BrowserSession string    `json:"browserSession"`
	Provider       string    `json:"provider"`
	Verifier       string    `json:"verifier"`
	Scopes         []string  `json:"scopes,omitempty"`
	StartedAt      time.Time `json:"startedAt"`
}

// SaveOAuthAttempt keeps a for ttl under its state parameter param.
func (s *Store) SaveOAuthAttempt(ctx context.Context, param string, a OAuthAttempt, ttl time.Duration) error {
	doc, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("encode authorization attempt: %w", err)
	}
	if err := s.rdb.Set(ctx, oauthAttemptKey(param), doc, ttl).Err(); err != nil {
		return fmt.Errorf("save authorization attempt: %w", err)
	}
	return nil
}

// TakeOAuthAttempt returns the attempt of state parameter param and deletes it, so that a
// state is spent once: a replayed or late callback gets state.ErrNotFound.
func (s *Store) TakeOAuthAttempt(ctx context.Context, param string) (*OAuthAttempt, error) {
	var a OAuthAttempt
	if err := state.DecodeJSON(s.rdb.GetDel(ctx, oauthAttemptKey(param)), "authorization attempt", &a); err != nil {
		return nil, err
	}
	return &a, nil
}
