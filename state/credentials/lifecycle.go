package credentials

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/state"
)

// The lifecycle of the credentials of delegating services: each change (stored, replaced,
// deleted, locked, reconnect required, released) is told to the Lifecycles of the Store
// (the service's event stream and webhook queue), which queue the writes that tell it.
// Stored and replaced are told by the step that completes the elicitation, in that step
// (package flow); the others by the Store right after the change, and a failure to tell is
// logged: the change itself is done.

// ChangeType is what happened to a credential.
type ChangeType string

// The changes of a credential's life.
const (
	ChangeStored            ChangeType = "stored"             // stored where none was
	ChangeReplaced          ChangeType = "replaced"           // stored in place of another
	ChangeDeleted           ChangeType = "deleted"            // by its user, an operator or its service
	ChangeLocked            ChangeType = "locked"             // a request tried to send it
	ChangeReconnectRequired ChangeType = "reconnect_required" // the provider refused a refresh
	ChangeReleased          ChangeType = "released"           // given to its service (release)
	ChangeOfflineWithdrawn  ChangeType = "offline_withdrawn"  // its user withdrew its use while away
)

// ChangeTypes are every ChangeType, in the order of a credential's life.
var ChangeTypes = []ChangeType{ChangeStored, ChangeReplaced, ChangeDeleted, ChangeLocked, ChangeReconnectRequired, ChangeReleased,
	ChangeOfflineWithdrawn}

// EventType is the type of the lifecycle event of t, as the event stream and webhooks name it.
func (t ChangeType) EventType() string { return "credential." + string(t) }

// A Change is one change of a credential of a user.
type Change struct {
	Type ChangeType
	User state.User
	// Credential is the credential after the change; for ChangeDeleted, as it was.
	Credential *Credential
	At         time.Time
	Actor      state.Actor
	Reason     string
}

// Service is the service that holds the changed credential (OwnService for urlflow's own
// tools, which have no lifecycle events).
func (c Change) Service() string {
	service, _ := SplitName(c.Credential.Name)
	return service
}

// Event is the lifecycle event of a credential as a service reads it, on its event stream
// and in its webhooks: never a value.
type Event struct {
	// Type is credential. and the ChangeType: credential.deleted.
	Type    string     `json:"type"`
	At      time.Time  `json:"at"`
	Service string     `json:"service"`
	Kind    state.Kind `json:"kind"`
	// Target is the slot or provider; Label its account label, if any.
	Target string `json:"target"`
	Label  string `json:"label,omitempty"`
	// UserRef is the reference the service knows the user by (package userref).
	UserRef string `json:"userRef"`
	// Actor caused the change; Reason says why, when known.
	Actor  state.Actor `json:"actor"`
	Reason string      `json:"reason,omitempty"`
	// ElicitationID is the flow that stored the credential, and Call and Metadata the
	// service's own from that flow's create request.
	ElicitationID string         `json:"elicitationId,omitempty"`
	Call          string         `json:"call,omitempty"`
	Metadata      state.Metadata `json:"metadata,omitempty"`
	// Credential describes the credential after the change; absent once deleted.
	Credential *Connection `json:"credential,omitempty"`
}

// Event returns the event of c, for the user known as userRef.
func (c Change) Event(userRef string) Event {
	conn := c.Credential.Connection()
	ev := Event{Type: c.Type.EventType(), At: c.At, Service: conn.Service, Kind: c.Credential.Kind, Target: conn.Name, Label: conn.Label,
		UserRef: userRef, Actor: c.Actor, Reason: c.Reason, ElicitationID: c.Credential.ElicitationID,
		Call: c.Credential.Call, Metadata: c.Credential.Metadata}
	if c.Type != ChangeDeleted {
		ev.Credential = &conn
	}
	return ev
}

// A Lifecycle hears of the changes of the credentials of delegating services.
type Lifecycle interface {
	// QueueCredentialChange queues on p the writes that tell of c.
	QueueCredentialChange(ctx context.Context, p redis.Pipeliner, c Change) error
}

// tell tells the Store's Lifecycles of c, unless the credential is urlflow's own; a failure
// is logged, as the change is done.
func (s *Store) tell(ctx context.Context, c Change) {
	if len(s.lifecycles) == 0 || c.Service() == OwnService {
		return
	}
	ctx = context.WithoutCancel(ctx)
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, l := range s.lifecycles {
			if err := l.QueueCredentialChange(ctx, p, c); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		s.log.ErrorContext(ctx, "credential change not told to its service", "user", c.User.Key(), "credential", c.Credential.Name,
			"change", c.Type, "err", err)
	}
}
