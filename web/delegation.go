package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/urlflow/urlflow/internal/display"
	"github.com/urlflow/urlflow/oauth/identity"
	"github.com/urlflow/urlflow/oauth/thirdparty"
	"github.com/urlflow/urlflow/proxy"
	"github.com/urlflow/urlflow/services"
	"github.com/urlflow/urlflow/slots"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/credentials"
	"github.com/urlflow/urlflow/state/flow"
	"github.com/urlflow/urlflow/upstream"
)

// The API of delegating services (package services): an MCP server that authenticates
// with its service key asks urlflow to collect a user's secret or grant for it.

// UserTokenHeader carries the access token the delegating service received from its user
// on the MCP request: evidence of who the user is, checked against the service's resource
// and never accepted as authentication to urlflow.
const UserTokenHeader = "Urlflow-User-Token"

// maxMessage bounds the reason a service gives, in characters: the pages show it whole.
const maxMessage = 500

// createRequest is the body of POST /api/v1/elicitations.
type createRequest struct {
	// Slot or Provider: what to collect, one of the two.
	Slot     string `json:"slot"`
	Provider string `json:"provider"`
	// Scopes are the access asked of a provider (its defaults when empty).
	Scopes []string `json:"scopes"`
	// Message is the reason the pages show the user.
	Message string `json:"message"`
	// Replace asks again although a usable credential is stored.
	Replace bool `json:"replace"`
	// Client is the MCP client of the service's user, as it named itself.
	Client state.ClientInfo `json:"client"`
	// User names the user instead of a user token, for services with assert_users.
	User string `json:"user"`
}

// createAnswer is the answer of POST /api/v1/elicitations: the credential when the user
// has it stored for this service already, else the elicitation to send the user to.
type createAnswer struct {
	Status      string                  `json:"status"`
	Elicitation *flow.View              `json:"elicitation,omitempty"`
	Credential  *credentials.Connection `json:"credential,omitempty"`
}

// Statuses of createAnswer.
const (
	statusStored         = "stored"
	statusActionRequired = "user_action_required"
)

// readBody reads the request body, whose time to arrive is bounded by the body deadline.
func readBody(c echo.Context) ([]byte, error) {
	body, err := io.ReadAll(c.Request().Body)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return nil, errBodyTooSlow
	}
	return body, err
}

// serviceRequest returns the service that sent c, with its JSON body decoded into req
// (unknown fields refused); it refuses a caller that is not a service and a body that is
// not such JSON.
func (s *Server) serviceRequest(c echo.Context, req any) (*services.Service, error) {
	who, _ := identity.CallerFrom(c.Request().Context())
	svc, ok := s.opts.Services.Lookup(who.Service)
	if !ok {
		return nil, refuse(http.StatusForbidden,
			"only a delegating service uses this part of the API; users go through urlflow's MCP tools")
	}
	if mt, _, _ := mime.ParseMediaType(c.Request().Header.Get(echo.HeaderContentType)); mt != echo.MIMEApplicationJSON {
		return nil, refuse(http.StatusUnsupportedMediaType, "send the body as application/json")
	}
	body, err := readBody(c)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(req); err != nil {
		return nil, refuse(http.StatusBadRequest, "the body must be JSON naming a slot or a provider: %v", err)
	}
	return svc, nil
}

// apiCreate is POST /api/v1/elicitations, for delegating services only: 200 with the
// credential when the user has it stored for this service, or 201 (created) or 200 (the
// user's running one, reused) with the elicitation whose URL the service hands its user.
func (s *Server) apiCreate(c echo.Context) error {
	var req createRequest
	svc, err := s.serviceRequest(c, &req)
	if err != nil {
		return err
	}
	ask, err := s.delegatedAsk(svc, req)
	if err != nil {
		return err
	}
	user, err := s.delegatedUser(c, svc, req.User)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	name := credentials.Name(svc.Name, ask.Target)
	stored, err := s.opts.Credentials.Get(ctx, user, name)
	switch {
	case errors.Is(err, state.ErrNotFound):
	case err != nil:
		return err
	case stored.Locked():
		ask.Replace, ask.Replaced = true, &flow.Replaced{LockReason: stored.LockReason}
	case stored.NeedsReconnect:
		ask.Replace = true
	case !req.Replace && stored.Covers(ask.Scopes):
		conn := stored.Connection()
		return c.JSON(http.StatusOK, createAnswer{Status: statusStored, Credential: &conn})
	default:
		ask.Replace = true
	}
	ask.User, ask.TTL = user, s.opts.TTL
	e, created, err := s.opts.Flows.Open(ctx, ask)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		c.Response().Header().Set(echo.HeaderLocation, "/api/v1/elicitations/"+e.ID)
	}
	v, err := s.view(ctx, e)
	if err != nil {
		return err
	}
	return c.JSON(status, createAnswer{Status: statusActionRequired, Elicitation: &v})
}

