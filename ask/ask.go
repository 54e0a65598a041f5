// Package ask makes sure that a user has the credential a caller needs: it is stored and
// usable, or an elicitation asks the user for it, or that asking has ended. It is the one
// use case behind urlflow's own MCP tools and behind the API of delegating services; each
// turns the Outcome into its own answer (an MCP result, a JSON body), and both carry the
// 2026-07-28 requestState that this package signs (Issue, Redeem).
//
// The one idea to hold: an Outcome is read from the stores, never taken from a client's
// answer. A client's answer is recorded as the state table says (an accept is consent,
// never success), and only the step that stored the credential completes a flow.
package ask

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/urlflow/urlflow/internal/signed"
	"github.com/urlflow/urlflow/internal/tracing"
	"github.com/urlflow/urlflow/slots"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/credentials"
	"github.com/urlflow/urlflow/state/flow"
	"github.com/urlflow/urlflow/state/once"
	"github.com/urlflow/urlflow/state/vault"
)

// Options configure an Asker.
type Options struct {
	Flows       *flow.Store
	Credentials *credentials.Store
	// Keys remembers the answers of creates sent with an idempotency key (EnsureOnce).
	Keys *once.Keys
	// Vault and Slots tell whether a stored secret is weaker than its slot now requires.
	Vault *vault.Vault
	Slots *slots.Catalog
	// TTL is the time from an elicitation's creation to its deadline.
	TTL time.Duration
	// ToolStateKeys sign the requestStates of urlflow's own tools, ServiceStateKeys those
	// of delegating services: the first key of each signs and every one verifies, so that a
	// requestState issued before a key rotation is still accepted (vault.KeyRing.DeriveAll).
	// One key or more each, of 32 bytes or more, and not the same, so that neither kind of
	// caller can send back the other's.
	ToolStateKeys, ServiceStateKeys [][]byte
	// Now returns the current time; time.Now if nil.
	Now    func() time.Time
	Logger *slog.Logger
}

// An Asker answers what callers need.
type Asker struct {
	flows           *flow.Store
	creds           *credentials.Store
	keys            *once.Keys
	vault           *vault.Vault
	slots           *slots.Catalog
	ttl             time.Duration
	tools, services signed.Sealer
	now             func() time.Time
	log             *slog.Logger
}

// New returns an Asker. It panics if a requestState key is shorter than 32 bytes.
func New(opts Options) *Asker {
	a := &Asker{flows: opts.Flows, creds: opts.Credentials, keys: opts.Keys, vault: opts.Vault, slots: opts.Slots,
		ttl: opts.TTL, tools: signed.NewSealer(opts.ToolStateKeys...), services: signed.NewSealer(opts.ServiceStateKeys...),
		now: opts.Now, log: opts.Logger}
	if a.now == nil {
		a.now = time.Now
	}
	if a.log == nil {
		a.log = slog.Default()
	}
	return a
}

// A Caller is who needs a credential: urlflow's own tools, for the user of an MCP client
// (Service empty), or a delegating service, for its user.
type Caller struct {
	// Service is the delegating service; Releasable whether it may receive what the user
	// provides itself (its release setting).
	Service    string
	Releasable bool
	// Client is the MCP client as it named itself; SessionID its 2025-11-25 session, if
	// any; Replica the urlflow process that holds that session.
	Client    state.ClientInfo
	SessionID string
	Replica   string
	// Offline asks the user to let the service use the credential while away.
	Offline bool
	// Call and Metadata are a service's own, kept with the flow and what it stores
	// (flow.Elicitation.Call, flow.Elicitation.Metadata).
	Call     string
	Metadata state.Metadata
}

// A Need is a credential that a caller needs of a user.
type Need struct {
	User   state.User
	Kind   state.Kind
	Target string // a slot, or a provider
	// Label is the account label among several credentials of Target (a service's only).
	Label string
	// Scopes are the access a provider's grant must cover (already the provider's defaults
	// when the caller named none).
	Scopes []string
	// Replace asks the user again although a usable credential is stored.
	Replace bool
	Caller  Caller
	// Purpose is the reason the pages show the user, given how the credential that a new
	// elicitation would replace stands (nil when nothing is stored).
	Purpose func(replacing *flow.Replaced) string
}

// name is the name the credential of n is stored under.
func (n Need) name() string {
	return credentials.Labeled(credentials.Name(n.Caller.Service, n.Target), n.Label)
}

// Status says where a Need stands.
type Status int

// The statuses of an Outcome.
const (
	// Stored: a usable credential is stored; nothing is asked.
	Stored Status = iota + 1
	// Missing: no usable credential is stored, and nothing asks for it yet (Check).
	Missing
	// Asking: an elicitation asks the user for it.
	Asking
	// Ended: the elicitation ended; its state says how (declined, cancelled, expired, or,
	// for an answer given again (EnsureOnce), complete).
	Ended
)

// An Outcome is where a Need stands.
type Outcome struct {
	Status Status
	// Credential is what is stored: usable (Stored; nil when an elicitation has just stored
	// it), or not (Missing: locked, disconnected, short of scopes, or asked again).
	Credential *credentials.Credential
	// Elicitation asks for it (Asking), has ended (Ended), or has just stored it (Stored).
	Elicitation *flow.Elicitation
	// Created is set when this call created the elicitation, or, for an answer given
	// again, when the first answer did.
	Created bool
	// Replayed is set when the Outcome is the first answer to a request sent again with
	// its idempotency key (EnsureOnce): its elicitation as it now stands.
	Replayed bool
}

