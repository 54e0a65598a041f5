package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/urlflow/urlflow/internal/display"
	"github.com/urlflow/urlflow/oauth/identity"
	"github.com/urlflow/urlflow/recovery"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/flow"
	"github.com/urlflow/urlflow/web/respond"
)

// actor is how the history names the caller of the API: the operator, the service or the
// user.
func actor(c identity.Caller) state.Actor {
	switch {
	case c.Operator:
		return state.ActorOperator
	case c.Service != "":
		return state.ActorService
	}
	return state.ActorUser
}

// mayRead reports whether who may see e: an operator sees every elicitation, a service the
// ones it created, a user their own.
func mayRead(who identity.Caller, e *flow.Elicitation) bool {
	switch {
	case who.Operator:
		return true
	case who.Service != "":
		return e.Service == who.Service
	}
	return e.User == who.Claims.User
}

// unknownElicitation is the answer for anything that is not one of the caller's
// elicitations: no such ID, another user's, or malformed. It reveals nothing.
func unknownElicitation(id string) error {
	return respond.JSON(http.StatusNotFound, map[string]string{"id": id, "state": string(flow.Unknown)})
}

// callerElicitation loads the elicitation named in the path if the caller (whom the bearer
// check let through) may see it (mayRead); otherwise its error is the answer that the
// elicitation is unknown.
func (s *API) callerElicitation(c echo.Context) (identity.Caller, *flow.Elicitation, error) {
	who, ok := identity.CallerFrom(c.Request().Context())
	if !ok {
		return who, nil, errors.New("the recovery API is served without its bearer check")
	}
	id := c.Param("id")
	if who.Operator && !flow.ValidID(id) && flow.IsPrefix(id) {
		var err error
		if id, err = s.byPrefix(c.Request().Context(), id); err != nil {
			return who, nil, err
		}
	}
	e, err := s.opts.Flows.Read(c.Request().Context(), id)
	if errors.Is(err, state.ErrNotFound) || (err == nil && !mayRead(who, e)) {
		return who, nil, unknownElicitation(id)
	}
	return who, e, err
}

// prefixCandidates is the most IDs an ambiguous prefix answer names.
const prefixCandidates = 10

// byPrefix returns the ID of the one elicitation whose ID begins with prefix, for an
// operator who typed the beginning of an ID (flow.MinPrefix characters or more); otherwise
// the answer that it is unknown, or, when several begin so, a 400 that names them.
func (s *API) byPrefix(ctx context.Context, prefix string) (string, error) {
	ids, err := s.opts.Flows.Index().Prefixed(ctx, prefix, prefixCandidates)
	switch {
	case err != nil:
		return "", err
	case len(ids) == 0:
		return "", unknownElicitation(prefix)
	case len(ids) > 1:
		some := ""
		if len(ids) == prefixCandidates {
			some = "at least "
		}
		return "", respond.JSON(http.StatusBadRequest, map[string]any{
			"error":      fmt.Sprintf("the ID prefix %s begins %s%d elicitations: give more of the ID", prefix, some, len(ids)),
			"candidates": ids,
		})
	}
	return ids[0], nil
}

// view is e as the API shows it to the caller in ctx, with its history. A delegating
// service is not told who else opened its user's link: that is the user's and the
// operators' to know.
func (s *API) view(ctx context.Context, e *flow.Elicitation) (flow.View, error) {
	history, err := s.opts.Flows.History(ctx, e.ID)
	if err != nil {
		return flow.View{}, err
	}
	if who, _ := identity.CallerFrom(ctx); who.Service != "" {
		for i := range history {
			if history[i].Event == flow.OtherUserOpened {
				history[i].Reason = "refused: opened by another user"
			}
		}
	}
	v := e.ViewFor(s.opts.UserRefs, flow.ElicitationURL(s.opts.PublicURL, e.ID), history)
	who, _ := identity.CallerFrom(ctx)
	withoutServiceData(who, &v)
	return v, nil
}

// withoutServiceData takes out of v what a delegating service keeps there for itself (its
// call and metadata), unless who is a service (a service sees only its own flows) or an
// operator.
func withoutServiceData(who identity.Caller, v *flow.View) {
	if who.Service == "" && !who.Operator {
		v.Call, v.Metadata = "", nil
	}
}

// answer answers status with e as the caller may see it, with its history; an operator
// also sees what a listing shows operators: user, client, era, replica, session, and why
// it is stuck.
func (s *API) answer(c echo.Context, status int, e *flow.Elicitation) error {
	ctx := c.Request().Context()
	v, err := s.view(ctx, e)
	if err != nil {
		return err
	}
	if who, _ := identity.CallerFrom(ctx); who.Operator {
		l := s.opts.Flows.Index().Listed(e, s.opts.UserRefs, v.URL, time.Now(), true)
		l.View = v
		return c.JSON(status, l)
	}
	return c.JSON(status, v)
}

// DefaultStatusWaitLimit bounds ?wait= of GET /api/v1/elicitations/{id}.
const DefaultStatusWaitLimit = 60 * time.Second

