package flow

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/credentials"
)

// Change is the outcome of Apply.
type Change struct {
	// Elicitation is the record after the event.
	Elicitation *Elicitation
	// From and To are the states before and after; equal when nothing changed.
	From, To State
}

// Changed reports whether the event changed the state.
func (c Change) Changed() bool { return c.From != c.To }

// An ApplyOption adds work to Apply that happens atomically with the transition.
type ApplyOption func(*applyConfig)

type applyConfig struct {
	by         string
	credential *credentials.Credential
	replaced   bool
	same       []check
}

// ErrStale is returned by Apply with IfStill when the key no longer holds the value the
// caller started from: nothing was written, and the caller starts again from Redis.
var ErrStale = errors.New("what the step started from has changed")

// IfStill makes the step only if key (in the elicitation's user's slot) still holds value,
// which the caller read earlier (a browser session): otherwise Apply writes nothing and
// returns ErrStale.
func IfStill(key string, value []byte) ApplyOption {
	return func(a *applyConfig) { a.same = append(a.same, check{key: key, value: value}) }
}

// By names who acts (an operator) in the history entry of the event.
func By(name string) ApplyOption {
	return func(a *applyConfig) { a.by = name }
}

// WithCredential stores c for the elicitation's user in the same atomic step that moves
// the elicitation to complete. If the event does not complete the elicitation (it ended
// meanwhile), c is not stored.
func WithCredential(c *credentials.Credential) ApplyOption {
	return func(a *applyConfig) { a.credential = c }
}

// Apply records event ev on elicitation id and moves it as the state table says, in one
// atomic step: of two racing events exactly one changes the state, and the other is applied
// to the new state (usually changing nothing). Every event, also one that changes nothing,
// is recorded in the history in the same step (appendHistory: an event like the newest
// entry is counted on it, and a long history drops entries from its middle). An overdue
// elicitation is expired before ev is applied.
// A cell marked "cannot happen" is recorded and returns ErrImpossible.
func (s *Store) Apply(ctx context.Context, id string, ev Event, actor state.Actor, reason string, opts ...ApplyOption) (Change, error) {
	var cfg applyConfig
	for _, o := range opts {
		o(&cfg)
	}
	uk, err := s.userKeyOf(ctx, id)
	if err != nil {
		return Change{}, err
	}
	other := ""
	if cfg.credential != nil {
		other = credentials.Key(uk, cfg.credential.Name)
	}
	from := s.seenDoc(id)
	for range maxCASAttempts {
		e, doc, exists, err := s.readForChange(ctx, uk, id, other, from)
		if err != nil {
			return Change{}, fmt.Errorf("apply %s to elicitation %s: %w", ev, id, err)
		}
		if ev == DeadlinePassed && !e.Overdue(s.now()) {
			// Another reader expired it first, or the deadline has not come: no event.
			return Change{Elicitation: e, From: e.State, To: e.State}, nil
		}
		checks := cfg.same
		if cfg.credential != nil {
			cfg.replaced = exists
			checks = append(slices.Clip(checks), check{key: other, exists: exists})
		}
		change, applyErr := s.apply(e, ev, actor, reason)
		b := s.newBatch()
		if err := s.queueChange(ctx, b, change, ev, actor, reason, cfg); err != nil {
			b.Discard()
			return Change{}, fmt.Errorf("apply %s to elicitation %s: %w", ev, id, err)
		}
		if change.Changed() {
			if err := s.queueNotice(ctx, b, change.Elicitation, NoticeState); err != nil {
				b.Discard()
				return Change{}, err
			}
			if change.To.Terminal() {
				s.writeIndex(ctx, b, indexWrite{key: deadlinesKey, member: id, remove: true})
			}
		}
		done := func() {}
		if change.To.Terminal() && change.Changed() {
			done = s.beginEnding(id)
		}
		ran, current, err := s.runIf(ctx, elicitationKey(uk, id), doc, checks, b)
		from = current
		if ran == ranWrote && change.Changed() {
			s.seeWritten(b, change.Elicitation)
		} else if ran == ranWrote {
			s.settled(change.Elicitation) // an event on an ended flow: its history has a new entry
		}
		done()
		switch {
		case err != nil:
			return Change{}, fmt.Errorf("apply %s to elicitation %s: %w", ev, id, err)
		case ran == ranStale:
			return Change{}, fmt.Errorf("apply %s to elicitation %s: %w", ev, id, ErrStale)
		case ran != ranWrote:
			continue // changed since it was read: read it again
		}
		s.writeAfterOrLog(ctx, b, id)
		s.logChange(ctx, change, ev, actor)
		return change, applyErr
	}
	return Change{}, fmt.Errorf("apply %s to elicitation %s: too much contention", ev, id)
}

// apply computes the change ev makes to e (which it modifies) without writing anything.
func (s *Store) apply(e *Elicitation, ev Event, actor state.Actor, reason string) (Change, error) {
	from := e.State
	now := s.now().UTC()
	if e.Overdue(now) {
		e.State = Expired
	}
	to, err := Next(e.State, ev)
	e.State = to
	if e.State != from {
		e.UpdatedAt = now
		if e.State.Terminal() && e.SessionID != "" {
			e.Delivery.QueuedAt = &now
		}
	}
	return Change{Elicitation: e, From: from, To: e.State}, err
}

