package mcp

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

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

// requestStates signs and opens requestState values with an HMAC-SHA256 key.
type requestStates struct {
	key []byte
}

func (rs requestStates) mac(payload string) string {
	m := hmac.New(sha256.New, rs.key)
	m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// seal returns the signed text of st: base64url(JSON) "." base64url(HMAC).
func (rs requestStates) seal(st requestState) string {
	st.Version = 1
	doc, _ := json.Marshal(st) // a struct of strings and integers always encodes
	payload := base64.RawURLEncoding.EncodeToString(doc)
	return payload + "." + rs.mac(payload)
}

// open verifies text and returns its state if it was sealed by this key, has not expired
// at now, and belongs to user, tool and arguments. Errors say which check failed and wrap
// errBadRequestState; they never quote the text.
func (rs requestStates) open(text string, now time.Time, user state.User, tool, arguments string) (requestState, error) {
	bad := func(why string) (requestState, error) {
		return requestState{}, fmt.Errorf("%w: %s", errBadRequestState, why)
	}
	payload, mac, ok := strings.Cut(text, ".")
	if !ok || len(text) > 4096 {
		return bad("it is malformed")
	}
	if !hmac.Equal([]byte(mac), []byte(rs.mac(payload))) {
		return bad("it was not issued by this server or was changed")
	}
	doc, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return bad("it is malformed")
	}
	var st requestState
	if err := json.Unmarshal(doc, &st); err != nil || st.Version != 1 {
		return bad("it is malformed")
	}
	switch {
	case now.Unix() > st.Expires:
		return bad("it has expired")
	case st.User != user.Key():
		return bad("it belongs to another user")
	case st.Tool != tool:
		return bad("it belongs to another tool")
	case st.Arguments != arguments:
		return bad("it was issued for other arguments")
	case !flow.ValidID(st.ElicitationID):
		return bad("it is malformed")
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
