package flow

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/state/credentials"
)

// An Outbox is an outbound channel that hears of every step that creates an elicitation or
// changes its state, to tell someone outside urlflow: a delegating service's event stream
// (package serviceevents), its webhook (package webhooks). Each step asks every Outbox of
// the Store (StoreOptions.Outboxes) to queue its writes, which go with the step: in the
// step's script on one server and behind Sentinel, so that they are written exactly when
// the step is; on a Cluster, where a script stays in its user's slot, in a round trip of
// their own once the script has written (tried again, and a failure logged with the
// step). A new transport is one new Outbox.
type Outbox interface {
	// QueueStep queues on w the writes that tell the channel of step s, if any.
	QueueStep(ctx context.Context, w Writes, s Step) error
}

// A Step is what a step did, as an Outbox hears of it.
type Step struct {
	// Elicitation is the record after the step.
	Elicitation *Elicitation
	// Event is what happened: Created for a creation, or the event that changed the state.
	Event Event
	// From is the state before the step; empty for a creation.
	From State
	// Stored is the credential the step stored (ChangeStored or ChangeReplaced), when it
	// completed the flow of one.
	Stored *credentials.Change
}

// Ended reports whether the step ended the flow.
func (s Step) Ended() bool {
	return s.From != "" && s.From != s.Elicitation.State && s.Elicitation.State.Terminal()
}

// Writes takes the writes an Outbox makes for a step.
type Writes interface {
	// Outside queues fn's writes, to keys outside the elicitation's user's slot.
	Outside(fn func(redis.Pipeliner))
}

// stepWrites are the Writes of a step's batch.
type stepWrites struct {
	s *Store
	b *batch
}

func (w stepWrites) Outside(fn func(redis.Pipeliner)) { w.s.outside(w.b, fn) }

// queueOutboxes asks every Outbox to queue its writes for step on b.
func (s *Store) queueOutboxes(ctx context.Context, b *batch, step Step) error {
	for _, o := range s.outboxes {
		if err := o.QueueStep(ctx, stepWrites{s: s, b: b}, step); err != nil {
			return err
		}
	}
	return nil
}
