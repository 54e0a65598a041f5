package providers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/counters"
	"github.com/urlflow/urlflow/state/credentials"
	"github.com/urlflow/urlflow/state/vault"
)

// Refresh timing of Keeper.
const (
	// refreshAhead refreshes a token this long before it expires.
	refreshAhead = time.Minute
	// lockTTL bounds how long one refresh may hold the lock.
	lockTTL = 30 * time.Second
	// lockPoll is how often a caller that found the lock taken looks again.
	lockPoll = 100 * time.Millisecond
)

// ErrNotConnected: the user has no connection to the provider.
var ErrNotConnected = errors.New("not connected")

// Keeper keeps users' third-party tokens: it seals them into the credential store, opens
// them for use, and refreshes them shortly before they expire (or when the provider just
// refused the access token). Refreshes happen under a Redis lock per connection, so that
// concurrent calls refresh once and rotated refresh tokens are stored atomically: one
// caller refreshes, the others wait and read what it stored.
type Keeper struct {
	store    *credentials.Store
	vault    *vault.Vault
	counters *counters.Counters
	log      *slog.Logger
}

// NewKeeper returns a Keeper that keeps connections in store, sealed by v, and counts
// refreshes in c (nothing is counted if c is nil).
func NewKeeper(store *credentials.Store, v *vault.Vault, c *counters.Counters, log *slog.Logger) *Keeper {
	if log == nil {
		log = slog.Default()
	}
	return &Keeper{store: store, vault: v, counters: c, log: log}
}

// Seal returns the credential that stores t as user's connection called name (the
// provider's name in its service's namespace, credentials.Name).
func (k *Keeper) Seal(user state.User, name, elicitationID string, t *Token, now time.Time) (*credentials.Credential, error) {
	sealed, err := k.seal(user, name, t)
	if err != nil {
		return nil, err
	}
	return &credentials.Credential{Name: name, Kind: state.KindOAuth, ElicitationID: elicitationID, StoredAt: now,
		Account: t.Account.Name, Scopes: t.Scopes, Sealed: sealed}, nil
}

func (k *Keeper) seal(user state.User, name string, t *Token) (vault.Sealed, error) {
	doc, err := json.Marshal(t)
	if err != nil {
		return vault.Sealed{}, fmt.Errorf("encode token: %w", err)
	}
	return k.vault.Seal(user, name, state.NewSecret(string(doc)))
}

func (k *Keeper) open(user state.User, c *credentials.Credential) (*Token, error) {
	secret, err := k.vault.Open(user, c.Name, c.Sealed)
	if err != nil {
		return nil, err
	}
	var t Token
	if err := json.Unmarshal([]byte(secret.Reveal()), &t); err != nil {
		return nil, fmt.Errorf("decode the stored token of %s", c.Name)
	}
	return &t, nil
}

// Token returns the token of user's connection to p called name (p's name in its
// service's namespace, credentials.Name), fresh enough to use. rejected, when
// not empty, is an access token the provider just refused (401): a token still equal to
// it is refreshed whatever its expiry says. ErrReconnect means the user must connect
// again; ErrNotConnected that there is nothing to use.
func (k *Keeper) Token(ctx context.Context, user state.User, name string, p *Provider, rejected string) (*Token, error) {
	deadline := time.Now().Add(lockTTL + 5*time.Second)
	for {
		_, t, err := k.current(ctx, user, name)
		if err != nil || !stale(t, rejected) {
			return t, err
		}
		lock, ok, err := k.store.TryLock(ctx, user, name, lockTTL)
		if err != nil {
			return nil, err
		}
		if ok {
			t, err := k.refreshLocked(ctx, user, name, p, rejected, lock)
			if errors.Is(err, errStoredAgain) {
				_, t, err = k.current(ctx, user, name)
			}
			return t, err
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the token of %s is being refreshed and did not come back in time", name)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(lockPoll): // another caller refreshes; read what it stores
		}
	}
}

// current reads and opens the stored token called name.
func (k *Keeper) current(ctx context.Context, user state.User, name string) (*credentials.Credential, *Token, error) {
	c, err := k.store.Get(ctx, user, name)
	if errors.Is(err, state.ErrNotFound) {
		return nil, nil, ErrNotConnected
	}
	if err != nil {
		return nil, nil, err
	}
	if c.Kind != state.KindOAuth {
		return nil, nil, fmt.Errorf("%s is not a third-party connection", name)
	}
	if c.NeedsReconnect {
		return nil, nil, fmt.Errorf("%w: it was marked so at its last refresh", ErrReconnect)
	}
	t, err := k.open(user, c)
	if err != nil {
		return nil, nil, err
	}
	return c, t, nil
}

// stale reports whether t must be refreshed before use: the provider refused it, or it
// expires within refreshAhead (or within a quarter of its lifetime, for short-lived
// tokens, so that a fresh token is never stale at once).
func stale(t *Token, rejected string) bool {
	if rejected != "" && t.AccessToken == rejected {
		return true
	}
	if t.Expiry.IsZero() {
		return false
	}
	ahead := refreshAhead
	if !t.Obtained.IsZero() {
		ahead = min(ahead, t.Expiry.Sub(t.Obtained)/4)
	}
	return time.Until(t.Expiry) < ahead
}

