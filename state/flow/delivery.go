package flow

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/state"
)

// Deliveries records the completion notifications owed to MCP sessions (2025-11-25) and
// their delivery: a flow that ends owes one to its session, in the same step (its
// delivery record and its session's undelivered set), until it is written or given up.
type Deliveries struct {
	s *Store
}

// Deliveries returns the delivery records of s's elicitations.
func (s *Store) Deliveries() *Deliveries { return &Deliveries{s: s} }

// Stream names the stream of an MCP session that carried a completion notification.
type Stream string

// The streams a completion notification goes on.
const (
	// CallStream is the response stream of the push-style tool call that waited for the
	// flow: the notification goes just before the call's result, in order.
	CallStream Stream = "the tool call's stream"
	// SessionStream is the session's own stream (the client's GET), for a flow that ended
	// while no call of the session waited for it, or whose call could not carry it.
	SessionStream Stream = "the session's stream"
)

// Record records one attempt to write the completion notification of elicitation
// id to its MCP session on stream via: attemptErr nil means it was written to the client's
// stream. A written notification leaves the session's undelivered set.
func (d *Deliveries) Record(ctx context.Context, id string, via Stream, attemptErr error) (*Elicitation, error) {
	s := d.s
	return s.update(ctx, id, NoticeDelivery, func(e *Elicitation, p *batch) (bool, *Entry, error) {
		now := s.now().UTC()
		e.Delivery.Attempts++
		if attemptErr != nil {
			e.Delivery.LastError = attemptErr.Error()
			return true, nil, nil
		}
		e.Delivery.WrittenAt = &now
		e.Delivery.LastError = ""
		p.SRem(ctx, UndeliveredKey(e.User.Key(), e.SessionID), e.ID)
		s.queueOwed(ctx, p, e)
		reason := "completion notification written on " + string(via)
		if e.Delivery.SessionEndedAt != nil {
			reason += ", after its session had been found ended (" + e.Delivery.SessionEnded + "): it lived after all"
		}
		return true, &Entry{At: now, Event: Notified, Actor: state.ActorSystem, From: e.State, To: e.State, Reason: reason}, nil
	})
}

// SessionEnded records that the completion notification of elicitation id cannot be
// written: its MCP session sessionID ended before it could be told, as why says (for
// example "the client closed the session", "its replica stopped answering"). That is
// delivery's end, and the flow no longer counts as owing it; the result stays readable
// through elicitation_status and the API. It changes nothing unless the notification is
// owed to sessionID. held says whether the replica that held the session records it: it
// knows the session is gone, and the elicitation leaves the session's undelivered set;
// otherwise it stays there, so that the replica, should it still hold the session (a
// partition healed), tells it after all. It reports whether it recorded it (false: the
// notification was not owed to sessionID any more).
func (d *Deliveries) SessionEnded(ctx context.Context, id, sessionID, why string, held bool) (bool, error) {
	s := d.s
	settled := false
	_, err := s.update(ctx, id, NoticeDelivery, func(e *Elicitation, p *batch) (bool, *Entry, error) {
		settled = e.NotificationOwed() && e.SessionID == sessionID
		if !settled {
			return false, nil, nil
		}
		now := s.now().UTC()
		e.Delivery.SessionEndedAt, e.Delivery.SessionEnded = &now, why
		if held {
			p.SRem(ctx, UndeliveredKey(e.User.Key(), e.SessionID), e.ID)
		}
		s.queueOwed(ctx, p, e)
		return true, &Entry{At: now, Event: SessionEnded, Actor: state.ActorSystem, From: e.State, To: e.State,
			Reason: "completion notification not written: " + why + " before it could be told; " +
				"the result is readable through elicitation_status and the API"}, nil
	})
	return settled && err == nil, err
}

// Skip records that the completion notification of elicitation id is not owed
// after all, with why (for example, the session's client declared no URL mode), and takes it
// out of its session's undelivered set.
func (d *Deliveries) Skip(ctx context.Context, id, why string) (*Elicitation, error) {
	s := d.s
	return s.update(ctx, id, "", func(e *Elicitation, p *batch) (bool, *Entry, error) {
		now := s.now().UTC()
		e.Delivery.LastError, e.Delivery.SkippedAt = "not sent: "+why, &now
		p.SRem(ctx, UndeliveredKey(e.User.Key(), e.SessionID), e.ID)
		s.queueOwed(ctx, p, e)
		return true, nil, nil
	})
}

