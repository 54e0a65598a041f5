package flow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/state"
)

// A delegating service with a webhook is told of every flow of its that ends: the step that
// ends the flow queues a delivery (in its script; on a Cluster, in the round trip after
// it), and every replica's webhook sender (package webhook) takes the deliveries that are
// due, sends them and records each attempt. The queue is in Redis, so deliveries survive
// restarts and are shared by the replicas.

// WebhookKeep is how long a delivery record is kept after its last change.
const WebhookKeep = 8 * 24 * time.Hour

// webhookDueKey is the sorted set of deliveries not yet done, scored by when the next
// attempt is due (Unix milliseconds).
const webhookDueKey = state.KeyPrefix + "wh:due"

// webhookKey names the delivery record of the flow that ended, by its elicitation ID: a
// flow ends once, so it has one delivery.
func webhookKey(elicitationID string) string { return state.KeyPrefix + "wh:d:" + elicitationID }

// WebhookDelivery is the record of one webhook message and its attempts.
type WebhookDelivery struct {
	// ID is the message's webhook-id, the same in every attempt.
	ID            string `json:"id"`
	Service       string `json:"service"`
	ElicitationID string `json:"elicitationId"`
	Type          string `json:"type"`
	// Body is the message as sent, JSON.
	Body      string    `json:"-"`
	CreatedAt time.Time `json:"createdAt"`
	Attempts  int       `json:"attempts"`
	// NextAttemptAt is when the next attempt is due, while it is not done.
	NextAttemptAt *time.Time `json:"nextAttemptAt,omitempty"`
	// LastAttemptAt, LastStatus (the receiver's HTTP status, 0 without one) and LastError
	// describe the last attempt.
	LastAttemptAt *time.Time `json:"lastAttemptAt,omitempty"`
	LastStatus    int        `json:"lastStatus,omitempty"`
	LastError     string     `json:"lastError,omitempty"`
	// DeliveredAt is set once the receiver answered 2xx; GivenUpAt once every attempt of
	// the schedule failed.
	DeliveredAt *time.Time `json:"deliveredAt,omitempty"`
	GivenUpAt   *time.Time `json:"givenUpAt,omitempty"`
}

// webhookRecord is how a delivery is stored: with its body.
type webhookRecord struct {
	WebhookDelivery
	Body string `json:"body"`
}

// WebhookMessage is the body of a webhook: the Standard Webhooks shape.
type WebhookMessage struct {
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Data      struct {
		Elicitation View `json:"elicitation"`
	} `json:"data"`
}

// WebhookID returns the webhook-id of the message of the flow elicitationID.
func WebhookID(elicitationID string) string { return "msg_" + elicitationID }

// queueWebhook queues, outside the user's slot, the delivery of e's ending to its service,
// if the service has a webhook.
func (s *Store) queueWebhook(ctx context.Context, b *batch, e *Elicitation) error {
	if e.Service == "" || s.webhooks == nil || !s.webhooks(e.Service) {
		return nil
	}
	var msg WebhookMessage
	msg.Type, msg.Timestamp, msg.Data.Elicitation = "elicitation."+string(e.State), e.UpdatedAt, e.View("", nil)
	body, err := json.Marshal(msg)
	if err != nil {
		return fmt.Errorf("encode webhook of %s: %w", e.ID, err)
	}
	due := e.UpdatedAt
	rec := webhookRecord{WebhookDelivery: WebhookDelivery{ID: WebhookID(e.ID), Service: e.Service, ElicitationID: e.ID,
		Type: msg.Type, CreatedAt: e.UpdatedAt, NextAttemptAt: &due}, Body: string(body)}
	doc, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode webhook of %s: %w", e.ID, err)
	}
	s.outside(b, func(p redis.Pipeliner) {
		p.Set(ctx, webhookKey(e.ID), doc, WebhookKeep)
		p.ZAdd(ctx, webhookDueKey, redis.Z{Score: float64(due.UnixMilli()), Member: e.ID})
	})
	return nil
}

