package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/urlflow/urlflow/ask"
	"github.com/urlflow/urlflow/internal/display"
	"github.com/urlflow/urlflow/services"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/credentials"
	"github.com/urlflow/urlflow/state/flow"
	"github.com/urlflow/urlflow/web/respond"
)

// The API of delegating services (package services): an MCP server that authenticates
// with its service key asks urlflow to collect a user's secret or grant for it.

// MaxMessage bounds the reason a service gives, in characters: the pages show it whole.
const MaxMessage = 500

// CreateRequest is the body of POST /api/v1/elicitations.
type CreateRequest struct {
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
	// Offline asks the user, on the consent page, to let the service use the credential
	// while the user is away: the service may then name the user by userRef alone.
	Offline bool `json:"offline"`
	// Label is the account label of the credential to collect, among several of its target
	// ("" for the default account); replace with a label reconnects that account in place.
	Label string `json:"label"`
	// Metadata is the service's own (state.Metadata): kept with the flow and the credential
	// it stores, and in their answers, events and webhooks.
	Metadata state.Metadata `json:"metadata"`
	// RequestState, sent back from an earlier answer, continues that elicitation (the
	// retry of a 2026-07-28 client); Action is the client's answer to its input request.
	RequestState string `json:"requestState"`
	Action       string `json:"action"`
}

// CreateAnswer is the answer of POST /api/v1/elicitations: the credential when the user
// has it stored for this service already, else the elicitation to send the user to, or,
// continuing a requestState, the elicitation that ended without success.
type CreateAnswer struct {
	Status string `json:"status"`
	// UserRef is the reference the service knows the user by (package userref).
	UserRef     string                  `json:"userRef,omitempty"`
	Elicitation *flow.View              `json:"elicitation,omitempty"`
	Credential  *credentials.Connection `json:"credential,omitempty"`
	// RequestState goes, as it is, into the service's input_required result for a
	// 2026-07-28 client (with user_action_required).
	RequestState string `json:"requestState,omitempty"`
}

// Statuses of CreateAnswer.
const (
	StatusStored         = "stored"
	StatusActionRequired = "user_action_required"
	StatusEnded          = "ended" // the elicitation has ended; its state says how
)

// apiCreate is POST /api/v1/elicitations, for delegating services only: 200 with the
// credential when the user has it stored for this service, or 201 (created) or 200 (the
// user's running one, reused) with the elicitation whose URL the service hands its user.
// A request with an Idempotency-Key header answered before gets that answer again; one
// with a requestState continues its elicitation (resume).
func (s *API) apiCreate(c echo.Context) error {
	var req CreateRequest
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
		return respond.Refuse(http.StatusBadRequest, "call: at most %d bytes", ask.MaxCall)
	case req.Action != "" && req.RequestState == "":
		return respond.Refuse(http.StatusBadRequest, "action is the client's answer to the input request of a requestState: send it with that requestState")
	}
	if _, _, ok := flow.ClientAnswer(req.Action); req.Action != "" && !ok {
		return respond.Refuse(http.StatusBadRequest, "action: want accept, decline or cancel")
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
		o, err = s.opts.Asker.EnsureOnce(ctx, n, key, CreateDigest(n.User, req))
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
	values := c.Request().Header.Values(IdempotencyHeader)
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
		return "", respond.Refuse(http.StatusBadRequest, "%s: want one value of 1 to 255 visible ASCII characters", IdempotencyHeader)
	}
	return key, nil
}

// IdempotencyHeader names the key that makes a retried create return the first answer.
const IdempotencyHeader = "Idempotency-Key"

// createRefusal is the answer to a create that err ended: the idempotency key's and the
// requestState's refusals, or err itself.
func createRefusal(err error) error {
	switch {
	case errors.Is(err, ask.ErrKeyReused):
		return respond.Refuse(http.StatusUnprocessableEntity, "this %s was sent with another request; use a new key for a new request", IdempotencyHeader)
	case errors.Is(err, ask.ErrKeyBusy):
		return respond.Refuse(http.StatusConflict, "the first request with this %s is still being answered; send it again in a moment", IdempotencyHeader)
	case errors.Is(err, ask.ErrKeyGone):
		return respond.Refuse(http.StatusConflict, "the elicitation of the first request with this %s is gone; use a new key", IdempotencyHeader)
	case errors.Is(err, ask.ErrBadState):
		why := strings.TrimPrefix(err.Error(), ask.ErrBadState.Error()+": ")
		return respond.Refuse(http.StatusBadRequest, "requestState: %s; nothing was changed: create again without it to start over", why)
	}
	return err
}