// queueChange queues the writes of change in the user's slot: the record when the state
// changed, the history entries, the credential, and the undelivered mark of a flow that
// ended.
func (s *Store) queueChange(ctx context.Context, p *batch, c Change, ev Event, actor state.Actor, reason string, cfg applyConfig) error {
	e := c.Elicitation
	now := e.UpdatedAt
	if !c.Changed() {
		now = s.now().UTC()
	}
	from := c.From
	var transition *Entry // the entry that changed the state, when one did
	if from != Expired && e.State == Expired && ev != DeadlinePassed {
		// The deadline had passed before ev arrived: record the expiry first.
		deadline := Entry{At: now, Event: DeadlinePassed, Actor: state.ActorSystem, From: from, To: Expired, Reason: "deadline passed"}
		if err := s.appendHistory(ctx, p, e, deadline); err != nil {
			return err
		}
		from, transition = Expired, &deadline
	}
	entry := Entry{At: now, Event: ev, Actor: actor, From: from, To: e.State, Reason: reason, By: cfg.by}
	if transition == nil {
		transition = &entry
	}
	if err := s.appendHistory(ctx, p, e, entry); err != nil {
		return err
	}
	if !c.Changed() {
		return nil
	}
	if err := s.writeRecord(ctx, p, e); err != nil {
		return err
	}
	step := Step{Elicitation: e, Event: ev, From: c.From, Stored: storedBy(e, cfg)}
	if err := s.queueOutboxes(ctx, p, step); err != nil {
		return err
	}
	s.queueTransitionAudit(ctx, p, e, *transition)
	if cfg.credential != nil && e.State == Complete {
		if err := credentials.Queue(ctx, p, e.User, cfg.credential); err != nil {
			return err
		}
		// The key index counts it under its key in the same step: in the step's script on
		// one server, right after it on a Cluster (credentials/keyindex.go).
		s.outside(p, func(pl redis.Pipeliner) { credentials.QueueIndexing(ctx, pl, e.User.Key(), cfg.credential) })
		s.queueCredentialAudit(ctx, p, e, cfg.replaced)
	}
	if e.State.Terminal() {
		// A running elicitation is reused by the next ask (Open); an ended one is not.
		p.Do(ctx, delIfOp, openKey(e.User.Key(), e.Kind, e.CredentialName(), e.SessionID), e.ID)
	}
	if e.State.Terminal() && e.SessionID != "" {
		uk := e.User.Key()
		p.SAdd(ctx, UndeliveredKey(uk, e.SessionID), e.ID)
		p.Expire(ctx, UndeliveredKey(uk, e.SessionID), s.retention)
		s.queueOwed(ctx, p, e)
	}
	return nil
}

// storedBy is the change of the credential that the step applying cfg to e stores, with
// what the flow keeps for it (the service's call and metadata, the offline grant); nil
// when it stores none.
func storedBy(e *Elicitation, cfg applyConfig) *credentials.Change {
	if cfg.credential == nil || e.State != Complete {
		return nil
	}
	cfg.credential.Call, cfg.credential.Metadata, cfg.credential.Offline = e.Call, e.Metadata, e.Offline
	stored := &credentials.Change{Type: credentials.ChangeStored, User: e.User, Credential: cfg.credential, At: e.UpdatedAt,
		Actor: state.ActorUser}
	if cfg.replaced {
		stored.Type = credentials.ChangeReplaced
	}
	return stored
}

// logChange logs and counts a change.
func (s *Store) logChange(ctx context.Context, c Change, ev Event, actor state.Actor) {
	e := c.Elicitation
	if !c.Changed() {
		s.log.DebugContext(ctx, "elicitation event without change", "elicitation_id", e.ID,
			"event", ev, "actor", actor, "state", e.State)
		return
	}
	s.log.InfoContext(ctx, "elicitation transition", "elicitation_id", e.ID, "user", e.User.Key(),
		"event", ev, "actor", actor, "from", c.From, "to", c.To)
	if c.To.Terminal() {
		s.metrics.FlowEnded(string(e.Kind), string(c.To), e.UpdatedAt.Sub(e.CreatedAt))
	}
	s.counters.Add(ctx, "urlflow_elicitation_transitions_total", "kind", string(e.Kind), "to", string(c.To))
}

// update applies fn to elicitation id under the same optimistic lock as Apply, for changes
// that are not state transitions (delivery records, requeues). fn modifies e and may queue
// more writes in the user's slot on p; the record is written unless fn returns write false,
// and entry, if not nil, is recorded in the history. A written record is announced with a
// notice of kind what, unless what is empty.
func (s *Store) update(ctx context.Context, id string, what NoticeKind, fn func(e *Elicitation, b *batch) (write bool, entry *Entry, err error)) (*Elicitation, error) {
	uk, err := s.userKeyOf(ctx, id)
	if err != nil {
		return nil, err
	}
	from := s.seenDoc(id)
	for range maxCASAttempts {
		e, doc, _, err := s.readForChange(ctx, uk, id, "", from)
		if err != nil {
			return nil, fmt.Errorf("update elicitation %s: %w", id, err)
		}
		b := s.newBatch()
		write, entry, err := fn(e, b)
		if err == nil && write {
			err = s.writeRecord(ctx, b, e)
		}
		if err == nil && write && entry != nil {
			err = s.appendHistory(ctx, b, e, *entry)
		}
		if err == nil && write && what != "" {
			err = s.queueNotice(ctx, b, e, what)
		}
		if err != nil {
			b.Discard()
			return nil, fmt.Errorf("update elicitation %s: %w", id, err)
		}
		ran, current, err := s.runIf(ctx, elicitationKey(uk, id), doc, nil, b)
		wrote := ran == ranWrote
		from = current
		if err != nil {
			return nil, fmt.Errorf("update elicitation %s: %w", id, err)
		}
		if wrote {
			if write {
				s.seeWritten(b, e)
			}
			s.writeAfterOrLog(ctx, b, id)
			return e, nil
		}
	}
	return nil, fmt.Errorf("update elicitation %s: too much contention", id)
}
