// Package once remembers the answers to requests sent with an idempotency key (the HTTP
// header Idempotency-Key), so that a caller that sends a create again, after a timeout or a
// lost answer, gets the first answer instead of a second elicitation.
//
// The one idea to hold: Do is the whole protocol. It claims the key, runs the request, and
// keeps what the answer named, or frees the key when the answer named nothing to repeat;
// a request sent again while the first is still being answered, or with another request
// under the same key, is refused.
package once

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/state"
)

// Keep is how long a key is remembered after its request was answered.
const Keep = 24 * time.Hour

// hold is how long a key stays claimed by a request still being handled: longer than any
// create takes, and short enough that a replica that died holding it frees it.
const hold = time.Minute

// Errors of Do for a key that was sent before.
var (
	// ErrReused: the key was sent with another request (or for another user).
	ErrReused = errors.New("the idempotency key was sent with another request")
	// ErrBusy: the first request with the key is still being answered.
	ErrBusy = errors.New("the first request with the idempotency key is still being answered")
)

// An Answer is what the first answer to a request named: its elicitation, and whether
// that answer created it. An Answer without an elicitation is not kept.
type Answer struct {
	ElicitationID string `json:"e,omitempty"`
	Created       bool   `json:"c,omitempty"`
}

// record is what a key holds: the request's digest and, once answered, the Answer.
type record struct {
	Request string `json:"r"`
	Answer
}

// Keys keeps idempotency keys in Redis.
type Keys struct {
	rdb redis.UniversalClient
}

// New returns the Keys kept in rdb.
func New(rdb redis.UniversalClient) *Keys { return &Keys{rdb: rdb} }

// Do answers the request whose digest is request, sent with key in the namespace scope (a
// service): the first time, by calling first, whose Answer is kept for Keep when it names
// an elicitation (the key is freed otherwise, and when first fails); when the key was
// answered before for the same request, with that Answer and replay set. The key sent with
// another request is ErrReused; while the first request is being answered, ErrBusy. The
// Answer is kept even when ctx ends meanwhile: the caller's retry is what the key is for.
func (k *Keys) Do(ctx context.Context, scope, key, request string, first func(context.Context) (Answer, error)) (a Answer, replay bool, err error) {
	held, err := k.claim(ctx, scope, key, request)
	switch {
	case err != nil:
		return Answer{}, false, err
	case held == nil:
		return k.answer(ctx, scope, key, request, first)
	case held.Request != request:
		return Answer{}, false, ErrReused
	case held.ElicitationID == "":
		return Answer{}, false, ErrBusy
	}
	return held.Answer, true, nil
}

// answer runs first for the request that claimed key, and keeps its answer or frees key.
func (k *Keys) answer(ctx context.Context, scope, key, request string, first func(context.Context) (Answer, error)) (Answer, bool, error) {
	a, err := first(ctx)
	keep := context.WithoutCancel(ctx)
	if err != nil || a.ElicitationID == "" {
		if free := k.rdb.Del(keep, redisKey(scope, key)).Err(); free != nil && err == nil {
			err = fmt.Errorf("free idempotency key: %w", free)
		}
		return a, false, err
	}
	doc, err := json.Marshal(record{Request: request, Answer: a})
	if err != nil {
		return Answer{}, false, fmt.Errorf("encode idempotency key: %w", err)
	}
	if err := k.rdb.Set(keep, redisKey(scope, key), doc, Keep).Err(); err != nil {
		return Answer{}, false, fmt.Errorf("record idempotency key: %w", err)
	}
	return a, false, nil
}

// claim claims key for request, and returns nil when it was free; otherwise what it
// holds, claimed or answered, for this or another request.
func (k *Keys) claim(ctx context.Context, scope, key, request string) (*record, error) {
	rk := redisKey(scope, key)
	claim, err := json.Marshal(record{Request: request})
	if err != nil {
		return nil, fmt.Errorf("encode idempotency key: %w", err)
	}
	// A key that ends between the claim and the read (its hold ran out) is claimed again.
	for range 2 {
		claimed, err := k.rdb.SetNX(ctx, rk, claim, hold).Result()
		if err != nil {
			return nil, fmt.Errorf("claim idempotency key: %w", err)
		}
		if claimed {
			return nil, nil
		}
		var held record
		err = state.DecodeJSON(k.rdb.Get(ctx, rk), "idempotency key", &held)
		if !errors.Is(err, state.ErrNotFound) {
			return &held, err
		}
	}
	return nil, errors.New("claim idempotency key: it ended twice while claimed")
}

// redisKey is where key of scope is kept: a digest, so that a caller's key (up to 255
// characters of its choosing) never becomes a Redis key as it is.
func redisKey(scope, key string) string {
	sum := sha256.Sum256([]byte(scope + "\n" + key))
	return state.KeyPrefix + "idem:" + hex.EncodeToString(sum[:])
}