// CreateDigest identifies a create request of user: the same key for another request or
// user is refused.
func CreateDigest(user state.User, req CreateRequest) string {
	doc, _ := json.Marshal(req) // a struct of strings, bools and slices always encodes
	sum := sha256.Sum256(append([]byte(user.Key()+"\n"), doc...))
	return hex.EncodeToString(sum[:])
}

// createAnswered writes the answer of a create of n by svc for call: the credential when
// it is stored; the elicitation, with its requestState while it runs; 201 and the new
// elicitation's location when the create (or the first answer of a key sent again)
// created it.
func (s *API) createAnswered(c echo.Context, svc *services.Service, n ask.Need, call string, o ask.Outcome) error {
	if o.Status == ask.Stored {
		conn := o.Credential.Connection()
		return c.JSON(http.StatusOK, CreateAnswer{Status: StatusStored, UserRef: s.opts.UserRefs.Of(svc.Name, n.User), Credential: &conn})
	}
	v, err := s.view(c.Request().Context(), o.Elicitation)
	if err != nil {
		return err
	}
	ans := CreateAnswer{Status: StatusEnded, UserRef: v.UserRef, Elicitation: &v}
	if o.Status == ask.Asking {
		ans.Status = StatusActionRequired
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
func (s *API) resume(ctx context.Context, svc *services.Service, n ask.Need, req CreateRequest) (ask.Outcome, error) {
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
	return s.opts.Asker.Recheck(ctx, n, e)
}

// delegatedNeed checks what svc asks for in req and returns it, but for its user.
func (s *API) delegatedNeed(svc *services.Service, req CreateRequest) (ask.Need, error) {
	// What the service says is cleaned where it enters (package display), as a client's
	// own name is: it is shown to the user and kept in the history.
	n := ask.Need{Replace: req.Replace, Caller: ask.Caller{Service: svc.Name, Releasable: svc.Release,
		Client: state.NewClientInfo(req.Client.Name, req.Client.Title, req.Client.Version), Call: req.Call, Metadata: req.Metadata, Offline: req.Offline}}
	if err := state.CheckMetadata(req.Metadata); err != nil {
		return n, respond.Refuse(http.StatusBadRequest, "metadata: %v", err)
	}
	t, err := s.serviceTarget(svc, req.Slot, req.Provider)
	if err != nil {
		return n, err
	}
	n.Kind, n.Target, n.Label = t.kind, t.name, req.Label
	if err := credentials.CheckLabel(req.Label); err != nil {
		return n, respond.Refuse(http.StatusBadRequest, "%v", err)
	}
	switch {
	case t.kind == state.KindSecret && len(req.Scopes) > 0:
		return n, respond.Refuse(http.StatusBadRequest, "scopes are for providers; a secret slot has none")
	case t.kind == state.KindOAuth:
		n.Scopes = req.Scopes
		if len(n.Scopes) == 0 {
			n.Scopes = t.provider.DefaultScopes()
		}
	}
	if utf8.RuneCountInString(req.Message) > MaxMessage {
		return n, respond.Refuse(http.StatusBadRequest, "message: at most %d characters", MaxMessage)
	}
	purpose := display.Clean(req.Message, MaxMessage)
	if purpose == "" {
		purpose = svc.Label + " asks for your " + t.label + "."
	}
	n.Purpose = func(*flow.Replaced) string { return purpose }
	return n, nil
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
func (s *API) apiAnswer(c echo.Context) error {
	_, e, err := s.callerElicitation(c)
	if err != nil {
		return err
	}
	var req answerRequest
	svc, err := s.serviceRequest(c, &req)
	if err != nil {
		return err
	}
	ev, reason, ok := flow.ClientAnswer(req.Action)
	if !ok {
		return respond.Refuse(http.StatusBadRequest, "action: want accept, decline or cancel")
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