// Check reports whether a usable credential of n is stored (Stored, with it), or not
// (Missing, with the unusable one or none).
func (a *Asker) Check(ctx context.Context, n Need) (Outcome, error) {
	cred, err := a.creds.Get(ctx, n.User, n.name())
	switch {
	case errors.Is(err, state.ErrNotFound):
		return Outcome{Status: Missing}, nil
	case err != nil:
		return Outcome{}, err
	case !n.Replace && !cred.Locked() && !cred.NeedsReconnect && cred.Covers(n.Scopes) && (cred.Offline || !n.Caller.Offline) && a.complete(n, cred):
		return Outcome{Status: Stored, Credential: cred}, nil
	}
	return Outcome{Status: Missing, Credential: cred}, nil
}

// complete reports whether cred holds what the base URL of n's slot takes: a secret
// stored before its slot's base URL took parameters must be entered again, with them.
func (a *Asker) complete(n Need, cred *credentials.Credential) bool {
	return n.Kind != state.KindSecret || a.slots.Lacks(n.Target, cred.Parameters) == nil
}

// Open opens the elicitation that asks the user for n, whose Check was missing: the
// running one of the same user, caller, session and target when there is one, or a new
// one, which replaces what is stored (missing.Credential), saying how that stands.
func (a *Asker) Open(ctx context.Context, n Need, missing Outcome) (Outcome, error) {
	replaced := a.replaced(ctx, n.User, missing.Credential)
	ne := flow.NewElicitation{
		User: n.User, Kind: n.Kind, Target: n.Target, Label: n.Label, Scopes: n.Scopes,
		Service: n.Caller.Service, Releasable: n.Caller.Releasable, Offline: n.Caller.Offline, Call: n.Caller.Call, Metadata: n.Caller.Metadata, Client: n.Caller.Client,
		SessionID: n.Caller.SessionID, Replica: n.Caller.Replica, TTL: a.ttl,
		Replace: replaced != nil, Replaced: replaced, Trace: tracing.Carried(ctx),
	}
	if n.Purpose != nil {
		ne.Purpose = n.Purpose(replaced)
	}
	e, created, err := a.flows.Open(ctx, ne)
	if err != nil {
		return Outcome{}, err
	}
	return Outcome{Status: Asking, Elicitation: e, Created: created, Credential: missing.Credential}, nil
}

// Ensure is Check, then Open when nothing usable is stored.
func (a *Asker) Ensure(ctx context.Context, n Need) (Outcome, error) {
	o, err := a.Check(ctx, n)
	if err != nil || o.Status == Stored {
		return o, err
	}
	return a.Open(ctx, n, o)
}

// replaced says how cred, which a new elicitation replaces, stands: nil when nothing is
// stored.
func (a *Asker) replaced(ctx context.Context, user state.User, cred *credentials.Credential) *flow.Replaced {
	if cred == nil {
		return nil
	}
	return &flow.Replaced{LockReason: cred.LockReason, Weak: a.Weak(ctx, user, cred), Reconnect: cred.NeedsReconnect}
}

// Weak reports whether user's stored secret cred is weaker than its slot now requires of a
// secret used with an API. A secret that does not open counts as not weak: using it says
// what is wrong.
func (a *Asker) Weak(ctx context.Context, user state.User, cred *credentials.Credential) bool {
	if cred == nil || cred.Kind != state.KindSecret {
		return false
	}
	_, target := credentials.SplitName(cred.Name)
	slot, ok := a.slots.Lookup(target)
	if !ok || slot.API == nil {
		return false
	}
	secret, err := a.vault.Open(user, cred.Name, cred.Sealed)
	if err != nil {
		a.log.WarnContext(ctx, "stored credential does not open", "credential", cred.Name, "err", err)
		return false
	}
	return slot.Weak(secret)
}

// Errors of EnsureOnce for an idempotency key sent before.
var (
	// ErrKeyReused: the key was sent with another request.
	ErrKeyReused = once.ErrReused
	// ErrKeyBusy: the first request with the key is still being answered.
	ErrKeyBusy = once.ErrBusy
	// ErrKeyGone: the elicitation of the first answer is gone (past its retention).
	ErrKeyGone = errors.New("the elicitation of the first request with this idempotency key is gone")
)

// EnsureOnce is Ensure for a request sent with an idempotency key in the namespace of n's
// service: the first request with key is answered by Ensure, and one sent again with it
// gets that answer's elicitation as it now stands (Replayed; Ended once it has ended,
// complete included). request is a digest of the request and its user: the key with
// another request is ErrKeyReused. A first answer that named no elicitation (Stored) is
// not kept.
func (a *Asker) EnsureOnce(ctx context.Context, n Need, key, request string) (Outcome, error) {
	var first Outcome
	kept, replay, err := a.keys.Do(ctx, n.Caller.Service, key, request, func(ctx context.Context) (once.Answer, error) {
		var err error
		if first, err = a.Ensure(ctx, n); err != nil || first.Elicitation == nil {
			return once.Answer{}, err
		}
		return once.Answer{ElicitationID: first.Elicitation.ID, Created: first.Created}, nil
	})
	if err != nil || !replay {
		return first, err
	}
	e, err := a.flows.Read(ctx, kept.ElicitationID)
	if errors.Is(err, state.ErrNotFound) {
		return Outcome{}, ErrKeyGone
	}
	if err != nil {
		return Outcome{}, err
	}
	o := Outcome{Status: Asking, Elicitation: e, Created: kept.Created, Replayed: true}
	if e.State.Terminal() {
		o.Status = Ended
	}
	return o, nil
}

// errNotFound is what Current answers for an elicitation that is not the user's.
var errNotFound = fmt.Errorf("no such elicitation of this user: %w", state.ErrNotFound)
