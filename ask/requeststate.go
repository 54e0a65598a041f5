package ask

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/urlflow/urlflow/internal/signed"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/flow"
)

// A 2026-07-28 client retries a call that answered input_required with the requestState of
// that answer. urlflow issues it for the call (Issue), whether the call is one of its own
// tools or a delegating service's tool (which puts it into its own input_required result as
// it is), and checks it on the retry (Redeem). It is signed, so a client can neither forge
// nor alter it, and bound to the user, the call and an expiry, so that it cannot be sent
// back anywhere else.

// StateGrace keeps a requestState valid a little past its elicitation's deadline, so that
// a retry just after the deadline learns honestly that the flow expired.
const StateGrace = 5 * time.Minute

// MaxCall bounds the call a service binds a requestState to, in bytes.
const MaxCall = 200

// A Binding is what a requestState is bound to besides its user: for urlflow's own tools,
// the tool and a digest of its arguments (ArgumentsDigest); for a service, the service,
// what it asks for and its own call (for example its tool and a digest of its arguments).
type Binding struct {
	Tool, Arguments string
	Service         string
	Kind            state.Kind
	Target, Call    string
}

// ToolBinding binds a requestState to one of urlflow's tools called with arguments.
func ToolBinding(tool string, arguments json.RawMessage) Binding {
	return Binding{Tool: tool, Arguments: ArgumentsDigest(arguments)}
}

// ServiceBinding binds a requestState to service's call asking for target of kind.
func ServiceBinding(service string, kind state.Kind, target, call string) Binding {
	return Binding{Service: service, Kind: kind, Target: target, Call: call}
}

// requestState is the signed document. Its one format serves both kinds of caller: "t" is
// the tool of urlflow's own, or the kind and target a service asked for.
type requestState struct {
	Version       int    `json:"v"`
	Service       string `json:"s,omitempty"`
	User          string `json:"u"` // state.User.Key()
	T             string `json:"t"`
	Arguments     string `json:"a,omitempty"` // urlflow's own tools
	Call          string `json:"c,omitempty"` // services
	ElicitationID string `json:"e"`
	Expires       int64  `json:"x"` // Unix seconds
}

// state returns the document of b for user's elicitation id.
func (b Binding) state(user state.User, id string, expires time.Time) requestState {
	st := requestState{Version: 1, User: user.Key(), ElicitationID: id, Expires: expires.Unix()}
	if b.Service == "" {
		st.T, st.Arguments = b.Tool, b.Arguments
	} else {
		st.Service, st.T, st.Call = b.Service, string(b.Kind)+":"+b.Target, b.Call
	}
	return st
}

// sealer returns the key's sealer of b's kind of caller.
func (a *Asker) sealer(b Binding) signed.Sealer {
	if b.Service == "" {
		return a.tools
	}
	return a.services
}

// Issue returns the requestState of elicitation e for the call bound by b.
func (a *Asker) Issue(e *flow.Elicitation, b Binding) string {
	return a.sealer(b).Seal(b.state(e.User, e.ID, e.ExpiresAt.Add(StateGrace)))
}

// ErrBadState is wrapped by every reason a requestState is refused.
var ErrBadState = errors.New("the requestState of this call is not valid")

// Redeem returns the elicitation ID of the requestState text if urlflow issued it for
// user and the call bound by b, and it has not expired. Its error wraps ErrBadState, says
// which check failed, and never quotes the text.
func (a *Asker) Redeem(text string, user state.User, b Binding) (string, error) {
	bad := func(why string) (string, error) { return "", fmt.Errorf("%w: %s", ErrBadState, why) }
	var st requestState
	if err := a.sealer(b).Open(text, &st); err != nil {
		return bad(err.Error())
	}
	want := b.state(user, st.ElicitationID, time.Unix(st.Expires, 0))
	switch {
	case st.Version != 1 || !flow.ValidID(st.ElicitationID):
		return bad(signed.ErrMalformed.Error())
	case a.now().Unix() > st.Expires:
		return bad("it has expired")
	case st.Service != want.Service:
		return bad("it belongs to another service")
	case st.User != want.User:
		return bad("it belongs to another user")
	case st.T != want.T && b.Service == "":
		return bad("it belongs to another tool")
	case st.T != want.T:
		return bad("it was issued for another " + kindNoun(b.Kind))
	case st.Arguments != want.Arguments:
		return bad("it was issued for other arguments")
	case st.Call != want.Call:
		return bad("it was issued for another call")
	}
	return st.ElicitationID, nil
}

// kindNoun names what a service asks for of kind k.
func kindNoun(k state.Kind) string {
	if k == state.KindOAuth {
		return "provider"
	}
	return "slot"
}

// ArgumentsDigest returns a digest of a call's arguments that does not depend on key order
// or spacing.
func ArgumentsDigest(raw json.RawMessage) string {
	var v any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &v); err != nil {
			v = string(raw)
		}
	}
	canonical, _ := json.Marshal(v) // maps encode with sorted keys
	sum := sha256.Sum256(canonical)
	return base64.RawURLEncoding.EncodeToString(sum[:])
}
