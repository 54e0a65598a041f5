package ask

import (
	"context"

	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/flow"
)

// A retry of a 2026-07-28 call carries its requestState (Redeem) and the client's answer to
// the input request it was shown; the caller records that answer and reads where the
// elicitation stands (Current), may wait for it to end (flow.Store.AwaitEnd), and turns it
// into an Outcome (Settle, or Recheck when it had ended before: what it stored may be gone).

// Current returns user's elicitation id, from a requestState that Redeem accepted for
// user, as it now stands, after recording the client's answer to it when action is one
// (accept, decline or cancel: flow.ClientAnswer; anything else records nothing).
// reporter, when not empty, names who reports the answer in the history ("the service
// weather"). The requestState's signature binds id to user; an elicitation of another user
// is state.ErrNotFound all the same, checked on this replica's copy before anything is
// recorded when it has one, and on the record otherwise.
func (a *Asker) Current(ctx context.Context, user state.User, id, action, reporter string) (*flow.Elicitation, error) {
	if e, seen := a.flows.Seen(id); seen && e.User != user {
		return nil, errNotFound
	}
	var e *flow.Elicitation
	var err error
	if ev, reason, ok := flow.ClientAnswer(action); ok {
		if reporter != "" {
			reason += ", as " + reporter + " reports"
		}
		// Apply answers the record as it now stands, changed or not: no second read.
		var change flow.Change
		change, err = a.flows.Apply(ctx, id, ev, state.ActorClient, reason)
		e = change.Elicitation
	} else {
		e, err = a.flows.Read(ctx, id)
	}
	if err != nil {
		return nil, err
	}
	if e.User != user {
		return nil, errNotFound
	}
	return e, nil
}

// Settle is the Outcome of an elicitation the caller watched and that now reads as e:
// Asking while it runs, Ended when it ended without success, and Stored (with e) when it
// completed. The credential is not read again: the step that completed the flow stored it,
// and Outcome.Credential is nil.
func Settle(e *flow.Elicitation) Outcome {
	switch {
	case e.State == flow.Complete:
		return Outcome{Status: Stored, Elicitation: e}
	case e.State.Terminal():
		return Outcome{Status: Ended, Elicitation: e}
	}
	return Outcome{Status: Asking, Elicitation: e}
}

// Recheck is the Outcome of n's elicitation e for a caller that comes back to it later (a
// retry with a requestState, which outlives its flow): as Settle, but when e completed, what
// is stored is checked again, since the credential may have been deleted since, and a new
// elicitation is opened if it was.
func (a *Asker) Recheck(ctx context.Context, n Need, e *flow.Elicitation) (Outcome, error) {
	if e.State != flow.Complete {
		return Settle(e), nil
	}
	n.Replace = false // what the flow stored is the replacement
	o, err := a.Ensure(ctx, n)
	if o.Status == Stored {
		o.Elicitation = e
	}
	return o, err
}
