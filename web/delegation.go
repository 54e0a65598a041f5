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

	"github.com/urlflow/urlflow/oauth/identity"
	"github.com/urlflow/urlflow/services"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/credentials"
	"github.com/urlflow/urlflow/state/flow"
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

// apiError answers status with {"error": message}.
func apiError(c echo.Context, status int, message string) error {
	return c.JSON(status, map[string]string{"error": message})
}

// readBody reads the request body, whose time to arrive is bounded by the body deadline.
func readBody(c echo.Context) ([]byte, error) {
	body, err := io.ReadAll(c.Request().Body)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return nil, errBodyTooSlow
	}
	return body, err
}

// apiCreate is POST /api/v1/elicitations, for delegating services only: 200 with the
// credential when the user has it stored for this service, or 201 (created) or 200 (the
// user's running one, reused) with the elicitation whose URL the service hands its user.
func (s *Server) apiCreate(c echo.Context) error {
	who, _ := identity.CallerFrom(c.Request().Context())
	svc, ok := s.opts.Services.Lookup(who.Service)
	if !ok {
		return apiError(c, http.StatusForbidden,
			"only a delegating service creates elicitations through the API; users ask through urlflow's MCP tools")
	}
	if mt, _, _ := mime.ParseMediaType(c.Request().Header.Get(echo.HeaderContentType)); mt != echo.MIMEApplicationJSON {
		return apiError(c, http.StatusUnsupportedMediaType, "send the body as application/json")
	}
	body, err := readBody(c)
	if err != nil {
		return err
	}
	var req createRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return apiError(c, http.StatusBadRequest, "the body must be JSON like {\"slot\": \"...\"} or {\"provider\": \"...\"}: "+err.Error())
	}
	ask, problem := s.delegatedAsk(svc, req)
	if problem != nil {
		return problem(c)
	}
	user, problem := s.delegatedUser(c, svc, req.User)
	if problem != nil {
		return problem(c)
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

// refusal answers a request the API refuses.
type refusal func(echo.Context) error

func refuse(status int, format string, a ...any) refusal {
	return func(c echo.Context) error { return apiError(c, status, fmt.Sprintf(format, a...)) }
}

// delegatedAsk checks what svc asks for in req and returns the elicitation to open, but
// for its user and deadline.
func (s *Server) delegatedAsk(svc *services.Service, req createRequest) (flow.NewElicitation, refusal) {
	n := flow.NewElicitation{Service: svc.Name, Client: req.Client, Purpose: strings.TrimSpace(req.Message)}
	var label string
	switch {
	case (req.Slot == "") == (req.Provider == ""):
		return n, refuse(http.StatusBadRequest, "name one of slot and provider")
	case req.Slot != "":
		n.Kind, n.Target = state.KindSecret, req.Slot
		if len(req.Scopes) > 0 {
			return n, refuse(http.StatusBadRequest, "scopes are for providers; a secret slot has none")
		}
		if slot, ok := s.opts.Slots.Lookup(req.Slot); ok {
			label = slot.Label
		}
	default:
		n.Kind, n.Target, n.Scopes = state.KindOAuth, req.Provider, req.Scopes
		if p, ok := s.opts.Providers.Lookup(req.Provider); ok {
			label = p.Label + " account"
			if len(n.Scopes) == 0 {
				n.Scopes = p.DefaultScopes()
			}
		}
	}
	if label == "" || !svc.Allows(n.Kind, n.Target) {
		return n, refuse(http.StatusForbidden, "the service %s may not ask for the %s %q", svc.Name, kindNoun(n.Kind), n.Target)
	}
	switch {
	case utf8.RuneCountInString(n.Purpose) > maxMessage:
		return n, refuse(http.StatusBadRequest, "message: at most %d characters", maxMessage)
	case n.Purpose == "":
		n.Purpose = svc.Label + " asks for your " + label + "."
	}
	return n, nil
}

func kindNoun(k state.Kind) string {
	if k == state.KindOAuth {
		return "provider"
	}
	return "slot"
}

// delegatedUser returns the user a service acts for: the one its user token proves, or,
// for a service trusted to assert users, the one it names.
func (s *Server) delegatedUser(c echo.Context, svc *services.Service, named string) (state.User, refusal) {
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
	verifier, ok := s.opts.ServiceUsers[svc.Name]
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