// refuse is the error that answers a request the API refuses with status and
// {"error": message} (handleError).
func refuse(status int, format string, a ...any) error {
	return echo.NewHTTPError(status, fmt.Sprintf(format, a...))
}

// delegatedAsk checks what svc asks for in req and returns the elicitation to open, but
// for its user and deadline.
func (s *Server) delegatedAsk(svc *services.Service, req createRequest) (flow.NewElicitation, error) {
	// What the service says is cleaned where it enters (package display), as a client's
	// own name is: it is shown to the user and kept in the history.
	n := flow.NewElicitation{Service: svc.Name, Client: state.NewClientInfo(req.Client.Name, req.Client.Title, req.Client.Version)}
	t, err := s.serviceTarget(svc, req.Slot, req.Provider)
	if err != nil {
		return n, err
	}
	n.Kind, n.Target = t.kind, t.name
	switch {
	case t.kind == state.KindSecret && len(req.Scopes) > 0:
		return n, refuse(http.StatusBadRequest, "scopes are for providers; a secret slot has none")
	case t.kind == state.KindOAuth:
		n.Scopes = req.Scopes
		if len(n.Scopes) == 0 {
			n.Scopes = t.provider.DefaultScopes()
		}
	}
	if utf8.RuneCountInString(req.Message) > maxMessage {
		return n, refuse(http.StatusBadRequest, "message: at most %d characters", maxMessage)
	}
	n.Purpose = display.Clean(req.Message, maxMessage)
	if n.Purpose == "" {
		n.Purpose = svc.Label + " asks for your " + t.label + "."
	}
	return n, nil
}

// serviceTarget is a slot or provider a service names.
type serviceTarget struct {
	kind     state.Kind
	name     string
	label    string
	slot     *slots.Slot          // for a slot
	provider *thirdparty.Provider // for a provider
}

