package web

import (
	"fmt"
	"net/http"
	"time"

	"github.com/urlflow/urlflow/internal/signed"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/flow"
)

// A delegating service whose client speaks protocol 2026-07-28 answers its tool call with
// input_required and a requestState that the client sends back with its retry. urlflow
// signs that requestState for the service (serviceState), so that the service needs no key
// of its own for it: the service puts it in its result as it is, and sends it back to
// POST /api/v1/elicitations with the retry.

// requestStateGrace keeps a requestState valid a little past its elicitation's deadline,
// so that a retry just after the deadline learns that the flow expired.
const requestStateGrace = 5 * time.Minute

// maxCall bounds the call a service binds a requestState to, in bytes.
const maxCall = 200

// serviceState is what a requestState urlflow issues to a service holds: the elicitation
// it waits for, bound to the service, the user, what is asked for, the service's own call
// (for example its tool name and a digest of the arguments) and an expiry.
type serviceState struct {
	Version       int    `json:"v"`
	Service       string `json:"s"`
	User          string `json:"u"` // state.User.Key()
	Target        string `json:"t"` // kind ":" target
	Call          string `json:"c,omitempty"`
	ElicitationID string `json:"e"`
	Expires       int64  `json:"x"` // Unix seconds
}

func stateTarget(kind state.Kind, target string) string { return string(kind) + ":" + target }

// sealServiceState returns the requestState of e for the call of service.
func (s *Server) sealServiceState(service string, e *flow.Elicitation, call string) string {
	return s.serviceStates.Seal(serviceState{
		Version: 1, Service: service, User: e.User.Key(), Target: stateTarget(e.Kind, e.Target), Call: call,
		ElicitationID: e.ID, Expires: e.ExpiresAt.Add(requestStateGrace).Unix(),
	})
}

// openServiceState returns the state sealed in text if urlflow issued it to service for
// this user, target and call, and it has not expired. The error is the API's refusal,
// saying which check failed without quoting the text.
func (s *Server) openServiceState(text, service string, user state.User, kind state.Kind, target, call string) (serviceState, error) {
	bad := func(why string) (serviceState, error) {
		return serviceState{}, refuse(http.StatusBadRequest,
			"requestState: %s; nothing was changed: create again without it to start over", why)
	}
	var st serviceState
	if err := s.serviceStates.Open(text, &st); err != nil {
		return bad(err.Error())
	}
	switch {
	case st.Version != 1 || !flow.ValidID(st.ElicitationID):
		return bad(signed.ErrMalformed.Error())
	case time.Now().Unix() > st.Expires:
		return bad("it has expired")
	case st.Service != service:
		return bad("it belongs to another service")
	case st.User != user.Key():
		return bad("it belongs to another user")
	case st.Target != stateTarget(kind, target):
		return bad(fmt.Sprintf("it was issued for another %s", kindNoun(kind)))
	case st.Call != call:
		return bad("it was issued for another call")
	}
	return st, nil
}
