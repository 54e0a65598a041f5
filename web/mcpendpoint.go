package web

import (
	"net/http"
	"time"

	"github.com/urlflow/urlflow/internal/loopback"
)

// mcpRoute is the path of the MCP endpoint.
const mcpRoute = "/mcp"

// serveMCPOutsideEcho returns the server's handler: /mcp goes straight to mcp, with what
// echo's middleware gives every other answer (the body read deadline, panic recovery, the
// request log and metrics, the security headers and, in development, the loopback check),
// and everything else goes through echo.
//
// An open MCP stream keeps its handlers on its connection's goroutine stack for as long as
// it lasts. Without echo's layers, and with small frames in the handlers that call the
// next (identity.RequireBearer, limits.Limits.MCP), that stack stays small enough for the runtime to
// shrink the goroutine's to the size a bare go-sdk server's has (docs/performance.md).
func (s *Server) serveMCPOutsideEcho(mcp http.Handler, bodyTimeout time.Duration) http.Handler {
	https := s.opts.PublicURL.Scheme == "https"
	dev := s.opts.Dev
	endpoint := func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		defer s.finishMCPRequest(sw, r, start)
		setBodyReadDeadline(w, r, bodyTimeout)
		setSecurityHeaders(w.Header(), r.URL.Path, https)
		if dev && !loopback.HostPort(r.Host) {
			http.Error(sw, errNotLoopback.Message.(string), errNotLoopback.Code)
			return
		}
		mcp.ServeHTTP(sw, r)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && !s.draining.Load() { // what a drain waits for: the POSTs begun before it
			s.posts.Add(1)
			defer s.posts.Add(-1)
		}
		if r.URL.Path == mcpRoute {
			endpoint(w, r)
			return
		}
		s.echo.ServeHTTP(w, r)
	})
}

// finishMCPRequest answers a panic of the MCP endpoint with 500, and logs and counts the
// request.
func (s *Server) finishMCPRequest(sw *statusWriter, r *http.Request, start time.Time) {
	if p := recover(); p != nil {
		s.logPanic(r, p)
		if sw.status == 0 {
			http.Error(sw, somethingWentWrong, http.StatusInternalServerError)
		}
	}
	s.logRequest(r, mcpRoute, sw.statusOrOK(), time.Since(start))
}

// statusWriter remembers the status of the answer written through it. It passes Flush and
// the rest of http.ResponseController's methods on (Unwrap).
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// FlushError sends what was written so far, as the SDK's event streams need, and reports
// a connection that failed (http.ResponseController.Flush).
func (w *statusWriter) FlushError() error {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// Flush is FlushError for callers that want an http.Flusher.
func (w *statusWriter) Flush() { w.FlushError() }

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// statusOrOK returns the status written, or 200 for an answer that wrote nothing (net/http
// sends 200 then).
func (w *statusWriter) statusOrOK() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}
