// Package webhooks keeps the webhook deliveries of delegating services in Redis: the step
// that ends a flow of a service with a webhook queues a delivery (as a flow.Outbox), so
// does each change of a credential it holds (as a credentials.Lifecycle), and every
// replica's sender (package webhook) takes the deliveries that are due (Due, Claim), sends
// them and records each attempt (Record). The queue is in Redis, so deliveries survive
// restarts and are shared by the replicas.
//
// The one idea to hold: a flow ends once, so it has one delivery, found by its
// elicitation ID; a credential's change has one, found by the event ID made for it; a
// replica that dies while sending leaves it to be claimed again once its lease runs out.
package webhooks

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/credentials"
	"github.com/urlflow/urlflow/state/flow"
)

// Queue keeps the deliveries.
type Queue struct {
	rdb   redis.UniversalClient
	wants func(service, eventType string) bool
	refs  flow.UserRefs
}

// New returns the Queue kept in rdb, which queues a delivery of a message of eventType to
// service when wants says so, naming users by the references refs make.
func New(rdb redis.UniversalClient, wants func(service, eventType string) bool, refs flow.UserRefs) *Queue {
	return &Queue{rdb: rdb, wants: wants, refs: refs}
}

// Keep is how long a delivery record is kept after its last change.
const Keep = 8 * 24 * time.Hour

// The sorted sets of deliveries not yet done, scored by when the next attempt is due (Unix
// milliseconds): of elicitations' endings, and of credentials' changes, in a set of their
// own that a version before them never reads (it would file their attempts under the
// wrong key).
const (
	dueKey           = state.KeyPrefix + "wh:due"
	dueCredentialKey = state.KeyPrefix + "wh:due:cred"
)

// dueKeyOf is the due set of the delivery key.
func dueKeyOf(key string) string {
	if strings.HasPrefix(key, EventIDPrefix) {
		return dueCredentialKey
	}
	return dueKey
}

// deliveryKey names the delivery record of the flow that ended, by its elicitation ID (a
// flow ends once, so it has one delivery), or of a credential's change, by its event ID.
func deliveryKey(id string) string { return state.KeyPrefix + "wh:d:" + id }

