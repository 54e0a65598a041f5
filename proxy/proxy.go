// Package proxy calls the API of a secret slot or a third-party provider with a user's
// stored credential injected. It is the one path from a stored credential to an outside
// API, shared by the MCP tool call_api and the API of delegating services.
//
// Package upstream confines the request to the API's base URL and redacts the credential
// from the answer; this package adds what needs the store: the credential is opened only
// here, a request that carries it is refused (and a secret locked until its user enters
// it again, since the request may be a guess being checked), a provider's token is
// refreshed before it expires and once more when the API refuses it, and every use is
// recorded.
package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/urlflow/urlflow/oauth/providers"
	"github.com/urlflow/urlflow/slots"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/counters"
	"github.com/urlflow/urlflow/state/credentials"
	"github.com/urlflow/urlflow/state/vault"
	"github.com/urlflow/urlflow/upstream"
)

// Proxy makes the calls. Its zero value is not usable; use New.
type Proxy struct {
	creds    *credentials.Store
	vault    *vault.Vault
	keeper   *providers.Keeper
	upstream *upstream.Caller
	counters *counters.Counters
	log      *slog.Logger
}

// New returns a Proxy that reads credentials from creds, opens secrets with v, gets
// providers' tokens from keeper, calls out with caller and counts refused requests in c.
func New(creds *credentials.Store, v *vault.Vault, keeper *providers.Keeper, caller *upstream.Caller, c *counters.Counters, log *slog.Logger) *Proxy {
	if log == nil {
		log = slog.Default()
	}
	return &Proxy{creds: creds, vault: v, keeper: keeper, upstream: caller, counters: c, log: log}
}

// Use says who uses a credential, for the audit log and the lock reason.
type Use struct {
	// User owns the credential; Name is its name in the store (credentials.Name).
	User state.User
	Name string
	// Actor is who sent the request; Via names it in a lock reason ("a call_api request").
	Actor state.Actor
	Via   string
}

// LockedError says that the secret is locked until its user enters it again.
type LockedError struct{ Reason string }

func (e *LockedError) Error() string { return "the secret is locked: " + e.Reason }

// CarriedError says that a request carried the credential (or a form of it) and was not
// sent. Locked reports whether the secret is now locked; for a provider's token it is
// never locked (the provider's token rotates).
type CarriedError struct {
	Where  string
	Kind   state.Kind
	Locked bool
}

func (e *CarriedError) Error() string {
	return "the request carries the credential in its " + e.Where + "; nothing was sent"
}

// ErrUnopenable says that the stored secret does not open (its key was retired).
var ErrUnopenable = vault.ErrUnopenable

// ErrNoToken wraps why no working token of a connection could be had: it is not connected
// (providers.ErrNotConnected), the provider no longer honours it (providers.ErrReconnect),
// or the store or the provider failed.
var ErrNoToken = errors.New("no working token")

// Check refuses a request that api can never serve (a method it does not allow, a path
// that leaves its base URL or is not plain, a header it may not set, a body too large),
// before anything is asked or read.
func Check(api *upstream.API, req upstream.Request) error {
	if !api.Allows(req.Method) {
		return fmt.Errorf("%w: %s; allowed: %s", upstream.ErrMethod, strings.ToUpper(req.Method), strings.Join(api.Methods, ", "))
	}
	if _, err := api.Resolve(req.Path); err != nil {
		return err
	}
	return upstream.CheckOwnParts(api, req)
}

// ErrIncomplete wraps why a stored secret lacks what its slot's templated base URL takes
// (upstream.ErrParameters): the slot's configuration changed since it was stored, and the
// user must enter it again.
var ErrIncomplete = errors.New("the stored secret lacks what its API now takes")

// Secret calls slot's API, its base URL made of cred's parameters, with the secret of
// cred, which u.User's credential u.Name was read as. It returns the answer and whether
// the secret is weak for the slot.
func (p *Proxy) Secret(ctx context.Context, u Use, slot *slots.Slot, cred *credentials.Credential, req upstream.Request) (*upstream.Response, bool, error) {
	if cred.Locked() {
		return nil, false, &LockedError{Reason: cred.LockReason}
	}
	api, err := slot.API.Bind(cred.Parameters)
	if err != nil {
		return nil, false, fmt.Errorf("%w: %w", ErrIncomplete, err)
	}
	secret, err := p.vault.Open(u.User, u.Name, cred.Sealed)
	if err != nil {
		p.log.ErrorContext(ctx, "stored credential does not open", "user", u.User.Key(), "credential", u.Name, "err", err)
		return nil, false, err
	}
	resp, err := p.upstream.Call(ctx, api, secret, req)
	var carried *upstream.SecretInRequestError
	if errors.As(err, &carried) {
		p.counters.Add(ctx, "urlflow_secret_in_request_total", "kind", string(state.KindSecret))
		reason := u.Via + " carried it in its " + carried.Where
		// The lock holds even when the caller has gone away meanwhile: the secret may be a
		// guess being checked.
		locked, lockErr := p.creds.Lock(context.WithoutCancel(ctx), u.User, cred, u.Actor, reason)
		if lockErr != nil {
			p.log.ErrorContext(ctx, "credential not locked", "credential", u.Name, "err", lockErr)
		}
		// Not locked without an error: the user stored it anew, or deleted it, meanwhile.
		return nil, false, &CarriedError{Where: carried.Where, Kind: state.KindSecret, Locked: locked}
	}
	if err != nil {
		return nil, false, err
	}
	p.touch(ctx, u)
	return resp, slot.Weak(secret), nil
}

// Provider calls prov's API with the access token of u.User's connection u.Name. A
// token about to expire is refreshed first, and one the API refuses (401) is refreshed
// once and the call made again. Not getting a token is ErrNoToken, wrapping why
// (providers.ErrNotConnected and providers.ErrReconnect: the user must connect again).
func (p *Proxy) Provider(ctx context.Context, u Use, prov *providers.Provider, req upstream.Request) (*upstream.Response, error) {
	tok, err := p.keeper.Token(ctx, u.User, u.Name, prov, "")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoToken, err)
	}
	resp, err := p.upstream.Call(ctx, prov.API, state.NewSecret(tok.AccessToken), req)
	if err == nil && resp.Status == http.StatusUnauthorized {
		// The provider refused the access token: refresh it once and try again.
		if tok, err = p.keeper.Token(ctx, u.User, u.Name, prov, tok.AccessToken); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNoToken, err)
		}
		resp, err = p.upstream.Call(ctx, prov.API, state.NewSecret(tok.AccessToken), req)
	}
	if carried := (*upstream.SecretInRequestError)(nil); errors.As(err, &carried) {
		p.counters.Add(ctx, "urlflow_secret_in_request_total", "kind", string(state.KindOAuth))
		p.log.WarnContext(ctx, "request carrying an access token refused", "user", u.User.Key(), "credential", u.Name, "where", carried.Where)
		return nil, &CarriedError{Where: carried.Where, Kind: state.KindOAuth}
	}
	if err != nil {
		return nil, err
	}
	p.touch(ctx, u)
	return resp, nil
}

// touch records that the credential was used.
func (p *Proxy) touch(ctx context.Context, u Use) {
	if err := p.creds.Touch(ctx, u.User, u.Name); err != nil {
		p.log.WarnContext(ctx, "credential use not recorded", "credential", u.Name, "err", err)
	}
}
