package api

import (
	"errors"
	"io"
	"mime"
	"net/http"
	"os"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/urlflow/urlflow/oauth/identity"
	"github.com/urlflow/urlflow/oauth/providers"
	"github.com/urlflow/urlflow/services"
	"github.com/urlflow/urlflow/slots"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/credentials"
	"github.com/urlflow/urlflow/userref"
	"github.com/urlflow/urlflow/web/respond"
)

// UserTokenHeader carries the access token the delegating service received from its user
// on the MCP request: evidence of who the user is, checked against the service's resource
// and never accepted as authentication to urlflow.
const UserTokenHeader = "Urlflow-User-Token"

// readBody reads the request body, whose time to arrive is bounded by the body deadline.
func readBody(c echo.Context) ([]byte, error) {
	body, err := io.ReadAll(c.Request().Body)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return nil, respond.ErrBodyTooSlow
	}
	return body, err
}

// targetedRequest is serviceRequest for a body that names a slot or a provider (into slot
// and provider, fields of req): it returns the one the service names, if it may use it.
func (s *API) targetedRequest(c echo.Context, req any, slot, provider, accountLabel *string) (*services.Service, serviceTarget, error) {
	svc, err := s.serviceRequest(c, req)
	if err != nil {
		return nil, serviceTarget{}, err
	}
	t, err := s.serviceTarget(svc, *slot, *provider)
	if err != nil {
		return svc, t, err
	}
	if err := credentials.CheckLabel(*accountLabel); err != nil {
		return svc, t, respond.Refuse(http.StatusBadRequest, "%v", err)
	}
	t.accountLabel = *accountLabel
	return svc, t, nil
}

// isJSON reports whether the request's body is declared as JSON. A form's body would be
// read by the form parser (limitBody) before the handler sees it.
func isJSON(c echo.Context) bool {
	mt, _, _ := mime.ParseMediaType(c.Request().Header.Get(echo.HeaderContentType))
	return mt == echo.MIMEApplicationJSON
}

// serviceRequest returns the service that sent c, with its JSON body decoded into req
// (decodeJSONBody: one JSON value, unknown fields refused); it refuses a caller that is
// not a service and a body that is not such JSON.
func (s *API) serviceRequest(c echo.Context, req any) (*services.Service, error) {
	who, _ := identity.CallerFrom(c.Request().Context())
	svc, ok := s.opts.Services.Lookup(who.Service)
	if !ok {
		return nil, respond.Refuse(http.StatusForbidden,
			"only a delegating service uses this part of the API; users go through urlflow's MCP tools")
	}
	if !isJSON(c) {
		return nil, respond.Refuse(http.StatusUnsupportedMediaType, "send the body as application/json")
	}
	body, err := readBody(c)
	if err != nil {
		return nil, err
	}
	if err := decodeJSONBody(body, req, true); err != nil {
		return nil, respond.Refuse(http.StatusBadRequest, "the body must be JSON as docs/openapi.yaml describes: %v", err)
	}
	return svc, nil
}

// serviceTarget is a slot or provider a service names.
type serviceTarget struct {
	kind  state.Kind
	name  string
	label string
	// accountLabel tells apart several credentials of the target (credentials.Labeled).
	accountLabel string
	slot         *slots.Slot         // for a slot
	provider     *providers.Provider // for a provider
}

// serviceTarget returns the slot or provider (one of the two names is set) that svc may
// use.
func (s *API) serviceTarget(svc *services.Service, slot, provider string) (serviceTarget, error) {
	var t serviceTarget
	switch {
	case (slot == "") == (provider == ""):
		return t, respond.Refuse(http.StatusBadRequest, "name one of slot and provider")
	case slot != "":
		t.kind, t.name = state.KindSecret, slot
		if sl, ok := s.opts.Slots.Lookup(slot); ok {
			t.slot, t.label = sl, sl.Label
		}
	default:
		t.kind, t.name = state.KindOAuth, provider
		if p, ok := s.opts.Providers.Lookup(provider); ok {
			t.provider, t.label = p, p.Label+" account"
		}
	}
	if t.label == "" || !svc.Allows(t.kind, t.name) {
		return t, respond.Refuse(http.StatusForbidden, "the service %s may not use the %s %q", svc.Name, kindNoun(t.kind), t.name)
	}
	return t, nil
}

func kindNoun(k state.Kind) string {
	if k == state.KindOAuth {
		return "provider"
	}
	return "slot"
}

