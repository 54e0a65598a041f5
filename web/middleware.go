package web

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/urlflow/urlflow/internal/brand"
	"github.com/urlflow/urlflow/internal/locale"
	"github.com/urlflow/urlflow/internal/loopback"
	"github.com/urlflow/urlflow/internal/tracing"
	"github.com/urlflow/urlflow/templates"
	"github.com/urlflow/urlflow/upstream"
	"github.com/urlflow/urlflow/web/browser"
	"github.com/urlflow/urlflow/web/respond"
)

// Body limits. A secret form holds one field of at most a few KiB; the API takes tiny JSON,
// but for a proxy request, whose body may be as large as the largest max_request_bytes an
// API may have, in base64, with room for the rest of the request (each API's own limit is
// checked once it is decoded).
const (
	formBodyLimit  = 64 << 10
	apiBodyLimit   = 16 << 10
	proxyBodyLimit = upstream.MaxRequestBytes*4/3 + 64<<10
	proxyPath      = "/api/v1/proxy"
)

// limitAPIBody is limitBody for the API: apiBodyLimit, and proxyBodyLimit for a proxy
// request.
func limitAPIBody() echo.MiddlewareFunc {
	api, proxy := limitBody(apiBodyLimit), limitBody(proxyBodyLimit)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		small, large := api(next), proxy(next)
		return func(c echo.Context) error {
			if c.Path() == proxyPath {
				return large(c)
			}
			return small(c)
		}
	}
}

func securityHeaders(https bool) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			setSecurityHeaders(c.Response().Header(), c.Request().URL.Path, https)
			return next(c)
		}
	}
}

// withBrand renders every page of the request with the deployment's brand b.
func withBrand(b *brand.Brand) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			c.SetRequest(c.Request().WithContext(templates.WithBrand(c.Request().Context(), b)))
			return next(c)
		}
	}
}

// setSecurityHeaders sets on h, the header of the answer to a request for path, the
// headers every answer carries.
func setSecurityHeaders(h http.Header, path string, https bool) {
	h.Set("Content-Security-Policy", browser.ContentSecurityPolicy)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=(), payment=()")
	if !strings.HasPrefix(path, "/static/") {
		h.Set("Cache-Control", "no-store")
	}
	if https {
		h.Set("Strict-Transport-Security", "max-age=63072000")
	}
}

// loopbackHostOnly refuses requests whose Host is not a loopback name, so that a web page
// cannot reach a development server through DNS rebinding.
func loopbackHostOnly(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !loopback.HostPort(c.Request().Host) {
			return errNotLoopback
		}
		return next(c)
	}
}

var errNotLoopback = echo.NewHTTPError(http.StatusMisdirectedRequest,
	"this development server answers only to a loopback host name (127.0.0.1, [::1] or localhost)")

// limitBody refuses bodies over n bytes with 413, without reading them whole.
func limitBody(n int64) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			if r.ContentLength > n {
				return respond.ErrBodyTooLarge
			}
			r.Body = http.MaxBytesReader(c.Response(), r.Body, n)
			// Read a form now, so that a body over the limit (sent without a length) is
			// answered 413 here instead of reading as a form without fields later.
			if err := r.ParseForm(); err != nil {
				var tooLarge *http.MaxBytesError
				switch {
				case errors.As(err, &tooLarge):
					return respond.ErrBodyTooLarge
				case errors.Is(err, os.ErrDeadlineExceeded):
					return respond.ErrBodyTooSlow
				}
				return echo.NewHTTPError(http.StatusBadRequest, locale.T(r.Context(), "error.form_unreadable"))
			}
			return next(c)
		}
	}
}

// bodyReadDeadline gives a request with a body d to deliver it, so that a client that sends
// slowly holds a connection for d at most: past it, reading the body fails, the request is
// answered 408 and the connection is closed. The deadline ends with the body: once the body
// has been read to its end, net/http starts a read of its own to notice a client that goes
// away, and clears the read deadline for it (connReader.startBackgroundRead in net/http's
// server.go; TestAnswersOutlastTheBodyDeadline holds it to that), so that a long answer is
// not cut. A request without a body gets no deadline: that read has begun before the
// handler runs, and a deadline would end it and cancel the request's context. Nothing
// bounds writing: push waits and event streams run for minutes.
func bodyReadDeadline(d time.Duration) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			setBodyReadDeadline(c.Response(), c.Request(), d)
			return next(c)
		}
	}
}

// setBodyReadDeadline gives r d to deliver its body, if it has one (bodyReadDeadline).
func setBodyReadDeadline(w http.ResponseWriter, r *http.Request, d time.Duration) {
	if r.Body != nil && r.Body != http.NoBody {
		// An error means a ResponseWriter without deadlines, such as a test's recorder.
		http.NewResponseController(w).SetReadDeadline(time.Now().Add(d))
	}
}

// crossOriginProtection refuses cross-origin browser requests that change anything, by
// Sec-Fetch-Site and Origin. It complements the per-session CSRF token of every form.
func crossOriginProtection(next echo.HandlerFunc) echo.HandlerFunc {
	protection := http.NewCrossOriginProtection()
	return func(c echo.Context) error {
		if err := protection.Check(c.Request()); err != nil {
			return echo.NewHTTPError(http.StatusForbidden, locale.T(c.Request().Context(), "error.cross_origin"))
		}
		return next(c)
	}
}

func (s *Server) recoverPanics(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if p := recover(); p != nil {
				s.logPanic(c.Request(), p)
				err = echo.NewHTTPError(http.StatusInternalServerError)
			}
		}()
		return next(c)
	}
}

// logPanic logs p, recovered from serving r; it panics again with http.ErrAbortHandler,
// which net/http uses to abort an answer without a log.
func (s *Server) logPanic(r *http.Request, p any) {
	if p == http.ErrAbortHandler {
		panic(p)
	}
	s.log.ErrorContext(r.Context(), "panic serving request", "path", r.URL.Path, "panic", fmt.Sprint(p))
}

// logRequests logs every request (method, path but never the query, status, duration) and
// counts it in the metrics by route.
func (s *Server) logRequests(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		if tracing.Enabled() {
			c.SetRequest(c.Request().WithContext(tracing.StartVisit(c.Request().Context())))
		}
		err := next(c)
		if err != nil {
			c.Error(err)
		}
		s.logRequest(c.Request(), c.Path(), c.Response().Status, time.Since(start))
		return nil
	}
}

// logRequest logs request r (method, path but never the query, status, duration), counts
// it in the metrics under route, and names its span after route (with a span in the
// trace of the flow whose page it showed).
func (s *Server) logRequest(r *http.Request, route string, status int, took time.Duration) {
	s.metrics.Request(route, r.Method, status, took)
	tracing.Route(r.Context(), r.Method, route)
	tracing.EndVisit(r.Context(), r.Method, route)
	s.log.InfoContext(r.Context(), "http request", "method", r.Method, "path", r.URL.Path,
		"status", status, "duration_ms", took.Milliseconds())
}

func staticFiles() http.Handler {
	sub, err := fs.Sub(templates.Static, "static")
	if err != nil {
		panic(err) // the directory is embedded at build time
	}
	return http.FileServer(http.FS(sub))
}
