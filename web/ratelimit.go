package web

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/urlflow/urlflow/oauth/identity"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/ratelimit"
)

// RateLimits bound what one user can make urlflow do, shared by every replica, and what
// one client address can make it ask the issuer. The zero value limits nothing.
type RateLimits struct {
	// MCP bounds the requests to /mcp of one user.
	MCP ratelimit.Limit
	// Forms bounds the secret-form and connect posts of one user: each may make urlflow
	// call out (a secret checked with its API, a connect that leaves for the provider).
	Forms ratelimit.Limit
	// Services bounds the API requests of one delegating service, for every service whose
	// configuration sets no limit of its own.
	Services ratelimit.Limit
	// BadTokens bounds the bearer tokens that do not verify from one client address, to
	// /mcp and the API together (identity.BadTokens): each may make urlflow ask the issuer.
	// Counted in each replica's memory, not in Redis.
	BadTokens ratelimit.Limit
}

// retryAfterSeconds is a Retry-After value: whole seconds, at least one.
func retryAfterSeconds(d time.Duration) string {
	return strconv.Itoa(max(1, int(math.Ceil(d.Seconds()))))
}

// allow counts an event of kind what for user under l. It answers nil when the event is
// allowed; otherwise the Decision, after logging and counting the first refusal of the
// window on this replica.
func (s *Server) allow(ctx context.Context, user state.User, what string, l ratelimit.Limit) *ratelimit.Decision {
	d := s.opts.Limiter.Allow(user, what, l)
	if d.Allowed {
		return nil
	}
	s.rateLimited(ctx, user, what)
	if d.FirstRefusal {
		s.log.WarnContext(ctx, "rate limit reached", "what", what, "user", user.Key(), "limit", l.Events,
			"window", l.Window.String(), "retry_after", d.RetryAfter.String())
		s.opts.Counters.Add(ctx, "urlflow_rate_limited_total", "what", what)
	}
	return &d
}

// limitMCP wraps the MCP endpoint, behind bearer authentication, with the MCP rate limit
// of the token's user: over it, 429 with Retry-After, and the request is not served.
func (s *Server) limitMCP(next http.Handler) http.Handler {
	// This handler stays small, as identity.RequireBearer's does: it is on the stack of
	// every open MCP stream.
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.mcpAllowed(w, r) {
			next.ServeHTTP(w, r)
		}
	})
}

// mcpAllowed reports whether r is within its user's MCP rate limit; over it, it answers r
// with 429 and Retry-After.
func (s *Server) mcpAllowed(w http.ResponseWriter, r *http.Request) bool {
	who, ok := identity.CallerFrom(r.Context())
	if !ok || who.Operator {
		return true
	}
	l := s.opts.RateLimits.MCP
	d := s.allow(r.Context(), who.Claims.User, "mcp", l)
	if d == nil {
		return true
	}
	retry := retryAfterSeconds(d.RetryAfter)
	w.Header().Set("Retry-After", retry)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusTooManyRequests)
	fmt.Fprintf(w, `{"error":"rate_limited","error_description":"too many requests for this user (at most %d per %s); try again in %s seconds"}`+"\n",
		l.Events, l.Window, retry)
	return false
}

// allowForm counts a secret-form or connect post of user. Over the limit it returns a 429
// error, with Retry-After set, that the caller returns before changing anything.
func (s *Server) allowForm(c echo.Context, user state.User) error {
	d := s.allow(c.Request().Context(), user, "form", s.opts.RateLimits.Forms)
	if d == nil {
		return nil
	}
	retry := retryAfterSeconds(d.RetryAfter)
	c.Response().Header().Set("Retry-After", retry)
	return echo.NewHTTPError(http.StatusTooManyRequests, fmt.Sprintf(
		"You have sent this form too often. Nothing was changed. Please wait %s seconds, then go back and try again.", retry))
}

// limitServices lets through the API requests of a delegating service within its rate
// limit (its own, or RateLimits.Services); over it, 429 with Retry-After, and the request
// is not served. Other callers pass.
func (s *Server) limitServices(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		who, _ := identity.CallerFrom(c.Request().Context())
		svc, ok := s.opts.Services.Lookup(who.Service)
		if !ok {
			return next(c)
		}
		l := s.opts.RateLimits.Services
		if svc.RateLimit != nil {
			l = *svc.RateLimit
		}
		if d := s.allow(c.Request().Context(), serviceCounter(svc.Name), "service", l); d != nil {
			retry := retryAfterSeconds(d.RetryAfter)
			c.Response().Header().Set("Retry-After", retry)
			return refuse(http.StatusTooManyRequests, "too many requests from the service %s (at most %d per %s); nothing was done, try again in %s seconds",
				svc.Name, l.Events, l.Window, retry)
		}
		return next(c)
	}
}

// serviceCounter is the name a service's requests are counted under by the limiter,
// which counts per user: an issuer no user can have.
func serviceCounter(name string) state.User {
	return state.User{Issuer: "urn:urlflow:service", Subject: name}
}
