package flow

import (
	"context"

	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/audit"
)

// The audit trail of elicitations (package audit): on one server or behind Sentinel, the
// script of the step that changes an elicitation's state appends its audit event, so that
// a change and its event are written together. On a Cluster, where the trail's keys are in
// other slots, the event goes with the replica's next batch of audit events (within a
// second; audit.Trail.Later) once the step has written: a round trip per change would put
// a node over the budget of round trips per flow, and a crash of the replica in that
// second loses the event.

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
	s.queueAudit(ctx, b, ev)
}

// queueAudit queues ev with b: in its script, or on a Cluster for the batch that follows a
// step that wrote (writeAfter).
func (s *Store) queueAudit(ctx context.Context, b *batch, ev audit.Event) {
	if s.cluster {
		b.audits = append(b.audits, ev)
		return
	}
	s.audit.Queue(ctx, b, ev)
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
	ev.At, ev.Actor, ev.Credential = e.UpdatedAt, state.ActorUser, e.CredentialName()
	s.queueAudit(ctx, b, ev)
}