// Requeue asks for the completion notification of ended elicitation id to be sent to its
// session again, and publishes the wake-up. It returns ErrConflict if id is still running or
// has no session.
func (d *Deliveries) Requeue(ctx context.Context, id string, act Act) (*Elicitation, error) {
	s := d.s
	return s.update(ctx, id, NoticeRequeue, func(e *Elicitation, p *batch) (bool, *Entry, error) {
		if !e.State.Terminal() {
			return false, nil, fmt.Errorf("requeue notification of %s in state %s: %w", e.ID, e.State, ErrConflict)
		}
		if e.SessionID == "" {
			return false, nil, fmt.Errorf("requeue notification of %s: no session: %w", e.ID, ErrConflict)
		}
		now := s.now().UTC()
		// Owed again until written again.
		e.Delivery.QueuedAt, e.Delivery.WrittenAt, e.Delivery.SkippedAt = &now, nil, nil
		e.Delivery.SessionEndedAt, e.Delivery.SessionEnded = nil, ""
		key := UndeliveredKey(e.User.Key(), e.SessionID)
		p.SAdd(ctx, key, e.ID)
		p.Expire(ctx, key, s.retention)
		s.queueOwed(ctx, p, e)
		return true, &Entry{At: now, Event: NotifyRequeued, Actor: act.Actor, By: act.By, From: e.State, To: e.State,
			Reason: act.reason("notification requested again")}, nil
	})
}

// OwedBefore returns the ended elicitations whose completion notification has been owed
// since before cutoff, at most limit of each bucket of the owed index: those a sweeper
// checks for a session that has ended unseen. It reads the buckets in one round trip and
// the records in one more (on a Cluster, one per node each): every replica sweeps every
// few seconds. On a Cluster it does not send this replica's queued index writes first, as
// a listing does: an entry queued in the last second shows at the next sweep, and a sweep
// that sent them would add a batch to every node every few seconds beside the queue's one a
// second (TestRedisWorkPerFlowOnClusterStaysWithinBudget counts them).
func (d *Deliveries) OwedBefore(ctx context.Context, cutoff time.Time, limit int) ([]*Elicitation, error) {
	s := d.s
	until := strconv.FormatInt(cutoff.UnixMilli(), 10)
	buckets := make([]*redis.StringSliceCmd, IndexBuckets)
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for b := range IndexBuckets {
			buckets[b] = p.ZRangeByScore(ctx, owedKey(b), &redis.ZRangeBy{Min: "-inf", Max: until, Count: int64(limit)})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read owed notifications: %w", err)
	}
	var ids []string
	for _, cmd := range buckets {
		ids = append(ids, cmd.Val()...)
	}
	records, err := s.loadIDs(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("read owed notifications: %w", err)
	}
	var owed []*Elicitation
	for _, e := range records {
		if e != nil && e.NotificationOwed() {
			owed = append(owed, e)
		}
	}
	return owed, nil
}

// Undelivered returns the IDs of the ended elicitations of user whose completion
// notification has not been written to MCP session sessionID.
func (d *Deliveries) Undelivered(ctx context.Context, user state.User, sessionID string) ([]string, error) {
	s := d.s
	ids, err := s.rdb.SMembers(ctx, UndeliveredKey(user.Key(), sessionID)).Result()
	if err != nil {
		return nil, fmt.Errorf("read undelivered notifications of session: %w", err)
	}
	return ids, nil
}

// Change events

// Notice is the wake-up published on EventsChannel whenever an elicitation changes state
// or its notification is requeued. It is not the record: readers load the elicitation.
type Notice struct {
	ID        string     `json:"id"`
	What      NoticeKind `json:"what"`
	State     State      `json:"state"`
	UserKey   string     `json:"user"`
	SessionID string     `json:"session,omitempty"`
}

// MayHaveEnded reports whether the elicitation n is about may have ended by now: n says
// its state is terminal, or n says nothing of its state (the subscription came back, or n
// is of another kind), so that a waiter must look.
func (n Notice) MayHaveEnded() bool { return n.State == "" || n.State.Terminal() }

// NoticeKind says what a Notice is about.
type NoticeKind string

// The kinds of notice.
const (
	NoticeState    NoticeKind = "state"    // the state changed
	NoticeRequeue  NoticeKind = "requeue"  // the completion notification was asked for again
	NoticeDelivery NoticeKind = "delivery" // a delivery attempt was recorded
	NoticeRetried  NoticeKind = "retried"  // a new attempt was started (the notice names it)
	// NoticeCloseSession asks the replica that holds MCP session SessionID of UserKey to
	// close it, to make room for a new session of the same user; ID is empty.
	NoticeCloseSession NoticeKind = "close-session"
)

// IsUndelivered reports whether the completion notification of elicitation id is still
// owed to MCP session sessionID of user.
func (d *Deliveries) IsUndelivered(ctx context.Context, user state.User, sessionID, id string) (bool, error) {
	s := d.s
	ok, err := s.rdb.SIsMember(ctx, UndeliveredKey(user.Key(), sessionID), id).Result()
	if err != nil {
		return false, fmt.Errorf("read undelivered notifications of session: %w", err)
	}
	return ok, nil
}