// Delivery is the record of one webhook message and its attempts.
type Delivery struct {
	// ID is the message's webhook-id, the same in every attempt.
	ID      string `json:"id"`
	Service string `json:"service"`
	// ElicitationID is the flow whose ending the message tells, or that stored the
	// credential whose change it tells; EventID the change of a credential it tells.
	ElicitationID string `json:"elicitationId,omitempty"`
	EventID       string `json:"eventId,omitempty"`
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

// Key is what the delivery is queued and found by: its EventID, or its ElicitationID.
func (d *Delivery) Key() string {
	if d.EventID != "" {
		return d.EventID
	}
	return d.ElicitationID
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
		return nil, fmt.Errorf("encode webhook %s: %w", d.ID, err)
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

// CredentialMessage is the body of a webhook of a credential's change.
type CredentialMessage struct {
	Type      string            `json:"type"`
	Timestamp time.Time         `json:"timestamp"`
	Data      credentials.Event `json:"data"`
}

// ID returns the webhook-id of the message of the flow elicitationID, or of the credential
// change eventID.
func ID(key string) string { return "msg_" + key }

// EventIDPrefix starts the ID of a credential's change: another form than an elicitation
// ID's, so that the two never meet in the queue.
const EventIDPrefix = "cev_"

// ValidKey reports whether key is a delivery's Key: an elicitation ID or an event ID.
func ValidKey(key string) bool {
	rest, ok := strings.CutPrefix(key, EventIDPrefix)
	if !ok {
		return flow.ValidID(key)
	}
	return len(rest) == 26 && strings.Trim(rest, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") == ""
}

// QueueStep queues the delivery of the ending of step's elicitation to its service, if the
// step ended it and the service's webhook wants it, and of the credential it stored
// (flow.Outbox).
func (q *Queue) QueueStep(ctx context.Context, w flow.Writes, step flow.Step) error {
	e := step.Elicitation
	if !step.Ended() || e.Service == "" {
		return nil
	}
	var queued []record
	if msgType := "elicitation." + string(e.State); q.wants(e.Service, msgType) {
		var msg Message
		msg.Type, msg.Timestamp, msg.Data.Elicitation = msgType, e.UpdatedAt, e.ViewFor(q.refs, "", nil)
		body, err := json.Marshal(msg)
		if err != nil {
			return fmt.Errorf("encode webhook of %s: %w", e.ID, err)
		}
		queued = append(queued, record{Delivery: Delivery{ID: ID(e.ID), Service: e.Service, ElicitationID: e.ID,
			Type: msg.Type, CreatedAt: e.UpdatedAt}, Body: string(body), Trace: e.Trace})
	}
	if step.Stored != nil {
		rec, ok, err := q.credentialRecord(*step.Stored)
		if err != nil {
			return err
		}
		if ok {
			rec.Trace = e.Trace
			queued = append(queued, rec)
		}
	}
	docs, err := encodeQueued(queued)
	if err != nil {
		return err
	}
	w.Outside(func(p redis.Pipeliner) {
		for i := range queued {
			queueRecord(ctx, p, &queued[i].Delivery, docs[i])
		}
	})
	return nil
}

// QueueCredentialChange queues the delivery of c to the credential's service, if its
// webhook wants it (credentials.Lifecycle).
func (q *Queue) QueueCredentialChange(ctx context.Context, p redis.Pipeliner, c credentials.Change) error {
	rec, ok, err := q.credentialRecord(c)
	if err != nil || !ok {
		return err
	}
	recs := []record{rec}
	docs, err := encodeQueued(recs)
	if err != nil {
		return err
	}
	queueRecord(ctx, p, &recs[0].Delivery, docs[0])
	return nil
}

// credentialRecord returns the record of the delivery of c, and ok false when the service's
// webhook does not want it.
func (q *Queue) credentialRecord(c credentials.Change) (rec record, ok bool, err error) {
	service, msgType := c.Service(), c.Type.EventType()
	if !q.wants(service, msgType) {
		return rec, false, nil
	}
	msg := CredentialMessage{Type: msgType, Timestamp: c.At, Data: c.Event(q.refs.Of(service, c.User))}
	body, err := json.Marshal(msg)
	if err != nil {
		return rec, false, fmt.Errorf("encode the webhook of the %s of %s: %w", c.Type, c.Credential.Name, err)
	}
	id := EventIDPrefix + rand.Text()
	rec = record{Delivery: Delivery{ID: ID(id), Service: service, EventID: id, ElicitationID: c.Credential.ElicitationID,
		Type: msgType, CreatedAt: c.At}, Body: string(body)}
	return rec, true, nil
}

// encodeQueued returns the stored documents of recs, each due at its creation.
func encodeQueued(recs []record) ([][]byte, error) {
	docs := make([][]byte, len(recs))
	for i := range recs {
		due := recs[i].CreatedAt
		recs[i].NextAttemptAt = &due
		doc, err := json.Marshal(recs[i])
		if err != nil {
			return nil, fmt.Errorf("encode webhook %s: %w", recs[i].ID, err)
		}
		docs[i] = doc
	}
	return docs, nil
}

// queueRecord queues on p the writes of a new delivery d, stored as doc: its record, and
// its entry in the due set.
func queueRecord(ctx context.Context, p redis.Pipeliner, d *Delivery, doc []byte) {
	p.Set(ctx, deliveryKey(d.Key()), doc, Keep)
	p.ZAdd(ctx, dueKeyOf(d.Key()), redis.Z{Score: float64(d.NextAttemptAt.UnixMilli()), Member: d.Key()})
}

// Due returns the keys of up to n deliveries of elicitations' endings, and up to n of
// credentials' changes, that are due at now.
func (q *Queue) Due(ctx context.Context, now time.Time, n int64) ([]string, error) {
	var keys []string
	for _, set := range []string{dueKey, dueCredentialKey} {
		due, err := q.rdb.ZRangeByScore(ctx, set, &redis.ZRangeBy{
			Min: "-inf", Max: strconv.FormatInt(now.UnixMilli(), 10), Count: n,
		}).Result()
		if err != nil {
			return nil, fmt.Errorf("read due webhooks: %w", err)
		}
		keys = append(keys, due...)
	}
	return keys, nil
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
	took, err := claimScript.Run(ctx, q.rdb, []string{dueKeyOf(elicitationID)}, elicitationID, now.UnixMilli(), leased).Int()
	if err != nil || took == 0 {
		return nil, nil, false, err
	}
	rec, _, err := q.read(ctx, elicitationID)
	if errors.Is(err, state.ErrNotFound) {
		// The record is gone (past its retention): nothing left to send.
		return nil, nil, false, q.rdb.ZRem(ctx, dueKeyOf(elicitationID), elicitationID).Err()
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
	if err := unclaimScript.Run(ctx, q.rdb, []string{dueKeyOf(elicitationID)}, elicitationID, leased).Err(); err != nil {
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
		p.Set(ctx, deliveryKey(d.Key()), doc, Keep)
		switch {
		case d.NextAttemptAt != nil:
			p.ZAdd(ctx, dueKeyOf(d.Key()), redis.Z{Score: float64(next.UnixMilli()), Member: d.Key()})
		case d.GivenUpAt != nil:
			p.ZRem(ctx, dueKeyOf(d.Key()), d.Key())
			indexGivenUp(ctx, p, d.Service, d.Key(), at)
		default:
			p.ZRem(ctx, dueKeyOf(d.Key()), d.Key())
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("record webhook attempt of %s: %w", d.ID, err)
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