// serviceTarget returns the slot or provider (one of the two names is set) that svc may
// use.
func (s *Server) serviceTarget(svc *services.Service, slot, provider string) (serviceTarget, error) {
	var t serviceTarget
	switch {
	case (slot == "") == (provider == ""):
		return t, refuse(http.StatusBadRequest, "name one of slot and provider")
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
		return t, refuse(http.StatusForbidden, "the service %s may not use the %s %q", svc.Name, kindNoun(t.kind), t.name)
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
func (s *Server) delegatedUser(c echo.Context, svc *services.Service, named string) (state.User, error) {
	token := strings.TrimSpace(c.Request().Header.Get(UserTokenHeader))
	switch {
	case token != "" && named != "":
		return state.User{}, refuse(http.StatusBadRequest, "send the user's token or name the user, not both")
	case token == "" && named == "":
		return state.User{}, refuse(http.StatusUnauthorized,
			"send the access token your user sent you in the %s header: it shows which user this is for", UserTokenHeader)
	case token == "" && !svc.AssertUsers:
		return state.User{}, refuse(http.StatusForbidden,
			"the service %s may not name users: send the user's access token in the %s header", svc.Name, UserTokenHeader)
	case token == "":
		user := state.User{Issuer: s.userIssuer(), Subject: named}
		if s.opts.Dev != nil && !identity.ValidDevName(named) {
			return state.User{}, refuse(http.StatusBadRequest, "user: not a development user name")
		}
		return user, nil
	}
	verifier, ok := s.serviceUsers[svc.Name]
	if !ok {
		return state.User{}, refuse(http.StatusServiceUnavailable, "urlflow cannot check this service's user tokens")
	}
	claims, err := verifier.Verify(c.Request().Context(), token)
	switch {
	case errors.Is(err, identity.ErrInvalidToken):
		reason := strings.TrimPrefix(err.Error(), identity.ErrInvalidToken.Error()+": ")
		return state.User{}, refuse(http.StatusUnauthorized, "the user token is not valid: %s", reason)
	case err != nil:
		s.log.ErrorContext(c.Request().Context(), "user token of a service not checked", "service", svc.Name, "err", err)
		return state.User{}, refuse(http.StatusServiceUnavailable, "urlflow cannot check tokens right now; please try again in a moment")
	}
	return claims.User, nil
}

// userIssuer is the issuer of the users of this deployment.
func (s *Server) userIssuer() string {
	if s.opts.Dev != nil {
		return identity.DevIssuer
	}
	return s.opts.Issuer
}

// serviceLabel is the label the pages show for the service that asked for e; empty for
// urlflow's own tools.
func (s *Server) serviceLabel(e *flow.Elicitation) string {
	if e.Service == "" {
		return ""
	}
	if svc, ok := s.opts.Services.Lookup(e.Service); ok {
		return svc.Label
	}
	return e.Service
}

// proxyRequest is the body of POST /api/v1/proxy: the request to make, as call_api takes
// it, and whose credential to use.
type proxyRequest struct {
	Slot     string            `json:"slot"`
	Provider string            `json:"provider"`
	Method   string            `json:"method"`
	Path     string            `json:"path"`
	Query    map[string]string `json:"query"`
	Body     string            `json:"body"`
	// User names the user instead of a user token, for services with assert_users.
	User string `json:"user"`
}

// Reasons of a proxy request refused for what is stored: the service asks the user first
// (POST /api/v1/elicitations, which replaces a locked or unusable credential).
const (
	reasonNotStored  = "not_stored" // nothing stored for this service
	reasonLocked     = "locked"     // a secret locked until its user enters it again
	reasonReconnect  = "reconnect"  // a connection the provider no longer honours
	reasonUnopenable = "unopenable" // a secret sealed under a retired key
	reasonCarried    = "carried"    // the request carried the credential; nothing was sent
)

// apiRefusal answers status with {"error": message, "reason": reason}.
func apiRefusal(c echo.Context, status int, reason, message string) error {
	return c.JSON(status, map[string]string{"error": message, "reason": reason})
}

// apiProxy is POST /api/v1/proxy, for delegating services only: the request is made to
// the slot's or provider's API with the user's credential that the service holds
// injected, under call_api's rules (package proxy), and the answer is call_api's
// structured result: status, the configured headers, the body, redacted.
func (s *Server) apiProxy(c echo.Context) error {
	var req proxyRequest
	svc, err := s.serviceRequest(c, &req)
	if err != nil {
		return err
	}
	t, err := s.serviceTarget(svc, req.Slot, req.Provider)
	if err != nil {
		return err
	}
	api := (*upstream.API)(nil)
	if t.slot != nil {
		api = t.slot.API
	} else {
		api = t.provider.API
	}
	if api == nil {
		return refuse(http.StatusBadRequest, "urlflow has no API configured for the %s %s", kindNoun(t.kind), t.name)
	}
	call := upstream.Request{Method: req.Method, Path: req.Path, Query: req.Query, Body: req.Body}
	if err := proxy.Check(api, call); err != nil {
		return refuse(http.StatusBadRequest, "%v", err)
	}
	user, err := s.delegatedUser(c, svc, req.User)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	use := proxy.Use{User: user, Name: credentials.Name(svc.Name, t.name), Actor: state.ActorService,
		Via: "a proxy request of the service " + svc.Name}
	var resp *upstream.Response
	if t.slot != nil {
		cred, err := s.opts.Credentials.Get(ctx, user, use.Name)
		if errors.Is(err, state.ErrNotFound) {
			return apiRefusal(c, http.StatusConflict, reasonNotStored, "the user has no "+t.label+" stored for this service: create an elicitation")
		}
		if err != nil {
			return err
		}
		resp, _, err = s.proxy.Secret(ctx, use, t.slot, cred, call)
		if err != nil {
			return s.proxyRefusal(c, t, err)
		}
	} else if resp, err = s.proxy.Provider(ctx, use, t.provider, call); err != nil {
		return s.proxyRefusal(c, t, err)
	}
	return c.JSON(http.StatusOK, resp)
}

// proxyRefusal answers a proxy request that failed with err.
func (s *Server) proxyRefusal(c echo.Context, t serviceTarget, err error) error {
	var (
		locked  *proxy.LockedError
		carried *proxy.CarriedError
	)
	switch {
	case errors.As(err, &locked):
		return apiRefusal(c, http.StatusConflict, reasonLocked, fmt.Sprintf("the user's %s is locked (%s): create an elicitation to have it entered again", t.label, locked.Reason))
	case errors.Is(err, proxy.ErrUnopenable):
		return apiRefusal(c, http.StatusConflict, reasonUnopenable, "the stored "+t.label+" no longer opens (its key was retired): create an elicitation with replace")
	case errors.As(err, &carried) && carried.Locked:
		return apiRefusal(c, http.StatusUnprocessableEntity, reasonCarried, "the request's "+carried.Where+" carries the credential, or a form of it, so urlflow sent nothing and locked the "+t.label+" until the user enters it again; never send it: urlflow adds it")
	case errors.As(err, &carried):
		return apiRefusal(c, http.StatusUnprocessableEntity, reasonCarried, "the request's "+carried.Where+" carries the credential, or a form of it, so urlflow sent nothing; never send it: urlflow adds it")
	case errors.Is(err, thirdparty.ErrNotConnected):
		return apiRefusal(c, http.StatusConflict, reasonNotStored, "the user has no "+t.label+" connected for this service: create an elicitation")
	case errors.Is(err, thirdparty.ErrReconnect):
		return apiRefusal(c, http.StatusConflict, reasonReconnect, "the provider no longer honours the user's connection: create an elicitation to connect again")
	case errors.Is(err, proxy.ErrNoToken):
		s.log.ErrorContext(c.Request().Context(), "connection tokens unusable", "credential", t.name, "err", err)
		return refuse(http.StatusServiceUnavailable, "urlflow could not get a working token right now; nothing was changed, try again in a moment")
	}
	return refuse(http.StatusBadGateway, "the call failed: %v", err)
}
