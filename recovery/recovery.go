// Package recovery is what can be done for a flow that needs help (spec: "retry or cancel
// if the notification never arrives"): cancel it, send its completion notification again,
// or start a new attempt. Its user, the delegating service that asked for it and operators
// do it alike, through the API, the operators' pages or the MCP tools.
//
// The one idea to hold: every action says who acts and why (flow.Act), which the flow's
// history keeps, and an operator's action is also kept in the audit trail; an action that
// does not apply to the flow as it now stands is a *Conflict, and changes nothing.
package recovery

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/audit"
	"github.com/urlflow/urlflow/state/flow"
	"github.com/urlflow/urlflow/state/mcpsessions"
)

// DefaultDeliveryWait bounds how long Resend waits for the attempt it asked for.
const DefaultDeliveryWait = 5 * time.Second

// Options configure a Recovery. Flows, Sessions and Hub are required.
type Options struct {
	Flows    *flow.Store
	Sessions *mcpsessions.Registry
	Hub      *flow.Hub
	// Audit keeps the operators' actions; nothing is audited if nil.
	Audit *audit.Trail
	// TTL is the deadline of a new attempt.
	TTL time.Duration
	// DeliveryWait replaces DefaultDeliveryWait.
	DeliveryWait time.Duration
}

// Recovery acts on flows.
type Recovery struct {
	opts Options
}

// New returns a Recovery.
func New(opts Options) *Recovery {
	if opts.DeliveryWait <= 0 {
		opts.DeliveryWait = DefaultDeliveryWait
	}
	return &Recovery{opts: opts}
}

// A Conflict says why an action does not apply to a flow as it now stands; nothing was
// changed.
type Conflict struct {
	Elicitation *flow.Elicitation
	Why         string
}

func (c *Conflict) Error() string { return c.Why }

// Cancel ends running flow e as cancelled, for act. A flow that has ended is a Conflict.
func (r *Recovery) Cancel(ctx context.Context, e *flow.Elicitation, act flow.Act) (*flow.Elicitation, error) {
	change, err := r.opts.Flows.Apply(ctx, e.ID, flow.CancelRequested, act.Actor, act.Reason, flow.By(act.By))
	if err != nil {
		return nil, err
	}
	if !change.Changed() {
		return nil, &Conflict{Elicitation: change.Elicitation, Why: "this request has already ended"}
	}
	r.audit(ctx, change.Elicitation, "cancel", act)
	return change.Elicitation, nil
}

// Retry starts a new attempt of e, which ended without success, for act: the same user,
// purpose and session, linked both ways. A flow that completed, or was retried already, is
// a Conflict.
func (r *Recovery) Retry(ctx context.Context, e *flow.Elicitation, act flow.Act) (*flow.Elicitation, error) {
	if e.State == flow.Complete {
		return nil, &Conflict{Elicitation: e, Why: "this request is complete: there is nothing to try again"}
	}
	next, err := r.opts.Flows.Retry(ctx, e.ID, act, r.opts.TTL)
	if errors.Is(err, flow.ErrConflict) {
		if e, err = r.opts.Flows.Read(ctx, e.ID); err != nil {
			return nil, err
		}
		if !e.State.Terminal() || e.RetriedBy == "" {
			return nil, &Conflict{Elicitation: e, Why: "this request is " + string(e.State) + ": only an ended one gets a new attempt"}
		}
		return nil, &Conflict{Elicitation: e, Why: "this request was already retried as " + e.RetriedBy}
	}
	if err != nil {
		return nil, err
	}
	r.audit(ctx, e, "retry_new", act)
	return next, nil
}

// Resend asks the replica that holds e's MCP session to send the completion notification
// of ended flow e again, for act, and waits up to the delivery wait for that attempt, so
// that the flow returned tells its outcome. A flow without a session, or whose session has
// ended, is a Conflict.
func (r *Recovery) Resend(ctx context.Context, e *flow.Elicitation, act flow.Act) (*flow.Elicitation, error) {
	if e.SessionID == "" {
		return nil, &Conflict{Elicitation: e, Why: "this request has no client session to notify"}
	}
	ended, err := r.opts.Sessions.Ended(ctx, e.SessionID)
	if err != nil {
		return nil, fmt.Errorf("read the session of %s: %w", e.ID, err)
	}
	if why, ok := ended[e.SessionID]; ok {
		if e.Delivery.SessionEndedAt != nil {
			why = e.Delivery.SessionEnded // recorded by the replica that knew best
		}
		return nil, &Conflict{Elicitation: e, Why: sessionEndedConflict(why)}
	}
	wake, stop := r.opts.Hub.Wait(e.ID)
	defer stop()
	e, err = r.opts.Flows.Deliveries().Requeue(ctx, e.ID, act)
	if err != nil {
		return nil, err
	}
	before := e.Delivery.Attempts // as the requeue wrote it: the attempt it asks for comes after
	r.audit(ctx, e, "resend_notification", act)
	deadline := time.NewTimer(r.opts.DeliveryWait)
	defer deadline.Stop()
	for e.Delivery.Attempts == before {
		select {
		case <-wake:
		case <-deadline.C:
			return e, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if e, err = r.opts.Flows.Read(ctx, e.ID); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// sessionEndedConflict is the Conflict of a request to send again the completion
// notification of a flow whose session has ended as why says.
func sessionEndedConflict(why string) string {
	return "the client session that started this request has ended (" + why + "): there is nobody left to notify; " +
		"the result stays here, readable through elicitation_status and the API. " +
		`To ask the user again, start a new attempt (urlflow flows retry --new, or the body {"new": true})`
}

// audit keeps an operator's action what on e, for the reason in act, in the audit trail.
func (r *Recovery) audit(ctx context.Context, e *flow.Elicitation, what string, act flow.Act) {
	if act.Actor != state.ActorOperator || r.opts.Audit == nil {
		return
	}
	r.opts.Audit.Record(ctx, audit.Event{Event: audit.OperatorAction, Actor: state.ActorOperator, By: act.By, Cause: what,
		Elicitation: e.ID, Kind: string(e.Kind), Target: e.Target, Service: e.Service, Reason: act.Reason}.About(e.User))
}

// ReasonLimit bounds the reason of an action, in runes.
const ReasonLimit = 300
