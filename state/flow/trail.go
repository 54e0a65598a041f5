package flow

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/audit"
	"github.com/urlflow/urlflow/state/credentials"
)

// The audit trail of elicitations (package audit): the step that changes an elicitation's
// state queues the event with its other writes outside the user's slot (outside), so that
// a change and its audit event are written together.

// auditEvent returns the audit event of e for event what.
func auditEvent(e *Elicitation, what string) audit.Event {
	return audit.Event{Event: what, Elicitation: e.ID, Kind: string(e.Kind), Target: e.Target, Service: e.Service,
		Client: e.Client.Name}.About(e.User)
}

// queueTransitionAudit queues the audit event of entry, a change of e's state.
func (s *Store) queueTransitionAudit(ctx context.Context, b *batch, e *Elicitation, entry Entry) {
	if s.audit == nil {
		return
	}
	ev := auditEvent(e, audit.Transition)
	ev.At, ev.Cause, ev.Actor, ev.By, ev.From, ev.To, ev.Reason = entry.At, string(entry.Event), entry.Actor, entry.By,
		string(entry.From), string(entry.To), entry.Reason
	s.outside(b, func(p redis.Pipeliner) { s.audit.Queue(ctx, p, ev) })
}

// queueCredentialAudit queues the audit event of the credential that the step completing e
// stores: stored, or replaced when it takes the place of another.
func (s *Store) queueCredentialAudit(ctx context.Context, b *batch, e *Elicitation, replaced bool) {
	if s.audit == nil {
		return
	}
	what := audit.CredentialStored
	if replaced {
		what = audit.CredentialReplace
	}
	ev := auditEvent(e, what)
	ev.At, ev.Actor, ev.Credential = e.UpdatedAt, state.ActorUser, credentials.Name(e.Service, e.Target)
	s.outside(b, func(p redis.Pipeliner) { s.audit.Queue(ctx, p, ev) })
}
