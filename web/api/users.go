package api

import (
	"errors"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/urlflow/urlflow/internal/display"
	"github.com/urlflow/urlflow/state/audit"

	"github.com/urlflow/urlflow/oauth/identity"
	"github.com/urlflow/urlflow/recovery"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/web/respond"
)

// forgetRequest is the body of POST /api/v1/users/forget.
type forgetRequest struct {
	Issuer  string `json:"issuer"`
	Subject string `json:"subject"`
	Reason  string `json:"reason"`
}

// identityLimit bounds the issuer and the subject of a user to forget, in bytes: OpenID
// Connect caps a subject at 255 ASCII characters, and an issuer is a URL.
const identityLimit = 2048

// apiForget is POST /api/v1/users/forget, for operators with a read-write token: urlflow
// forgets the user the body names (package forget), and answers what it erased and the
// tombstone that stands for the user in the audit trail. The identity is in the body, not
// the path, so that access logs do not keep it.
func (s *API) apiForget(c echo.Context) error {
	who, _ := identity.CallerFrom(c.Request().Context())
	if !who.Operator {
		return respond.Refuse(http.StatusForbidden, "forgetting a user is for operators")
	}
	if who.OperatorAs.ReadOnly {
		return respond.Refuse(http.StatusForbidden, "this operator token may only read: forgetting a user needs a read-write token")
	}
	if !isJSON(c) {
		return respond.Refuse(http.StatusUnsupportedMediaType, "send the body as application/json")
	}
	body, err := readBody(c)
	if err != nil {
		return err
	}
	var req forgetRequest
	if err := decodeJSONBody(body, &req, true); err != nil {
		return respond.Refuse(http.StatusBadRequest, `the body must be {"issuer": "...", "subject": "...", "reason": "..."}: %v`, err)
	}
	for _, f := range []struct{ name, v string }{{"issuer", req.Issuer}, {"subject", req.Subject}} {
		name, v := f.name, f.v
		if v == "" || len(v) > identityLimit || !utf8.ValidString(v) || strings.TrimSpace(v) != v {
			return respond.Refuse(http.StatusBadRequest, "%s: want the user's %s exactly as their tokens carry it (1 to %d bytes, no surrounding spaces)",
				name, name, identityLimit)
		}
	}
	a, err := act(who, display.Clean(req.Reason, recovery.ReasonLimit), "")
	if err != nil {
		return err
	}
	report, err := s.opts.Forget.Forget(c.Request().Context(), state.User{Issuer: req.Issuer, Subject: req.Subject}, a.By, a.Reason)
	if errors.Is(err, audit.ErrRewriting) {
		return respond.Refuse(http.StatusConflict, "%v; what was erased before stays erased", err)
	}
	if err != nil {
		return err // 503 while Redis cannot be reached (web/errors.go); running it again finishes the rest
	}
	return c.JSON(http.StatusOK, report)
}
