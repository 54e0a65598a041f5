package api

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/urlflow/urlflow/oauth/identity"
	"github.com/urlflow/urlflow/state/audit"
	"github.com/urlflow/urlflow/web/respond"
)

// apiAudit is GET /api/v1/audit: the audit trail from since to until, as JSON Lines, for
// operators (read-only tokens too).
func (s *API) apiAudit(c echo.Context) error {
	who, _ := identity.CallerFrom(c.Request().Context())
	if !who.Operator {
		return respond.Refuse(http.StatusForbidden, "the audit trail is for operators")
	}
	if s.opts.Audit == nil {
		return respond.Refuse(http.StatusNotFound, "this server keeps no audit trail")
	}
	now := time.Now() // the trail's positions are Redis's clock, not the store's
	since, err := parseWhen(c.QueryParam("since"), now)
	if err != nil || since.IsZero() {
		return respond.Refuse(http.StatusBadRequest, "since: want a time (RFC 3339, such as 2026-12-01T00:00:00Z) or a duration before now (such as 24h)")
	}
	until, err := parseWhen(c.QueryParam("until"), now)
	if err != nil {
		return respond.Refuse(http.StatusBadRequest, "until: want a time (RFC 3339) or a duration before now")
	}
	w := c.Response()
	w.Header().Set(echo.HeaderContentType, "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	err = s.opts.Audit.Export(c.Request().Context(), since, until, func(e audit.Event) error { return enc.Encode(e) })
	if err != nil {
		// The status is sent: the export ends early, and the log says why.
		s.log.WarnContext(c.Request().Context(), "audit export ended early", "err", err)
	}
	return nil
}

// parseWhen reads a time: RFC 3339, or a duration before now; empty is the zero time.
func parseWhen(v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Parse(time.RFC3339, v)
}