// refreshLocked refreshes under the lock taken with lock. Another caller may have
// refreshed between our read and our lock: then the stored token is used as it is. What
// the refresh brings is written onto the connection it refreshed only: if the user
// connected again, or urlflow locked the connection, while the provider answered, what
// is stored now stays and is what the caller gets.
func (k *Keeper) refreshLocked(ctx context.Context, user state.User, name string, p *Provider, rejected, lock string) (*Token, error) {
	defer func() {
		if err := k.store.Unlock(context.WithoutCancel(ctx), user, name, lock); err != nil {
			k.log.WarnContext(ctx, "refresh lock not released; it expires", "credential", name, "err", err)
		}
	}()
	c, t, err := k.current(ctx, user, name)
	if err != nil || !stale(t, rejected) {
		return t, err
	}
	next, err := p.Refresh(ctx, t)
	k.counters.Add(ctx, "urlflow_token_refreshes_total", "provider", p.Name, "result", refreshResult(err))
	if errors.Is(err, ErrReconnect) {
		k.log.InfoContext(ctx, "connection needs to be made again", "user", user.Key(), "provider", p.Name, "err", err)
		return nil, k.storeRefresh(ctx, user, c, err, func(c *credentials.Credential) { c.NeedsReconnect = true })
	}
	if err != nil {
		return nil, err
	}
	sealed, err := k.seal(user, name, next)
	if err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	err = k.storeRefresh(ctx, user, c, nil, func(c *credentials.Credential) {
		c.Sealed, c.RefreshedAt, c.Scopes = sealed, &now, next.Scopes
	})
	if err != nil {
		return nil, err
	}
	k.log.InfoContext(ctx, "token refreshed", "user", user.Key(), "provider", p.Name)
	return next, nil
}

// storeRefresh writes what change makes of the connection c that was refreshed, and
// returns outcome (the refresh's own error, nil when it succeeded) when that is done.
// The connection was deleted meanwhile: ErrNotConnected. It was made again or locked
// meanwhile: errStoredAgain, which Token answers with the connection stored now.
func (k *Keeper) storeRefresh(ctx context.Context, user state.User, c *credentials.Credential, outcome error, change func(*credentials.Credential)) error {
	err := k.store.Update(ctx, user, c, change)
	switch {
	case errors.Is(err, state.ErrNotFound):
		return ErrNotConnected // disconnected while the refresh was on its way
	case errors.Is(err, credentials.ErrStoredAgain):
		k.log.InfoContext(ctx, "connection stored again during its refresh; the refresh is dropped", "user", user.Key(), "credential", c.Name)
		return errStoredAgain
	case err != nil:
		return err
	}
	return outcome
}

// errStoredAgain tells Token that the connection it refreshed was replaced meanwhile, so
// that it reads the one stored now.
var errStoredAgain = errors.New("stored again during the refresh")

// Disconnection is what Disconnect did to a user's connection.
type Disconnection struct {
	// Deleted says whether there was a connection. It is deleted even when revoking its
	// tokens failed, since urlflow no longer holds them.
	Deleted bool
	// RevokeErr is what came of revoking the tokens at the provider: nil when revoked (or
	// when the provider had already stopped honouring them), ErrNoRevocation, or the failure.
	RevokeErr error
	// label is the provider's.
	label string
}

// Disconnect revokes user's connection to p called name (p's name in its service's
// namespace, credentials.Name) at the provider where it can, then deletes it; a
// revocation that failed is logged. A connection the provider already stopped honouring
// is not revoked again. The audit trail records actor and reason.
func (k *Keeper) Disconnect(ctx context.Context, user state.User, name string, p *Provider, actor state.Actor, reason string) (Disconnection, error) {
	d := Disconnection{label: p.Label}
	c, err := k.store.Get(ctx, user, name)
	if errors.Is(err, state.ErrNotFound) {
		return d, nil
	}
	if err != nil {
		return d, err
	}
	if !c.NeedsReconnect {
		if t, err := k.open(user, c); err != nil {
			d.RevokeErr = err
		} else {
			d.RevokeErr = p.Revoke(ctx, t)
		}
	}
	d.Deleted, err = k.store.Delete(ctx, user, name, actor, reason)
	if d.Deleted && d.RevokeErr != nil && !errors.Is(d.RevokeErr, ErrNoRevocation) {
		k.log.WarnContext(ctx, "revocation failed; tokens deleted anyway", "provider", p.Name, "err", d.RevokeErr)
	}
	return d, err
}

// Revoked reports whether the connection was deleted and its tokens revoked.
func (d Disconnection) Revoked() bool { return d.Deleted && d.RevokeErr == nil }

// Text tells the user what Disconnect did to their account. It never quotes RevokeErr,
// whose text is the provider's.
func (d Disconnection) Text() string {
	label := d.label
	switch {
	case !d.Deleted:
		return fmt.Sprintf("You had no %s account connected; nothing was deleted.", label)
	case d.RevokeErr == nil:
		return fmt.Sprintf("Your %s account is disconnected: urlflow revoked its access at %s and deleted its tokens.", label, label)
	case errors.Is(d.RevokeErr, ErrNoRevocation):
		return fmt.Sprintf("urlflow deleted its tokens for your %s account. %s offers no way for urlflow to revoke "+
			"them; to remove urlflow's access there too, use your %s account settings.", label, label, label)
	}
	return fmt.Sprintf("urlflow deleted its tokens for your %s account, but revoking them at %s failed; "+
		"to be sure, remove urlflow's access in your %s account settings.", label, label, label)
}

func refreshResult(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, ErrReconnect):
		return "reconnect"
	}
	return "error"
}
