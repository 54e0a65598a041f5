package mcp

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

// requestState is what urlflow puts in a multi round-trip (2026-07-28) requestState: the
// call it belongs to and the elicitation it waits for. The client echoes it back
// untouched; urlflow signs it, so a client can neither forge nor alter it, and binds it to
// the user, the tool, the arguments and an expiry, so that it cannot be replayed anywhere
// else.
type requestState struct {
	Version       int    `json:"v"`
	User          string `json:"u"` // state.User.Key()
	Tool          string `json:"t"`
	Arguments     string `json:"a"` // argumentsDigest
	ElicitationID string `json:"e"`
	Expires       int64  `json:"x"` // Unix seconds
}

// errBadRequestState is wrapped by every reason a requestState is refused.
var errBadRequestState = errors.New("the requestState of this call is not valid")

// requestStates signs and opens requestState values.
type requestStates struct {
	signed.Sealer
}

// seal returns the signed text of st.
func (rs requestStates) seal(st requestState) string {
	st.Version = 1
	return rs.Seal(st)
}

// open verifies text and returns its state if it was sealed by this key, has not expired
// at now, and belongs to user, tool and arguments. Errors say which check failed and wrap
// errBadRequestState; they never quote the text.
func (rs requestStates) open(text string, now time.Time, user state.User, tool, arguments string) (requestState, error) {
	bad := func(why string) (requestState, error) {
		return requestState{}, fmt.Errorf("%w: %s", errBadRequestState, why)
	}
	var st requestState
	if err := rs.Open(text, &st); err != nil {
		return bad(err.Error())
	}
	switch {
	case st.Version != 1:
		return bad(signed.ErrMalformed.Error())
	case now.Unix() > st.Expires:
		return bad("it has expired")
	case st.User != user.Key():
		return bad("it belongs to another user")
	case st.Tool != tool:
		return bad("it belongs to another tool")
	case st.Arguments != arguments:
		return bad("it was issued for other arguments")
	case !flow.ValidID(st.ElicitationID):
		return bad(signed.ErrMalformed.Error())
	}
	return st, nil
}

// argumentsDigest returns a digest of a call's arguments that does not depend on key
// order or spacing.
func argumentsDigest(raw json.RawMessage) string {
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
