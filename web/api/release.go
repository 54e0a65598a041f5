package api

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/urlflow/urlflow/proxy"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/web/respond"
)

// releaseRequest is the body of POST /api/v1/release: whose credential the service wants.
type releaseRequest struct {
	Slot     string `json:"slot"`
	Provider string `json:"provider"`
	// Label is the account label among several credentials of the target ("" for the
	// default account).
	Label string `json:"label"`
	// User names the user instead of a user token, for services with assert_users.
	User string `json:"user"`
	// UserRef names the user by the service's reference alone, for a credential the user
	// let the service use while away (offline).
	UserRef string `json:"userRef"`
}

// ReleaseAnswer is the answer of POST /api/v1/release: a slot's secret, or a provider's
// access token, fresh enough to use (never its refresh token).
type ReleaseAnswer struct {
	Kind   state.Kind `json:"kind"`
	Target string     `json:"target"`
	// Label is the account label ("" for the default account).
	Label string `json:"label,omitempty"`
	// UserRef is the reference the service knows the user by (package userref).
	UserRef string `json:"userRef"`

	Secret string `json:"secret,omitempty"`
	// Parameters are what the user entered with the secret for its slot's base URL.
	Parameters  map[string]string `json:"parameters,omitempty"`
	AccessToken string            `json:"accessToken,omitempty"`
	TokenType   string            `json:"tokenType,omitempty"`
	ExpiresAt   time.Time         `json:"expiresAt,omitzero"`
	Scopes      []string          `json:"scopes,omitempty"`
}

// apiRelease is POST /api/v1/release, for delegating services whose configuration has
// release: the credential itself, which the service then holds and must protect. Every
// release is in the user's audit log before the answer leaves. Other services are
// refused (403): they use credentials through the proxy only.
func (s *API) apiRelease(c echo.Context) error {
	var req releaseRequest
	svc, t, err := s.targetedRequest(c, &req, &req.Slot, &req.Provider, &req.Label)
	if err != nil {
		return err
	}
	if !svc.Release {
		return respond.Refuse(http.StatusForbidden, "the service %s may not receive credentials (its configuration does not set release); use them through POST /api/v1/proxy", svc.Name)
	}
	user, byRef, err := s.serviceUser(c, svc, req.User, req.UserRef)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	name := t.credentialName(svc)
	ans := ReleaseAnswer{Kind: t.kind, Target: t.name, Label: t.accountLabel, UserRef: s.opts.UserRefs.Of(svc.Name, user)}
	cred, err := s.opts.Credentials.Get(ctx, user, name)
	switch {
	case errors.Is(err, state.ErrNotFound):
		return notStored(c, t)
	case err != nil:
		return err
	case byRef && !cred.Offline:
		return offlineAllowed(byRef, cred)
	case !cred.Releasable:
		// The pages told the user that the service would never be given it.
		return apiRefusal(c, http.StatusConflict, reasonNotReleasable, "the user provided this "+t.label+
			" on pages that said the service would never be given it: create an elicitation with replace, whose pages say it will")
	case cred.Locked():
		return s.proxyRefusal(c, t, &proxy.LockedError{Reason: cred.LockReason})
	}
	if t.slot != nil {
		secret, err := s.opts.Vault.Open(user, name, cred.Sealed)
		if errors.Is(err, proxy.ErrUnopenable) {
			return s.proxyRefusal(c, t, err)
		}
		if err != nil {
			return err
		}
		ans.Secret, ans.Parameters = secret.Reveal(), cred.Parameters
	} else {
		tok, err := s.opts.Keeper.Token(ctx, user, name, t.provider, "")
		if err != nil {
			return s.proxyRefusal(c, t, fmt.Errorf("%w: %w", proxy.ErrNoToken, err))
		}
		ans.AccessToken, ans.TokenType, ans.ExpiresAt, ans.Scopes = tok.AccessToken, tok.TokenType, tok.Expiry, tok.Scopes
	}
	if err := s.opts.Credentials.Released(ctx, user, cred, state.ActorService, "released to the service "+svc.Name); err != nil {
		return err // not released without its audit entry
	}
	s.log.InfoContext(ctx, "credential released", "service", svc.Name, "credential", name, "user", user.Key())
	s.opts.Counters.Add(ctx, "urlflow_credentials_released_total", "kind", string(t.kind))
	return c.JSON(http.StatusOK, ans)
}
