// Package limits bounds what one user, or one delegating service, can make urlflow do
// through its HTTP surface, with the rate limits that every replica shares
// (package ratelimit): requests to /mcp, the pages' forms that make urlflow call out, and
// the services' API requests. A refused request is answered 429 with Retry-After, audited,
// and changes nothing.
package limits

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/urlflow/urlflow/oauth/identity"
	"github.com/urlflow/urlflow/services"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/audit"
	"github.com/urlflow/urlflow/state/counters"
	"github.com/urlflow/urlflow/state/ratelimit"
)

// Rates bound what one user can make urlflow do, shared by every replica, and what one
// client address can make it ask the issuer. The zero value limits nothing.
type Rates struct {
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

// Options configure Limits. Limiter is required.
type Options struct {
	// Limiter counts the events, shared by every replica; Rates are the limits.
	Limiter *ratelimit.Limiter
	Rates   Rates
	// Services are the delegating services, some with limits of their own.
	Services *services.Catalog
	// Counters count the refusals and Audit keeps them; nothing is counted or kept if nil.
	Counters *counters.Counters
	Audit    *audit.Trail
	Logger   *slog.Logger
}

// Limits applies the rate limits.
type Limits struct {
	opts Options
	log  *slog.Logger
}

// New returns Limits.
func New(opts Options) *Limits {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Limits{opts: opts, log: log}
}

// retryAfterSeconds is a Retry-After value: whole seconds, at least one.
func retryAfterSeconds(d time.Duration) string {
	return strconv.Itoa(max(1, int(math.Ceil(d.Seconds()))))
}

// allow counts an event of kind what for user under l. It answers nil when the event is
// allowed; otherwise the Decision, after logging and counting the first refusal of the
// window on this replica.
func (l *Limits) allow(ctx context.Context, user state.User, what string, limit ratelimit.Limit) *ratelimit.Decision {
	d := l.opts.Limiter.Allow(user, what, limit)
	if d.Allowed {
		return nil
	}
	l.rateLimited(ctx, user, what)
	if d.FirstRefusal {
		l.log.WarnContext(ctx, "rate limit reached", "what", what, "user", user.Key(), "limit", limit.Events,
			"window", limit.Window.String(), "retry_after", d.RetryAfter.String())
		l.opts.Counters.Add(ctx, "urlflow_rate_limited_total", "what", what)
	}
	return &d
}

// MCP wraps the MCP endpoint, behind bearer authentication, with the MCP rate limit
// of the token's user: over it, 429 with Retry-After, and the request is not served.
func (l *Limits) MCP(next http.Handler) http.Handler {
	// This handler stays small, as identity.RequireBearer's does: it is on the stack of
	// every open MCP stream.
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if l.mcpAllowed(w, r) {
			next.ServeHTTP(w, r)
		}
	})
}

// mcpAllowed reports whether r is within its user's MCP rate limit; over it, it answers r
// with 429 and Retry-After.
func (l *Limits) mcpAllowed(w http.ResponseWriter, r *http.Request) bool {
	who, ok := identity.CallerFrom(r.Context())
	if !ok || who.Operator {
		return true
	}
	limit := l.opts.Rates.MCP
	d := l.allow(r.Context(), who.Claims.User, "mcp", limit)
	if d == nil {
		return true
	}
	retry := retryAfterSeconds(d.RetryAfter)
	w.Header().Set("Retry-After", retry)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusTooManyRequests)
	fmt.Fprintf(w, `{"error":"rate_limited","error_description":"too many requests for this user (at most %d per %s); try again in %s seconds"}`+"\n",
		limit.Events, limit.Window, retry)
	return false
}

// Form counts a secret-form or connect post of user. Over the limit it returns a 429
// error, with Retry-After set, that the caller returns before changing anything.
func (l *Limits) Form(c echo.Context, user state.User) error {
	d := l.allow(c.Request().Context(), user, "form", l.opts.Rates.Forms)
	if d == nil {
		return nil
	}
	retry := retryAfterSeconds(d.RetryAfter)
	c.Response().Header().Set("Retry-After", retry)
	return echo.NewHTTPError(http.StatusTooManyRequests, fmt.Sprintf(
		"You have sent this form too often. Nothing was changed. Please wait %s seconds, then go back and try again.", retry))
}

// Services lets through the API requests of a delegating service within its rate
// limit (its own, or RateLimits.Services); over it, 429 with Retry-After, and the request
// is not served. Other callers pass.
func (l *Limits) Services(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		who, _ := identity.CallerFrom(c.Request().Context())
		svc, ok := l.opts.Services.Lookup(who.Service)
		if !ok {
			return next(c)
		}
		limit := l.opts.Rates.Services
		if svc.RateLimit != nil {
			limit = *svc.RateLimit
		}
		if d := l.allow(c.Request().Context(), serviceCounter(svc.Name), "service", limit); d != nil {
			retry := retryAfterSeconds(d.RetryAfter)
			c.Response().Header().Set("Retry-After", retry)
			return echo.NewHTTPError(http.StatusTooManyRequests, fmt.Sprintf(
				"too many requests from the service %s (at most %d per %s); nothing was done, try again in %s seconds",
				svc.Name, limit.Events, limit.Window, retry))
		}
		return next(c)
	}
}

// serviceCounter is the name a service's requests are counted under by the limiter,
// which counts per user: an issuer no user can have.
func serviceCounter(name string) state.User {
	return state.User{Issuer: "urn:urlflow:service", Subject: name}
}

// rateLimited audits a request of user (or of a service, counted as serviceCounter)
// refused over the rate limit of what.
func (l *Limits) rateLimited(ctx context.Context, user state.User, what string) {
	e := audit.Event{Event: audit.RateLimited, Reason: "over the " + what + " rate limit"}
	if user.Issuer == serviceCounter("").Issuer {
		e.Actor, e.Service = state.ActorService, user.Subject
	} else {
		e = e.About(user)
	}
	l.opts.Audit.Repeated(ctx, e)
}