// DueWebhooks returns up to n elicitation IDs whose webhook delivery is due at now.
func (s *Store) DueWebhooks(ctx context.Context, now time.Time, n int64) ([]string, error) {
	ids, err := s.rdb.ZRangeByScore(ctx, webhookDueKey, &redis.ZRangeBy{
		Min: "-inf", Max: strconv.FormatInt(now.UnixMilli(), 10), Count: n,
	}).Result()
	if err != nil {
		return nil, fmt.Errorf("read due webhooks: %w", err)
	}
	return ids, nil
}

// claimScript moves a due delivery's next attempt to ARGV[3] if it is still due at
// ARGV[2] (no other replica took it since), and answers 1 if it did.
var claimScript = redis.NewScript(`
local due = redis.call("ZSCORE", KEYS[1], ARGV[1])
if due and tonumber(due) <= tonumber(ARGV[2]) then
  redis.call("ZADD", KEYS[1], ARGV[3], ARGV[1])
  return 1
end
return 0`)

// ClaimWebhook takes the delivery of elicitationID for one attempt, if it is due at now
// and no other replica took it: its next attempt moves to now + lease, so that it is tried
// again if this replica dies before it records the attempt. It returns the delivery and
// its body, or ok false.
func (s *Store) ClaimWebhook(ctx context.Context, elicitationID string, now time.Time, lease time.Duration) (d *WebhookDelivery, body []byte, ok bool, err error) {
	took, err := claimScript.Run(ctx, s.rdb, []string{webhookDueKey}, elicitationID,
		now.UnixMilli(), now.Add(lease).UnixMilli()).Int()
	if err != nil || took == 0 {
		return nil, nil, false, err
	}
	var rec webhookRecord
	err = state.DecodeJSON(s.rdb.Get(ctx, webhookKey(elicitationID)), "webhook delivery", &rec)
	if errors.Is(err, state.ErrNotFound) {
		// The record is gone (past its retention): nothing left to send.
		return nil, nil, false, s.rdb.ZRem(ctx, webhookDueKey, elicitationID).Err()
	}
	if err != nil {
		return nil, nil, false, err
	}
	return &rec.WebhookDelivery, []byte(rec.Body), true, nil
}

// RecordWebhookAttempt records an attempt of delivery d, which ClaimWebhook returned with
// body: delivered when err is nil; otherwise tried again at next, or given up when next is
// zero.
func (s *Store) RecordWebhookAttempt(ctx context.Context, d *WebhookDelivery, body []byte, at time.Time, status int, attemptErr error, next time.Time) error {
	d.Attempts++
	d.LastAttemptAt, d.LastStatus, d.LastError, d.NextAttemptAt = &at, status, "", nil
	switch {
	case attemptErr == nil:
		d.DeliveredAt = &at
	case next.IsZero():
		d.LastError, d.GivenUpAt = attemptErr.Error(), &at
	default:
		d.LastError, d.NextAttemptAt = attemptErr.Error(), &next
	}
	doc, err := json.Marshal(webhookRecord{WebhookDelivery: *d, Body: string(body)})
	if err != nil {
		return fmt.Errorf("encode webhook of %s: %w", d.ElicitationID, err)
	}
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, webhookKey(d.ElicitationID), doc, WebhookKeep)
		if d.NextAttemptAt != nil {
			p.ZAdd(ctx, webhookDueKey, redis.Z{Score: float64(next.UnixMilli()), Member: d.ElicitationID})
		} else {
			p.ZRem(ctx, webhookDueKey, d.ElicitationID)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("record webhook attempt of %s: %w", d.ElicitationID, err)
	}
	return nil
}

// Webhook returns the delivery record of the flow elicitationID, or state.ErrNotFound.
func (s *Store) Webhook(ctx context.Context, elicitationID string) (*WebhookDelivery, error) {
	var rec webhookRecord
	if err := state.DecodeJSON(s.rdb.Get(ctx, webhookKey(elicitationID)), "webhook delivery", &rec); err != nil {
		return nil, err
	}
	return &rec.WebhookDelivery, nil
}