// apiStatus is GET /api/v1/elicitations/{id}. With ?wait=N (seconds, at most 60) it
// answers once the flow has ended, or after N seconds with the flow as it then stands.
func (s *API) apiStatus(c echo.Context) error {
	limit := cmp.Or(s.opts.StatusWaitLimit, DefaultStatusWaitLimit)
	var wait time.Duration
	if v := c.QueryParam("wait"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > int(DefaultStatusWaitLimit/time.Second) {
			return respond.Refuse(http.StatusBadRequest, "wait: want whole seconds from 0 to 60")
		}
		wait = min(time.Duration(n)*time.Second, limit)
	}
	var wake <-chan flow.Notice
	if wait > 0 {
		// Subscribe before reading, so that no change between the read and the wait is
		// missed.
		var stop func()
		wake, stop = s.opts.Hub.Wait(c.Param("id"))
		defer stop()
	}
	_, e, err := s.callerElicitation(c)
	if err != nil {
		return err
	}
	if wait > 0 && !e.State.Terminal() {
		if e, err = s.opts.Flows.AwaitEnd(c.Request().Context(), e, wake, time.Now().Add(wait), nil, nil); err != nil {
			return err
		}
	}
	return s.answer(c, http.StatusOK, e)
}

// apiCancel is POST /api/v1/elicitations/{id}/cancel: 200 and cancelled from a running
// state, 409 with the current state from an ended one. An operator gives a reason.
func (s *API) apiCancel(c echo.Context) error {
	who, e, err := s.callerElicitation(c)
	if err != nil {
		return err
	}
	req, err := actionBody(c)
	if err != nil {
		return err
	}
	if req.New {
		return respond.Refuse(http.StatusBadRequest, "new: only a retry starts a new attempt")
	}
	cancel, err := act(who, req.Reason, "cancel requested through the API")
	if err != nil {
		return err
	}
	e, err = s.opts.Recovery.Cancel(c.Request().Context(), e, cancel)
	if err != nil {
		return s.recoveryRefusal(c, err)
	}
	return s.answer(c, http.StatusOK, e)
}

// recoveryRefusal answers an action that err refused: 409 with the elicitation and what
// stands in the way (recovery.Conflict), or err itself.
func (s *API) recoveryRefusal(c echo.Context, err error) error {
	var conflict *recovery.Conflict
	if errors.As(err, &conflict) {
		return s.conflict(c, conflict.Elicitation, conflict.Why)
	}
	return err
}

// actionRequest is the optional body of the cancel and retry endpoints.
type actionRequest struct {
	// New asks for a new attempt of a flow that ended without success (retry only).
	New bool `json:"new"`
	// Reason says why, for the history; an operator must give one.
	Reason string `json:"reason"`
}

// actionBody reads the optional JSON body of the cancel and retry endpoints.
func actionBody(c echo.Context) (actionRequest, error) {
	var req actionRequest
	if c.Request().Header.Get(echo.HeaderContentType) != "" && !isJSON(c) {
		// A form's body is read by the form parser before this handler would see it.
		return req, respond.Refuse(http.StatusUnsupportedMediaType, "send the body as application/json, or none")
	}
	body, err := readBody(c)
	if err != nil {
		return req, err
	}
	if len(strings.TrimSpace(string(body))) > 0 {
		if err := decodeJSONBody(body, &req, false); err != nil {
			return req, respond.Refuse(http.StatusBadRequest, `the body must be empty or one JSON value like {"new": true} or {"reason": "..."}: %v`, err)
		}
	}
	req.Reason = display.Clean(req.Reason, recovery.ReasonLimit)
	return req, nil
}

// act returns who's action with reason (cleaned by actionBody) for the history, or def
// when a user or a service gives none. An operator must give a reason and hold a
// read-write token.
func act(who identity.Caller, reason, def string) (flow.Act, error) {
	a := flow.Act{Actor: actor(who), Reason: reason}
	if who.Operator {
		if who.OperatorAs.ReadOnly {
			return a, respond.Refuse(http.StatusForbidden, "this operator token may only read: cancel, retry and redelivery need a read-write token")
		}
		if a.Reason == "" {
			return a, respond.Refuse(http.StatusBadRequest, `reason: an operator says why, in the body: {"reason": "..."}`)
		}
		a.By = who.OperatorAs.Name
	}
	if a.Reason == "" {
		a.Reason = def
	}
	return a, nil
}

// apiRetry is POST /api/v1/elicitations/{id}/retry. A running flow answers 200 with its URL
// to open again. An ended flow has its completion notification sent again to the
// originating session while that lives (200 with the delivery record). With {"new": true},
// a flow that ended without success gets a new attempt, linked both ways (201). An operator
// gives a reason for either.
func (s *API) apiRetry(c echo.Context) error {
	// The caller first: without a valid token the answer is 401, whatever the body.
	who, e, err := s.callerElicitation(c)
	if err != nil {
		return err
	}
	req, err := actionBody(c)
	if err != nil {
		return err
	}
	if !e.State.Terminal() {
		return s.answer(c, http.StatusOK, e) // nothing to do: only read
	}
	retry, err := act(who, req.Reason, "")
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	if !req.New {
		if e, err = s.opts.Recovery.Resend(ctx, e, retry); err != nil {
			return s.recoveryRefusal(c, err)
		}
		return s.answer(c, http.StatusOK, e)
	}
	next, err := s.opts.Recovery.Retry(ctx, e, retry)
	if err != nil {
		return s.recoveryRefusal(c, err)
	}
	c.Response().Header().Set(echo.HeaderLocation, "/api/v1/elicitations/"+next.ID)
	return s.answer(c, http.StatusCreated, next)
}

// conflict answers 409 with the elicitation and what stands in the way.
func (s *API) conflict(c echo.Context, e *flow.Elicitation, why string) error {
	v, err := s.view(c.Request().Context(), e)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusConflict, struct {
		Error string `json:"error"`
		flow.View
	}{why, v})
}
