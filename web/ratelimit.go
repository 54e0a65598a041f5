package web

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/urlflow/urlflow/oauth"
	"github.com/urlflow/urlflow/state"
)

// RateLimits bound what one user can make urlflow do, shared by every replica. The zero
// value limits nothing.
type RateLimits struct {
	// MCP bounds the requests to /mcp of one user.
	MCP state.Limit
	// Forms bounds the form posts of one user that make urlflow call out: a secret
	// checked with its API, a connect that leaves for the provider.
	Forms state.Limit
}

// retryAfterSeconds is a Retry-After value: whole seconds, at least one.
func retryAfterSeconds(d time.Duration) string {
	return strconv.Itoa(max(1, int(math.Ceil(d.Seconds()))))
}

// limitMCP wraps the MCP endpoint, behind bearer authentication, with the MCP rate limit
// of the token's user: over it, 429 with Retry-After, and the request is not served.
func (s *Server) limitMCP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, ok := oauth.UserOf(auth.TokenInfoFromContext(r.Context()))
		if ok {
			allowed, retry, err := s.opts.Store.Allow(r.Context(), user, "mcp", s.opts.RateLimits.MCP)
			if err != nil {
				// Counting failed: serve the request. A limit never causes an outage.
				s.log.WarnContext(r.Context(), "mcp rate limit not checked", "err", err)
			} else if !allowed {
				s.log.WarnContext(r.Context(), "mcp rate limit reached", "user", user.Key(), "retry_after", retry)
				s.opts.Store.Count(r.Context(), "urlflow_rate_limited_total", "what", "mcp")
				w.Header().Set("Retry-After", retryAfterSeconds(retry))
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusTooManyRequests)
				fmt.Fprintf(w, `{"error":"rate_limited","error_description":"too many requests for this user (at most %d per %s); try again in %s seconds"}`+"\n",
					s.opts.RateLimits.MCP.Events, s.opts.RateLimits.MCP.Window, retryAfterSeconds(retry))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// allowForm counts a form post of user that makes urlflow call out. Over the limit it
// returns a 429 error, with Retry-After set, that the caller returns before changing
// anything.
func (s *Server) allowForm(c echo.Context, user state.User) error {
	ctx := c.Request().Context()
	allowed, retry, err := s.opts.Store.Allow(ctx, user, "form", s.opts.RateLimits.Forms)
	if err != nil {
		s.log.WarnContext(ctx, "form rate limit not checked", "err", err)
		return nil
	}
	if allowed {
		return nil
	}
	s.log.WarnContext(ctx, "form rate limit reached", "user", user.Key(), "path", c.Request().URL.Path, "retry_after", retry)
	s.opts.Store.Count(ctx, "urlflow_rate_limited_total", "what", "form")
	c.Response().Header().Set("Retry-After", retryAfterSeconds(retry))
	return echo.NewHTTPError(http.StatusTooManyRequests, fmt.Sprintf(
		"You have sent this form too often. Nothing was changed. Please wait %s seconds, then go back and try again.",
		retryAfterSeconds(retry)))
}
