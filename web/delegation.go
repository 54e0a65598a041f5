package web

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/urlflow/urlflow/ask"
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
	// Call is what the service binds the answer's requestState to (its tool and a digest
	// of the arguments, say): a requestState sent back must come with the same call.
	Call string `json:"call"`
	// RequestState, sent back from an earlier answer, continues that elicitation (the
	// retry of a 2026-07-28 client); Action is the client's answer to its input request.
	RequestState string `json:"requestState"`
	Action       string `json:"action"`
}

// createAnswer is the answer of POST /api/v1/elicitations: the credential when the user
// has it stored for this service already, else the elicitation to send the user to, or,
// continuing a requestState, the elicitation that ended without success.
type createAnswer struct {
	Status      string                  `json:"status"`
	Elicitation *flow.View              `json:"elicitation,omitempty"`
	Credential  *credentials.Connection `json:"credential,omitempty"`
	// RequestState goes, as it is, into the service's input_required result for a
	// 2026-07-28 client (with user_action_required).
	RequestState string `json:"requestState,omitempty"`
}

// Statuses of createAnswer.
const (
	statusStored         = "stored"
	statusActionRequired = "user_action_required"
	statusEnded          = "ended" // the elicitation has ended; its state says how
)

// readBody reads the request body, whose time to arrive is bounded by the body deadline.
func readBody(c echo.Context) ([]byte, error) {
	body, err := io.ReadAll(c.Request().Body)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return nil, errBodyTooSlow
	}
	return body, err
}

