// Package forget erases what urlflow keeps about one person, on an operator's request:
// every flow of the user with its history, every credential (the services that held one
// are told, as when a user disconnects it), the user's browser and MCP sessions, rate-limit
// counters and indexes, the identity by which services knew the user's reference, and, in
// the audit trail, the user's identity, which a tombstone replaces. The trail keeps its
// events, so that it still says what happened, and records the forgetting itself, about
// the tombstone. docs/privacy.md lists what urlflow keeps about a person and for how long.
//
// Forgetting is safe to run again: a run that stopped part way (Redis went away) is
// finished by the next one, and a run for a user urlflow knows nothing of changes nothing
// but the audit trail's record of it.
package forget

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"

	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/audit"
	"github.com/urlflow/urlflow/state/credentials"
	"github.com/urlflow/urlflow/state/flow"
	"github.com/urlflow/urlflow/state/mcpsessions"
	"github.com/urlflow/urlflow/state/servicecreds"
)

// Options are the stores a Forgetter erases from. All are required but
// ServiceCredentials and Services, for a deployment without delegating services.
type Options struct {
	Redis              redis.UniversalClient
	Flows              *flow.Store
	Credentials        *credentials.Store
	Sessions           *mcpsessions.Registry
	ServiceCredentials *servicecreds.Index
	// Services names the delegating services, whose references to users are forgotten.
	Services []string
	Audit    *audit.Trail
	Logger   *slog.Logger
}

// Forgetter forgets users.
type Forgetter struct {
	opts Options
	log  *slog.Logger
}

// New returns a Forgetter.
func New(opts Options) *Forgetter {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Forgetter{opts: opts, log: log}
}

// TombstoneIssuer is the issuer of the tombstones that stand for forgotten users in the
// audit trail.
const TombstoneIssuer = "urn:urlflow:forgotten"

// Report says what a Forget erased.
type Report struct {
	// Tombstone is the subject that stands for the user in the audit trail from now on
	// (issuer TombstoneIssuer): the events about the user, and the forgetting's own.
	Tombstone   string `json:"tombstone"`
	Flows       int    `json:"flows"`
	Credentials int    `json:"credentials"`
	// Sessions are the live MCP sessions ended.
	Sessions int `json:"sessions"`
	// Keys are the user's other Redis keys deleted: its sessions, indexes, rate-limit
	// counters, running flows' markers (beside its flows and credentials).
	Keys int `json:"keys"`
	// AuditEvents are the events of the trail whose user is now the tombstone.
	AuditEvents int `json:"auditEvents"`
}

// credentialReason is the reason the audit trail and the services read for each credential
// deleted by forgetting its user.
const credentialReason = "its user was forgotten at an operator's request"

// Forget erases what urlflow keeps about user, for the operator by, who gave reason, and
// records it in the audit trail. An error says what step stopped it; what it erased before
// stays erased, and running it again finishes the rest.
func (f *Forgetter) Forget(ctx context.Context, user state.User, by, reason string) (Report, error) {
	r := Report{Tombstone: "forgotten-" + rand.Text()}
	var err error
	// The sessions first: a client still connected would go on making flows meanwhile.
	if r.Sessions, err = f.opts.Sessions.EndAll(ctx, user); err != nil {
		return r, err
	}
	if r.Credentials, err = f.deleteCredentials(ctx, user); err != nil {
		return r, err
	}
	keys, err := f.userKeys(ctx, user)
	if err != nil {
		return r, err
	}
	ids, err := f.opts.Flows.Forget(ctx, user, keys)
	if err != nil {
		return r, err
	}
	r.Flows = len(ids)
	if f.opts.ServiceCredentials != nil {
		if err := f.opts.ServiceCredentials.ForgetUser(ctx, f.opts.Services, user); err != nil {
			return r, err
		}
	}
	if r.Keys, err = f.deleteKeys(ctx, user); err != nil {
		return r, err
	}
	// The events this replica holds back (the credentials' deletions) first, so that they
	// are tombstoned too.
	f.opts.Audit.Flush(ctx)
	tombstone := state.User{Issuer: TombstoneIssuer, Subject: r.Tombstone}
	if r.AuditEvents, err = f.opts.Audit.Forget(ctx, user.Key(), user.Subject, tombstone); err != nil {
		return r, err
	}
	f.opts.Audit.Record(ctx, audit.Event{Event: audit.UserForgotten, Actor: state.ActorOperator, By: by,
		Reason: fmt.Sprintf("%s (%d flows, %d credentials, %d sessions, %d keys, %d audit events)",
			audit.Unquote(reason, user.Subject, r.Tombstone), r.Flows, r.Credentials, r.Sessions, r.Keys, r.AuditEvents)}.About(tombstone))
	f.log.InfoContext(ctx, "user forgotten", "tombstone", r.Tombstone, "by", by, "flows", r.Flows,
		"credentials", r.Credentials, "sessions", r.Sessions, "keys", r.Keys, "audit_events", r.AuditEvents)
	return r, nil
}

// deleteCredentials deletes every credential of user through the credential store, which
// records each deletion and tells the service that held it, and returns how many.
func (f *Forgetter) deleteCredentials(ctx context.Context, user state.User) (int, error) {
	names, err := f.opts.Credentials.Names(ctx, user)
	if err != nil {
		return 0, err
	}
	deleted := 0
	for _, name := range names {
		ok, err := f.opts.Credentials.Delete(ctx, user, name, state.ActorOperator, credentialReason)
		if err != nil {
			return deleted, err
		}
		if ok {
			deleted++
		}
	}
	return deleted, nil
}

// userKeys returns every key of user: those that carry its hash tag (state.UserTag).
func (f *Forgetter) userKeys(ctx context.Context, user state.User) ([]string, error) {
	var keys []string
	err := state.ScanKeys(ctx, f.opts.Redis, state.UserTag(user.Key())+"*", func(key string) error {
		keys = append(keys, key)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("find the user's keys: %w", err)
	}
	return keys, nil
}

// deleteKeys deletes every key of user that is left, and returns how many.
func (f *Forgetter) deleteKeys(ctx context.Context, user state.User) (int, error) {
	keys, err := f.userKeys(ctx, user)
	if err != nil || len(keys) == 0 {
		return 0, err
	}
	// One slot: one DEL, in batches that keep each command small.
	deleted := 0
	for len(keys) > 0 {
		batch := keys[:min(len(keys), 500)]
		keys = keys[len(batch):]
		n, err := f.opts.Redis.Del(ctx, batch...).Result()
		if err != nil {
			return deleted, fmt.Errorf("delete the user's keys: %w", err)
		}
		deleted += int(n)
	}
	return deleted, nil
}
