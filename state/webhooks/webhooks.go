// Package webhooks keeps the webhook deliveries of delegating services in Redis: the step
// that ends a flow of a service with a webhook queues a delivery (as a flow.Outbox), and
// every replica's sender (package webhook) takes the deliveries that are due (Due,
// Claim), sends them and records each attempt (Record). The queue is in Redis, so
// deliveries survive restarts and are shared by the replicas.
//
// The one idea to hold: a flow ends once, so it has one delivery, found by its
// elicitation ID; a replica that dies while sending leaves it to be claimed again once its
// lease runs out.
package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/flow"
)

// Queue keeps the deliveries.
type Queue struct {
	rdb        redis.UniversalClient
	hasWebhook func(service string) bool
	refs       flow.UserRefs
}

// New returns the Queue kept in rdb, which queues a delivery for the services that
// hasWebhook names, naming users by the references refs make.
func New(rdb redis.UniversalClient, hasWebhook func(service string) bool, refs flow.UserRefs) *Queue {
	return &Queue{rdb: rdb, hasWebhook: hasWebhook, refs: refs}
}

// Keep is how long a delivery record is kept after its last change.
const Keep = 8 * 24 * time.Hour

// dueKey is the sorted set of deliveries not yet done, scored by when the next
// attempt is due (Unix milliseconds).
const dueKey = state.KeyPrefix + "wh:due"

// webhookKey names the delivery record of the flow that ended, by its elicitation ID: a
// flow ends once, so it has one delivery.
func deliveryKey(elicitationID string) string { return state.KeyPrefix + "wh:d:" + elicitationID }

// Delivery is the record of one webhook message and its attempts.
type Delivery struct {
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
	// the schedule failed. Both describe the latest schedule: a redelivery clears them.
	DeliveredAt *time.Time `json:"deliveredAt,omitempty"`
	GivenUpAt   *time.Time `json:"givenUpAt,omitempty"`
	// Redeliveries counts the times the message was queued again (Redeliver), the last at
	// RedeliveredAt; Attempts counts the attempts of every schedule.
	Redeliveries  int        `json:"redeliveries,omitempty"`
	RedeliveredAt *time.Time `json:"redeliveredAt,omitempty"`

	trace string
	// attemptsBefore is Attempts when the latest schedule began (at the last redelivery).
	attemptsBefore int
}

// Round is the number of attempts of the latest schedule: Attempts since the last
// redelivery. The sender's schedule counts these.
func (d *Delivery) Round() int { return d.Attempts - d.attemptsBefore }

// Trace is the trace context of the delivery's flow (flow.Elicitation.Trace), as Claim
// read it; empty when tracing was off.
func (d *Delivery) Trace() string { return d.trace }

// record is how a delivery is stored: with its body.
type record struct {
	Delivery
	Body string `json:"body"`
	// Trace is the trace context of the flow (flow.Elicitation.Trace), for the attempts'
	// spans; kept here, out of what services read.
	Trace string `json:"trace,omitempty"`
	// AttemptsBefore is Delivery.attemptsBefore.
	AttemptsBefore int `json:"attemptsBefore,omitempty"`
}

// decode reads a stored record into rec, with the fields kept out of what services read.
func decode(doc []byte, rec *record) error {
	if err := json.Unmarshal(doc, rec); err != nil {
		return fmt.Errorf("decode webhook delivery: %w", err)
	}
	rec.Delivery.trace, rec.Delivery.attemptsBefore = rec.Trace, rec.AttemptsBefore
	return nil
}

// encode is the stored record of d with body.
func encode(d *Delivery, body string) ([]byte, error) {
	doc, err := json.Marshal(record{Delivery: *d, Body: body, Trace: d.trace, AttemptsBefore: d.attemptsBefore})
	if err != nil {
		return nil, fmt.Errorf("encode webhook of %s: %w", d.ElicitationID, err)
	}
	return doc, nil
}

// Message is the body of a webhook: the Standard Webhooks shape.
type Message struct {
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Data      struct {
		Elicitation flow.View `json:"elicitation"`
	} `json:"data"`
}

// ID returns the webhook-id of the message of the flow elicitationID.
func ID(elicitationID string) string { return "msg_" + elicitationID }

// QueueStep queues the delivery of the ending of step's elicitation to its service, if the
// step ended it and the service has a webhook (flow.Outbox).
func (q *Queue) QueueStep(ctx context.Context, w flow.Writes, step flow.Step) error {
	e := step.Elicitation
	if !step.Ended() || e.Service == "" || q.hasWebhook == nil || !q.hasWebhook(e.Service) {
		return nil
	}
	var msg Message
	msg.Type, msg.Timestamp, msg.Data.Elicitation = "elicitation."+string(e.State), e.UpdatedAt, e.ViewFor(q.refs, "", nil)
	body, err := json.Marshal(msg)
	if err != nil {
		return fmt.Errorf("encode webhook of %s: %w", e.ID, err)
	}
	due := e.UpdatedAt
	rec := record{Delivery: Delivery{ID: ID(e.ID), Service: e.Service, ElicitationID: e.ID,
		Type: msg.Type, CreatedAt: e.UpdatedAt, NextAttemptAt: &due}, Body: string(body), Trace: e.Trace}
	doc, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode webhook of %s: %w", e.ID, err)
	}
	w.Outside(func(p redis.Pipeliner) {
		p.Set(ctx, deliveryKey(e.ID), doc, Keep)
		p.ZAdd(ctx, dueKey, redis.Z{Score: float64(due.UnixMilli()), Member: e.ID})
	})
	return nil
}

