package flow

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/urlflow/urlflow/state"
)

// Idempotency keys let a caller send a create request again, after a timeout or a lost
// answer, and get the first answer instead of a second elicitation (the HTTP header
// Idempotency-Key).

// IdempotencyKeep is how long a key is remembered after its request was answered.
const IdempotencyKeep = 24 * time.Hour

// idempotencyHold is how long a key stays claimed by a request still being handled: longer
// than any create takes, and short enough that a replica that died holding it frees it.
const idempotencyHold = time.Minute

// An IdempotentCreate is what urlflow keeps of a create request sent with an idempotency
// key: which request it was and, once answered, the elicitation the answer named.
type IdempotentCreate struct {
	// Request is a digest of the request (its user and what it asked for): the same key
	// with another request is refused.
	Request string `json:"r"`
	// ElicitationID is empty while the first request is being handled.
	ElicitationID string `json:"e,omitempty"`
	// Created reports whether the first answer created the elicitation.
	Created bool `json:"c,omitempty"`
}

func idempotencyKey(scope, key string) string {
	sum := sha256.Sum256([]byte(scope + "\n" + key))
	return state.KeyPrefix + "idem:" + hex.EncodeToString(sum[:])
}

// ClaimIdempotencyKey claims key, in the namespace scope (a service), for a request whose
// digest is request. It answers nil when the key was free: the caller handles the request,
// then calls AnswerIdempotencyKey, or FreeIdempotencyKey when it answered nothing to
// repeat. Otherwise it answers what the key holds, claimed or answered, for this or
// another request.
func (s *Store) ClaimIdempotencyKey(ctx context.Context, scope, key, request string) (*IdempotentCreate, error) {
	k := idempotencyKey(scope, key)
	claim, err := json.Marshal(IdempotentCreate{Request: request})
	if err != nil {
		return nil, fmt.Errorf("encode idempotency key: %w", err)
	}
	// A key that ends between the claim and the read (its hold ran out) is claimed again.
	for range 2 {
		claimed, err := s.rdb.SetNX(ctx, k, claim, idempotencyHold).Result()
		if err != nil {
			return nil, fmt.Errorf("claim idempotency key: %w", err)
		}
		if claimed {
			return nil, nil
		}
		var held IdempotentCreate
		err = state.DecodeJSON(s.rdb.Get(ctx, k), "idempotency key", &held)
		if !errors.Is(err, state.ErrNotFound) {
			return &held, err
		}
	}
	return nil, fmt.Errorf("claim idempotency key: it ended twice while claimed")
}

// AnswerIdempotencyKey records the answer to the request that claimed key, and keeps it
// for IdempotencyKeep.
func (s *Store) AnswerIdempotencyKey(ctx context.Context, scope, key string, rec IdempotentCreate) error {
	doc, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode idempotency key: %w", err)
	}
	if err := s.rdb.Set(ctx, idempotencyKey(scope, key), doc, IdempotencyKeep).Err(); err != nil {
		return fmt.Errorf("record idempotency key: %w", err)
	}
	return nil
}

// FreeIdempotencyKey ends the claim of the request that claimed key and answered nothing
// to repeat, so that the key can be sent again.
func (s *Store) FreeIdempotencyKey(ctx context.Context, scope, key string) error {
	if err := s.rdb.Del(ctx, idempotencyKey(scope, key)).Err(); err != nil {
		return fmt.Errorf("free idempotency key: %w", err)
	}
	return nil
}