// delegatedUser returns the user a service acts for: the one its user token proves, or,
// for a service trusted to assert users, the one it names.
func (s *API) delegatedUser(c echo.Context, svc *services.Service, named string) (state.User, error) {
	token := strings.TrimSpace(c.Request().Header.Get(UserTokenHeader))
	switch {
	case token != "" && named != "":
		return state.User{}, respond.Refuse(http.StatusBadRequest, "send the user's token or name the user, not both")
	case token == "" && named == "":
		return state.User{}, respond.Refuse(http.StatusUnauthorized,
			"send the access token your user sent you in the %s header: it shows which user this is for", UserTokenHeader)
	case token == "" && !svc.AssertUsers:
		return state.User{}, respond.Refuse(http.StatusForbidden,
			"the service %s may not name users: send the user's access token in the %s header", svc.Name, UserTokenHeader)
	case token == "":
		user := state.User{Issuer: s.userIssuer(), Subject: named}
		if s.opts.Dev != nil && !identity.ValidDevName(named) {
			return state.User{}, respond.Refuse(http.StatusBadRequest, "user: not a development user name")
		}
		return user, nil
	}
	verifier, ok := s.serviceUsers[svc.Name]
	if !ok {
		return state.User{}, respond.Refuse(http.StatusServiceUnavailable, "urlflow cannot check this service's user tokens")
	}
	claims, err := verifier.Verify(c.Request().Context(), token)
	if errors.Is(err, identity.ErrInvalidToken) && svc.ClientID != "" {
		// Or a token for urlflow that the issuer exchanged for this service (RFC 8693):
		// its act names the service's client.
		if exchanged, xerr := s.verifier.Verify(c.Request().Context(), token); xerr == nil && exchanged.Actor == svc.ClientID && !exchanged.ClientOnly() {
			claims, err = exchanged, nil
		}
	}
	switch {
	case errors.Is(err, identity.ErrInvalidToken):
		reason := strings.TrimPrefix(err.Error(), identity.ErrInvalidToken.Error()+": ")
		return state.User{}, respond.Refuse(http.StatusUnauthorized, "the user token is not valid: %s", reason)
	case err != nil:
		s.log.ErrorContext(c.Request().Context(), "user token of a service not checked", "service", svc.Name, "err", err)
		return state.User{}, respond.Refuse(http.StatusServiceUnavailable, "urlflow cannot check tokens right now; please try again in a moment")
	case claims.ClientOnly():
		return state.User{}, respond.Refuse(http.StatusUnauthorized, "the user token is not valid: a client's own token (client credentials) names no user")
	}
	return claims.User, nil
}

// userIssuer is the issuer of the users of this deployment.
func (s *API) userIssuer() string {
	if s.opts.Dev != nil {
		return identity.DevIssuer
	}
	return s.opts.Issuer
}

// apiRefusal answers status with {"error": message, "reason": reason}.
func apiRefusal(c echo.Context, status int, reason, message string) error {
	return c.JSON(status, map[string]string{"error": message, "reason": reason})
}

// credentialName is the name of the credential of t that svc holds.
func (t serviceTarget) credentialName(svc *services.Service) string {
	return credentials.Labeled(credentials.Name(svc.Name, t.name), t.accountLabel)
}

// reasonNotOffline: a request that names the user by reference alone, for a credential the
// user did not let the service use while away.
const reasonNotOffline = "not_offline"

// serviceUser is the user a request of svc is for: proven by the user's token, or named
// (delegatedUser), or, when ref is set, known by the service's reference alone, which only
// a credential the user let the service use while away allows (byRef: the caller checks
// that with offlineAllowed once it has read the credential).
func (s *API) serviceUser(c echo.Context, svc *services.Service, named, ref string) (user state.User, byRef bool, err error) {
	if ref == "" {
		user, err = s.delegatedUser(c, svc, named)
		return user, false, err
	}
	switch {
	case named != "" || c.Request().Header.Get(UserTokenHeader) != "":
		return user, true, respond.Refuse(http.StatusBadRequest, "name the user one way: the user's token, user or userRef")
	case !userref.Valid(ref):
		return user, true, respond.Refuse(http.StatusBadRequest, "userRef: not a user reference (usr_ and 32 letters and digits)")
	}
	user, err = s.opts.ServiceCredentials.UserOf(c.Request().Context(), svc.Name, ref)
	if errors.Is(err, state.ErrNotFound) {
		return user, true, respond.JSON(http.StatusForbidden, map[string]string{"reason": reasonNotOffline,
			"error": "no user of this service is known by this reference with a credential to use while away"})
	}
	return user, true, err
}

// offlineAllowed refuses a request by reference alone (byRef) for cred, unless its user let
// the service use it while away.
func offlineAllowed(byRef bool, cred *credentials.Credential) error {
	if byRef && !cred.Offline {
		return respond.JSON(http.StatusForbidden, map[string]string{"reason": reasonNotOffline,
			"error": "the user did not let this service use this credential while away: create an elicitation with offline, with the user's token"})
	}
	return nil
}