// Due returns up to n elicitation IDs whose webhook delivery is due at now.
func (q *Queue) Due(ctx context.Context, now time.Time, n int64) ([]string, error) {
	ids, err := q.rdb.ZRangeByScore(ctx, dueKey, &redis.ZRangeBy{
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

// Claim takes the delivery of elicitationID for one attempt, if it is due at now
// and no other replica took it: its next attempt moves to now + lease, so that it is tried
// again if this replica dies before it records the attempt. It returns the delivery and
// its body, or ok false. A delivery that is no longer pending (delivered or given up, left
// due by a redelivery that did not finish) is not sent again, and leaves the due set.
func (q *Queue) Claim(ctx context.Context, elicitationID string, now time.Time, lease time.Duration) (d *Delivery, body []byte, ok bool, err error) {
	leased := now.Add(lease).UnixMilli()
	took, err := claimScript.Run(ctx, q.rdb, []string{dueKey}, elicitationID, now.UnixMilli(), leased).Int()
	if err != nil || took == 0 {
		return nil, nil, false, err
	}
	rec, _, err := q.read(ctx, elicitationID)
	if errors.Is(err, state.ErrNotFound) {
		// The record is gone (past its retention): nothing left to send.
		return nil, nil, false, q.rdb.ZRem(ctx, dueKey, elicitationID).Err()
	}
	if err != nil {
		return nil, nil, false, err
	}
	if rec.NextAttemptAt == nil {
		return nil, nil, false, q.unclaim(ctx, elicitationID, leased)
	}
	return &rec.Delivery, []byte(rec.Body), true, nil
}

// unclaimScript removes ARGV[1] from the due set KEYS[1] if its score is still ARGV[2],
// the lease of the Claim that found its delivery not pending: a redelivery that queued it
// since has moved the score, and keeps it.
var unclaimScript = redis.NewScript(`
local due = redis.call("ZSCORE", KEYS[1], ARGV[1])
if due and tonumber(due) == tonumber(ARGV[2]) then
  redis.call("ZREM", KEYS[1], ARGV[1])
end
return 0`)

// unclaim takes the delivery of elicitationID, which is not pending, out of the due set.
func (q *Queue) unclaim(ctx context.Context, elicitationID string, leased int64) error {
	if err := unclaimScript.Run(ctx, q.rdb, []string{dueKey}, elicitationID, leased).Err(); err != nil {
		return fmt.Errorf("drop the stray due webhook %s: %w", elicitationID, err)
	}
	return nil
}

// Record records an attempt of delivery d, which Claim returned with
// body: delivered when err is nil; otherwise tried again at next, or given up when next is
// zero.
func (q *Queue) Record(ctx context.Context, d *Delivery, body []byte, at time.Time, status int, attemptErr error, next time.Time) error {
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
	doc, err := encode(d, string(body))
	if err != nil {
		return err
	}
	_, err = q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, deliveryKey(d.ElicitationID), doc, Keep)
		switch {
		case d.NextAttemptAt != nil:
			p.ZAdd(ctx, dueKey, redis.Z{Score: float64(next.UnixMilli()), Member: d.ElicitationID})
		case d.GivenUpAt != nil:
			p.ZRem(ctx, dueKey, d.ElicitationID)
			indexGivenUp(ctx, p, d.Service, d.ElicitationID, at)
		default:
			p.ZRem(ctx, dueKey, d.ElicitationID)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("record webhook attempt of %s: %w", d.ElicitationID, err)
	}
	return nil
}

// Delivery returns the delivery record of the flow elicitationID, or state.ErrNotFound.
func (q *Queue) Delivery(ctx context.Context, elicitationID string) (*Delivery, error) {
	rec, _, err := q.read(ctx, elicitationID)
	if err != nil {
		return nil, err
	}
	return &rec.Delivery, nil
}

// read returns the record of the flow elicitationID and the document it was read from, or
// state.ErrNotFound.
func (q *Queue) read(ctx context.Context, elicitationID string) (*record, []byte, error) {
	doc, err := q.rdb.Get(ctx, deliveryKey(elicitationID)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil, state.ErrNotFound
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read webhook delivery %s: %w", elicitationID, err)
	}
	var rec record
	if err := decode(doc, &rec); err != nil {
		return nil, nil, err
	}
	return &rec, doc, nil
}