// targetedRequest is serviceRequest for a body that names a slot or a provider (into slot
// and provider, fields of req): it returns the one the service names, if it may use it.
func (s *Server) targetedRequest(c echo.Context, req any, slot, provider *string) (*services.Service, serviceTarget, error) {
	svc, err := s.serviceRequest(c, req)
	if err != nil {
		return nil, serviceTarget{}, err
	}
	t, err := s.serviceTarget(svc, *slot, *provider)
	return svc, t, err
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
func (s *Server) serviceRequest(c echo.Context, req any) (*services.Service, error) {
	who, _ := identity.CallerFrom(c.Request().Context())
	svc, ok := s.opts.Services.Lookup(who.Service)
	if !ok {
		return nil, refuse(http.StatusForbidden,
			"only a delegating service uses this part of the API; users go through urlflow's MCP tools")
	}
	if !isJSON(c) {
		return nil, refuse(http.StatusUnsupportedMediaType, "send the body as application/json")
	}
	body, err := readBody(c)
	if err != nil {
		return nil, err
	}
	if err := decodeJSONBody(body, req, true); err != nil {
		return nil, refuse(http.StatusBadRequest, "the body must be JSON as docs/openapi.yaml describes: %v", err)
	}
	return svc, nil
}

// apiCreate is POST /api/v1/elicitations, for delegating services only: 200 with the
// credential when the user has it stored for this service, or 201 (created) or 200 (the
// user's running one, reused) with the elicitation whose URL the service hands its user.
// A request with an Idempotency-Key header answered before gets that answer again; one
// with a requestState continues its elicitation (resume).
func (s *Server) apiCreate(c echo.Context) error {
	var req createRequest
	svc, err := s.serviceRequest(c, &req)
	if err != nil {
		return err
	}
	n, err := s.delegatedNeed(svc, req)
	if err != nil {
		return err
	}
	switch {
	case len(req.Call) > ask.MaxCall:
		return refuse(http.StatusBadRequest, "call: at most %d bytes", ask.MaxCall)
	case req.Action != "" && req.RequestState == "":
		return refuse(http.StatusBadRequest, "action is the client's answer to the input request of a requestState: send it with that requestState")
	}
	if _, _, ok := flow.ClientAnswer(req.Action); req.Action != "" && !ok {
		return refuse(http.StatusBadRequest, "action: want accept, decline or cancel")
	}
	if n.User, err = s.delegatedUser(c, svc, req.User); err != nil {
		return err
	}
	key, err := idempotencyKey(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	var o ask.Outcome
	switch {
	case req.RequestState != "":
		o, err = s.resume(ctx, svc, n, req)
	case key != "":
		o, err = s.opts.Asker.EnsureOnce(ctx, n, key, createDigest(n.User, req))
	default:
		o, err = s.opts.Asker.Ensure(ctx, n)
	}
	if err != nil {
		return createRefusal(err)
	}
	return s.createAnswered(c, svc, n, req.Call, o)
}

// idempotencyKey returns the request's Idempotency-Key, if any: 1 to 255 visible ASCII
// characters, quoted (a structured-field string) or not.
func idempotencyKey(c echo.Context) (string, error) {
	values := c.Request().Header.Values(idempotencyHeader)
	if len(values) == 0 {
		return "", nil
	}
	key := values[0]
	if len(key) >= 2 && key[0] == '"' && key[len(key)-1] == '"' {
		key = key[1 : len(key)-1]
	}
	valid := len(values) == 1 && len(key) >= 1 && len(key) <= 255
	for i := 0; valid && i < len(key); i++ {
		valid = key[i] > ' ' && key[i] < 0x7f && key[i] != '"'
	}
	if !valid {
		return "", refuse(http.StatusBadRequest, "%s: want one value of 1 to 255 visible ASCII characters", idempotencyHeader)
	}
	return key, nil
}

// idempotencyHeader names the key that makes a retried create return the first answer.
const idempotencyHeader = "Idempotency-Key"

// createRefusal is the answer to a create that err ended: the idempotency key's and the
// requestState's refusals, or err itself.
func createRefusal(err error) error {
	switch {
	case errors.Is(err, ask.ErrKeyReused):
		return refuse(http.StatusUnprocessableEntity, "this %s was sent with another request; use a new key for a new request", idempotencyHeader)
	case errors.Is(err, ask.ErrKeyBusy):
		return refuse(http.StatusConflict, "the first request with this %s is still being answered; send it again in a moment", idempotencyHeader)
	case errors.Is(err, ask.ErrKeyGone):
		return refuse(http.StatusConflict, "the elicitation of the first request with this %s is gone; use a new key", idempotencyHeader)
	case errors.Is(err, ask.ErrBadState):
		why := strings.TrimPrefix(err.Error(), ask.ErrBadState.Error()+": ")
		return refuse(http.StatusBadRequest, "requestState: %s; nothing was changed: create again without it to start over", why)
	}
	return err
}

// createDigest identifies a create request of user: the same key for another request or
// user is refused.
func createDigest(user state.User, req createRequest) string {
	doc, _ := json.Marshal(req) // a struct of strings, bools and slices always encodes
	sum := sha256.Sum256(append([]byte(user.Key()+"\n"), doc...))
	return hex.EncodeToString(sum[:])
}

// createAnswered writes the answer of a create of n by svc for call: the credential when
// it is stored; the elicitation, with its requestState while it runs; 201 and the new
// elicitation's location when the create (or the first answer of a key sent again)
// created it.
func (s *Server) createAnswered(c echo.Context, svc *services.Service, n ask.Need, call string, o ask.Outcome) error {
	if o.Status == ask.Stored {
		conn := o.Credential.Connection()
		return c.JSON(http.StatusOK, createAnswer{Status: statusStored, Credential: &conn})
	}
	v, err := s.view(c.Request().Context(), o.Elicitation)
	if err != nil {
		return err
	}
	ans := createAnswer{Status: statusEnded, Elicitation: &v}
	if o.Status == ask.Asking {
		ans.Status = statusActionRequired
		ans.RequestState = s.opts.Asker.Issue(o.Elicitation, ask.ServiceBinding(svc.Name, n.Kind, n.Target, call))
	}
	if !o.Created {
		return c.JSON(http.StatusOK, ans)
	}
	c.Response().Header().Set(echo.HeaderLocation, "/api/v1/elicitations/"+o.Elicitation.ID)
	return c.JSON(http.StatusCreated, ans)
}

// resume continues the elicitation of req's requestState, recording the client's answer
// when req carries one: still running, the same elicitation (with a fresh requestState);
// ended without success, the elicitation; complete, or gone, the answer of a new create
// (the credential, or a new elicitation when it was removed since).
func (s *Server) resume(ctx context.Context, svc *services.Service, n ask.Need, req createRequest) (ask.Outcome, error) {
	id, err := s.opts.Asker.Redeem(req.RequestState, n.User, ask.ServiceBinding(svc.Name, n.Kind, n.Target, req.Call))
	if err != nil {
		return ask.Outcome{}, err
	}
	e, err := s.opts.Asker.Current(ctx, n.User, id, req.Action, "the service "+svc.Name)
	if errors.Is(err, state.ErrNotFound) {
		n.Replace = false // what the flow stored is the replacement
		return s.opts.Asker.Ensure(ctx, n)
	}
	if err != nil {
		return ask.Outcome{}, err
	}
	return s.opts.Asker.Settle(ctx, n, e, true)
}

// refuse is the error that answers a request the API refuses with status and
// {"error": message} (handleError).
func refuse(status int, format string, a ...any) error {
	return echo.NewHTTPError(status, fmt.Sprintf(format, a...))
}

// delegatedNeed checks what svc asks for in req and returns it, but for its user.
func (s *Server) delegatedNeed(svc *services.Service, req createRequest) (ask.Need, error) {
	// What the service says is cleaned where it enters (package display), as a client's
	// own name is: it is shown to the user and kept in the history.
	n := ask.Need{Replace: req.Replace, Caller: ask.Caller{Service: svc.Name, Releasable: svc.Release,
		Client: state.NewClientInfo(req.Client.Name, req.Client.Title, req.Client.Version)}}
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
	purpose := display.Clean(req.Message, maxMessage)
	if purpose == "" {
		purpose = svc.Label + " asks for your " + t.label + "."
	}
	n.Purpose = func(*flow.Replaced) string { return purpose }
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
		return state.User{}, refuse(http.StatusUnauthorized, "the user token is not valid: %s", reason)
	case err != nil:
		s.log.ErrorContext(c.Request().Context(), "user token of a service not checked", "service", svc.Name, "err", err)
		return state.User{}, refuse(http.StatusServiceUnavailable, "urlflow cannot check tokens right now; please try again in a moment")
	case claims.ClientOnly():
		return state.User{}, refuse(http.StatusUnauthorized, "the user token is not valid: a client's own token (client credentials) names no user")
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

// requester is what the pages show of the service that asked for e: its label (empty for
// urlflow's own tools) and whether it may receive what the user provides (release, as it
// stood when the service asked: the credential keeps that promise).
func (s *Server) requester(e *flow.Elicitation) (label string, receives bool) {
	if e.Service == "" {
		return "", false
	}
	if svc, ok := s.opts.Services.Lookup(e.Service); ok {
		return svc.Label, e.Releasable
	}
	return e.Service, e.Releasable
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
	// not_releasable: a release of a credential provided before the service had release
	reasonNotReleasable = "not_releasable"
)

// notStored refuses a request for a secret the user has not stored for the service.
func notStored(c echo.Context, t serviceTarget) error {
	return apiRefusal(c, http.StatusConflict, reasonNotStored, "the user has no "+t.label+" stored for this service: create an elicitation")
}

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
	svc, t, err := s.targetedRequest(c, &req, &req.Slot, &req.Provider)
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
	if req.Path == "" {
		return refuse(http.StatusBadRequest, `path is required: the API path to call ("/" for the API's base URL)`)
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
			return notStored(c, t)
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

// answerRequest is the body of POST /api/v1/elicitations/{id}/answer.
type answerRequest struct {
	// Action is the client's answer to the service's elicitation/create.
	Action string `json:"action"`
}

// apiAnswer is POST /api/v1/elicitations/{id}/answer, for delegating services only: the
// answer of the service's client to the elicitation/create that showed the elicitation's
// URL, recorded as the state table says (an accept is consent, never success). 200 with
// the elicitation after it; 409 when the flow had already ended.
func (s *Server) apiAnswer(c echo.Context) error {
	_, e, err := s.callerElicitation(c)
	if e == nil {
		return err
	}
	var req answerRequest
	svc, err := s.serviceRequest(c, &req)
	if err != nil {
		return err
	}
	ev, reason, ok := flow.ClientAnswer(req.Action)
	if !ok {
		return refuse(http.StatusBadRequest, "action: want accept, decline or cancel")
	}
	change, err := s.opts.Flows.Apply(c.Request().Context(), e.ID, ev, state.ActorClient, reason+", as the service "+svc.Name+" reports")
	if err != nil {
		return err
	}
	if !change.Changed() && change.Elicitation.State.Terminal() {
		return s.conflict(c, change.Elicitation, "this request has already ended")
	}
	return s.answer(c, http.StatusOK, change.Elicitation)
}

// releaseRequest is the body of POST /api/v1/release: whose credential the service wants.
type releaseRequest struct {
	Slot     string `json:"slot"`
	Provider string `json:"provider"`
	// User names the user instead of a user token, for services with assert_users.
	User string `json:"user"`
}

// releaseAnswer is the answer of POST /api/v1/release: a slot's secret, or a provider's
// access token, fresh enough to use (never its refresh token).
type releaseAnswer struct {
	Kind        state.Kind `json:"kind"`
	Target      string     `json:"target"`
	Secret      string     `json:"secret,omitempty"`
	AccessToken string     `json:"accessToken,omitempty"`
	TokenType   string     `json:"tokenType,omitempty"`
	ExpiresAt   time.Time  `json:"expiresAt,omitzero"`
	Scopes      []string   `json:"scopes,omitempty"`
}

// apiRelease is POST /api/v1/release, for delegating services whose configuration has
// release: the credential itself, which the service then holds and must protect. Every
// release is in the user's audit log before the answer leaves. Other services are
// refused (403): they use credentials through the proxy only.
func (s *Server) apiRelease(c echo.Context) error {
	var req releaseRequest
	svc, t, err := s.targetedRequest(c, &req, &req.Slot, &req.Provider)
	if err != nil {
		return err
	}
	if !svc.Release {
		return refuse(http.StatusForbidden, "the service %s may not receive credentials (its configuration does not set release); use them through POST /api/v1/proxy", svc.Name)
	}
	user, err := s.delegatedUser(c, svc, req.User)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	name := credentials.Name(svc.Name, t.name)
	ans := releaseAnswer{Kind: t.kind, Target: t.name}
	cred, err := s.opts.Credentials.Get(ctx, user, name)
	switch {
	case errors.Is(err, state.ErrNotFound):
		return notStored(c, t)
	case err != nil:
		return err
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
		ans.Secret = secret.Reveal()
	} else {
		tok, err := s.opts.Keeper.Token(ctx, user, name, t.provider, "")
		if err != nil {
			return s.proxyRefusal(c, t, fmt.Errorf("%w: %w", proxy.ErrNoToken, err))
		}
		ans.AccessToken, ans.TokenType, ans.ExpiresAt, ans.Scopes = tok.AccessToken, tok.TokenType, tok.Expiry, tok.Scopes
	}
	if err := s.opts.Credentials.Released(ctx, user, name, state.ActorService, "released to the service "+svc.Name); err != nil {
		return err // not released without its audit entry
	}
	s.log.InfoContext(ctx, "credential released", "service", svc.Name, "credential", name, "user", user.Key())
	s.opts.Counters.Add(ctx, "urlflow_credentials_released_total", "kind", string(t.kind))
	return c.JSON(http.StatusOK, ans)
}
