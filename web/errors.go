package web

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/urlflow/urlflow/internal/locale"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/templates"
	"github.com/urlflow/urlflow/web/browser"
	"github.com/urlflow/urlflow/web/respond"
)

// renderProblem renders the generic error page. It is the error handler's page, so it does
// not touch the session (which may be what failed), and it is written even when the
// request's context has ended: a body that did not arrive in time ends it, and the client
// may still read the answer.
func (s *Server) renderProblem(c echo.Context, status int, message string) {
	ctx := context.WithoutCancel(c.Request().Context())
	heading := problemHeading(ctx, status)
	p := templates.Page{Title: heading, Dev: s.opts.Dev}
	if err := browser.RenderIn(ctx, c, status, templates.ProblemPage(p, templates.Problem{Status: status, Heading: heading, Message: message})); err != nil {
		s.log.WarnContext(c.Request().Context(), "problem page not written", "err", err)
	}
}

// somethingWentWrong is the answer to a request that failed on urlflow's side.
const somethingWentWrong = "Something went wrong on our side. Nothing was changed. Please try again in a moment."

// handleError is the one error handler of the HTTP surface: a handler that cannot go on
// returns an error, and this turns it into the answer. A respond.Error sends itself (a page, a redirect, a JSON
// body); any other in the form the caller reads, JSON for the API and a page for
// browsers.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	if answer, ok := respond.As(err); ok {
		sendErr := answer.Send(c)
		if sendErr == nil || c.Response().Committed {
			if sendErr != nil {
				s.log.WarnContext(c.Request().Context(), "answer not sent whole", "path", c.Request().URL.Path, "err", sendErr)
			}
			return
		}
		err = sendErr // nothing was written: the failure to answer is the answer
	}
	status := http.StatusInternalServerError
	message := somethingWentWrong
	var he *echo.HTTPError
	var maxBytes *http.MaxBytesError
	switch {
	case state.Unreachable(err):
		// Redis (or another dependency) cannot be reached: say so, without the address.
		status = http.StatusServiceUnavailable
		message = "urlflow cannot reach its store right now. Nothing was changed. Please try again in a moment."
		s.log.ErrorContext(c.Request().Context(), "request failed: store unavailable", "path", c.Request().URL.Path, "err", err)
	case errors.As(err, &he):
		status = he.Code
		if m, ok := he.Message.(string); ok {
			message = m
		} else {
			message = http.StatusText(status)
		}
	case errors.As(err, &maxBytes):
		status, message = http.StatusRequestEntityTooLarge, "the request is too large"
	default:
		s.log.ErrorContext(c.Request().Context(), "request failed", "path", c.Request().URL.Path, "err", err)
	}
	if strings.HasPrefix(c.Request().URL.Path, "/api/") || c.Request().URL.Path == "/dev/token" {
		c.JSON(status, map[string]string{"error": message})
		return
	}
	s.renderProblem(c, status, message)
}

// problemHeading is the heading of the error page of status, in the reader's language.
func problemHeading(ctx context.Context, status int) string {
	switch status {
	case http.StatusBadRequest:
		return locale.T(ctx, "problem.bad_request")
	case http.StatusForbidden:
		return locale.T(ctx, "problem.forbidden")
	case http.StatusNotFound:
		return locale.T(ctx, "problem.not_found")
	case http.StatusRequestTimeout:
		return locale.T(ctx, "problem.timeout")
	case http.StatusMisdirectedRequest:
		return locale.T(ctx, "problem.misdirected")
	case http.StatusRequestEntityTooLarge:
		return locale.T(ctx, "problem.too_large")
	case http.StatusTooManyRequests:
		return locale.T(ctx, "problem.too_many")
	case http.StatusServiceUnavailable:
		return locale.T(ctx, "problem.unavailable")
	}
	return locale.T(ctx, "problem.title")
}
