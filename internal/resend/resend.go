// Package resend provides the HTTP client urlflow uses to talk to authorization servers
// (discovery, keys, introspection, token exchange, refresh, revocation): it sends a request
// again, on another connection, when the keep-alive connection it went out on had been
// closed by the server.
//
// A server closes an idle keep-alive connection after its own timeout (5 s for Node and
// Apache). A request that leaves on that connection at the same moment fails with a reset
// or an end of file, and net/http sends it again only if it is a GET or similar. Token
// requests are POSTs, so without this a code exchange fails now and then for nothing.
// Sending a POST again is right here: the server either never read it (the usual case),
// or it did and the second try gets a clear OAuth error, as a reused authorization code
// would; urlflow never acts on an answer it did not receive.
package resend

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptrace"

	"github.com/urlflow/urlflow/internal/buildinfo"
	"github.com/urlflow/urlflow/internal/tracing"
)

// attempts bounds the tries of one request: each failed try drops one stale connection,
// and the transport keeps at most a few idle connections per host.
const attempts = 3

// Client returns an http.Client like http.DefaultClient whose requests are sent again when
// a reused connection fails under them, each in a client span when tracing is on (the
// trace context is not sent: authorization servers are not urlflow's).
func Client() *http.Client {
	return &http.Client{Transport: tracing.Transport(Transport(http.DefaultTransport), false)}
}

// Transport wraps base (http.DefaultTransport if nil) so that a request is sent again when
// it failed, before any response, on a connection used before, and says it comes from
// urlflow (User-Agent, when the request names none). A request whose body cannot
// be read again, whose context has ended, or that timed out is not sent again, nor is one
// that failed on a new connection.
func Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{base: base}
}

type transport struct {
	base http.RoundTripper
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Header.Get("User-Agent") == "" {
		req = req.Clone(req.Context()) // a RoundTripper must not change the request it is given
		req.Header.Set("User-Agent", buildinfo.UserAgent())
	}
	for try := 1; ; try++ {
		var reused bool
		trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused }}
		attempt := req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
		if try > 1 && req.Body != nil && req.Body != http.NoBody {
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			attempt.Body = body
		}
		resp, err := t.base.RoundTrip(attempt)
		if err == nil || try == attempts || !reused || !replayable(req) || req.Context().Err() != nil || timedOut(err) {
			return resp, err
		}
	}
}

// replayable reports whether req's body can be read again.
func replayable(req *http.Request) bool {
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

func timedOut(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
