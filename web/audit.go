package web

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/urlflow/urlflow/metrics"
	"github.com/urlflow/urlflow/oauth/identity"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/audit"
)

// What the web server adds to the audit trail (package audit). Refusals that anyone can
// repeat at will are counted in windows (audit.Trail.Repeated).

// refusedToken audits a bearer token refused by the bearer check, with why.
func (s *Server) refusedToken(r *http.Request, why string) {
	s.metrics.Refused(metrics.RefusedBearer)
	s.opts.Audit.Repeated(r.Context(), audit.Event{Event: audit.IdentityRefused, Address: s.clientAddr(r), Reason: why})
}

// refusedIdentity audits a refused identity in the browser: user (the zero user when
// nobody is signed in) refused for why, about elicitation (if any).
func (s *Server) refusedIdentity(r *http.Request, user state.User, elicitation, why string) {
	where := metrics.RefusedSignIn
	if elicitation != "" {
		where = metrics.RefusedLink
	}
	s.metrics.Refused(where)
	s.opts.Audit.Repeated(r.Context(), audit.Event{Event: audit.IdentityRefused, Actor: state.ActorOther, Elicitation: elicitation,
		Address: s.clientAddr(r), Reason: why}.About(user))
}

// signedIn audits the sign-in of user.
func (s *Server) signedIn(ctx context.Context, user state.User) {
	s.opts.Audit.Later(ctx, audit.Event{Event: audit.SignedIn, Actor: state.ActorUser}.About(user))
}

// rateLimited audits a request of user (or of a service, counted as serviceCounter)
// refused over the rate limit of what.
func (s *Server) rateLimited(ctx context.Context, user state.User, what string) {
	e := audit.Event{Event: audit.RateLimited, Reason: "over the " + what + " rate limit"}
	if user.Issuer == serviceCounter("").Issuer {
		e.Actor, e.Service = state.ActorService, user.Subject
	} else {
		e = e.About(user)
	}
	s.opts.Audit.Repeated(ctx, e)
}

// clientAddr is the address of the client of r, as the trusted proxies say.
func (s *Server) clientAddr(r *http.Request) string {
	if a := s.opts.TrustedProxies.ClientAddr(r); a.IsValid() {
		return a.String()
	}
	return ""
}

// apiAudit is GET /api/v1/audit: the audit trail from since to until, as JSON Lines, for
// operators (read-only tokens too).
func (s *Server) apiAudit(c echo.Context) error {
	who, _ := identity.CallerFrom(c.Request().Context())
	if !who.Operator {
		return refuse(http.StatusForbidden, "the audit trail is for operators")
	}
	if s.opts.Audit == nil {
		return refuse(http.StatusNotFound, "this server keeps no audit trail")
	}
	now := time.Now() // the trail's positions are Redis's clock, not the store's
	since, err := parseWhen(c.QueryParam("since"), now)
	if err != nil || since.IsZero() {
		return refuse(http.StatusBadRequest, "since: want a time (RFC 3339, such as 2026-12-01T00:00:00Z) or a duration before now (such as 24h)")
	}
	until, err := parseWhen(c.QueryParam("until"), now)
	if err != nil {
		return refuse(http.StatusBadRequest, "until: want a time (RFC 3339) or a duration before now")
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
