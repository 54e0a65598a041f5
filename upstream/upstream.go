// Package upstream calls the APIs that stored secrets unlock, on the user's behalf. The
// secret is injected here, server-side, as the slot's configuration says, and nowhere else.
//
// The one idea to hold: no call leaves the slot's base URL. Paths are resolved under it
// and refused when they try to climb out (.., encoded dots or slashes, another scheme or
// host, bytes that are not UTF-8, and unless the slot allows them, characters beyond
// ASCII, some of which look like dots and slashes); redirects are followed only while
// they stay under it; the response is bounded in size and time; and the secret is
// redacted from whatever comes back.
package upstream

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/urlflow/urlflow/internal/buildinfo"

	"github.com/urlflow/urlflow/internal/tracing"
	"github.com/urlflow/urlflow/state"
)

// maxRedirects bounds the redirects followed under the base URL.
const maxRedirects = 5

// ResponseHeaderLimit bounds the response headers, all of them, selected or not, that the
// transport of New(nil) reads from an API: net/http holds a response's headers in memory
// whole before Call can count them, and its own bound is 10 MiB. A response with more is
// refused with ErrTooLarge. A slot's max_response_bytes bounds what Call returns of them.
const ResponseHeaderLimit = 64 << 10

// Redacted replaces the secret wherever it appears in a response.
const Redacted = "[redacted]"

// Errors callers branch on. Their messages are written for the user and never contain the
// secret.
var (
	// ErrOutside: the path would leave the slot's base URL.
	ErrOutside = errors.New("the path leaves the API's base URL")
	// ErrMethod: the method is not allowed for the slot.
	ErrMethod = errors.New("method not allowed for this secret")
	// ErrTooLarge is returned by Call when the body and the headers it would return are
	// larger together than the slot's max_response_bytes, and by Call and Check when the
	// API's headers, all of them, are larger than ResponseHeaderLimit (New's transport
	// stops reading them there).
	ErrTooLarge = errors.New("the response is too large")
	// ErrTimeout: the API did not answer in time.
	ErrTimeout = errors.New("the API did not answer in time")
	// ErrUnreachable: the API could not be reached.
	ErrUnreachable = errors.New("the API could not be reached")
	// ErrEncoding is returned by Call when the API answered in a content coding urlflow
	// cannot undo (zstd, for one), or with a body that does not decode in its coding:
	// urlflow returns no body it could not check for the secret.
	ErrEncoding = errors.New("the API answered with an encoding urlflow cannot check")
)

// Request is a call a tool or a delegating service asks for.
type Request struct {
	Method string
	// Path is relative to the slot's base URL.
	Path string
	// Query holds the parameters, a parameter repeated with several values.
	Query url.Values
	// Header holds the request's own headers, which checkHeaders allows (none from a tool).
	Header map[string]string
	// Body is sent as is, at most the API's MaxRequestBytes: as ContentType when set, else
	// as application/json when it is valid JSON and text/plain otherwise. Its bytes need
	// not be text.
	Body        string
	ContentType string
	// Retries is how many times (at most MaxRetries) an idempotent request is sent again
	// after an answer of 429, 502, 503 or 504 (retry.go).
	Retries int
	// ResponseHeaders names the response headers to return besides the API's own
	// response_headers, each a name or a prefix ending in "*", within the API's
	// allow_response_headers (respheaders.go).
	ResponseHeaders []string
}

// Response is what comes back, with the secret redacted.
type Response struct {
	Status int `json:"status"`
	// Headers holds the API's response headers and those the request selected.
	Headers map[string]string `json:"headers"`
	// Body is the body, decompressed when the API compressed it, as text, or base64 when it
	// is not valid UTF-8 (BodyEncoding says).
	Body         string `json:"body"`
	BodyEncoding string `json:"bodyEncoding"`
	// ConvertedFrom names the charset of a body the API sent in UTF-16, "utf-16le" or
	// "utf-16be", which urlflow converted to UTF-8 text (without its byte order mark) to
	// check it for the secret; empty otherwise.
	ConvertedFrom string `json:"convertedFrom,omitempty"`
	// Redirected names the redirect target when urlflow stopped at a redirect that leaves
	// the base URL, empty otherwise.
	Redirected string `json:"redirected,omitempty"`
	// Attempts is how many times the request was sent, when more than once (Retries).
	Attempts int `json:"attempts,omitempty"`
}

// Caller makes the calls. Its zero value is not usable; use New.
type Caller struct {
	transport http.RoundTripper
	// headerLimit is what transport reads of response headers at most when it is an
	// *http.Transport, for the errors that say so; 0 otherwise.
	headerLimit int64
}

// New returns a Caller on transport, or, if it is nil, on a transport of its own like
// http.DefaultTransport that reads at most ResponseHeaderLimit bytes of response headers.
func New(transport http.RoundTripper) *Caller {
	if transport == nil {
		transport = newTransport()
	}
	c := &Caller{transport: transport}
	if t, ok := transport.(*http.Transport); ok {
		c.headerLimit = t.MaxResponseHeaderBytes
		if c.headerLimit <= 0 {
			c.headerLimit = 10 << 20 // net/http's own
		}
	}
	c.transport = tracing.Transport(transport, false)
	return c
}

// newTransport returns a transport like http.DefaultTransport (proxy from the environment,
// HTTP/2, its timeouts) that reads at most ResponseHeaderLimit bytes of response headers,
// in HTTP/1 and HTTP/2, and keeps up to IdleConnsPerHost idle connections to each API.
func newTransport() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxResponseHeaderBytes = ResponseHeaderLimit
	tr.MaxIdleConnsPerHost = IdleConnsPerHost
	tr.MaxIdleConns = max(tr.MaxIdleConns, IdleConnsPerHost)
	return tr
}

// IdleConnsPerHost is how many idle HTTP/1 connections urlflow keeps to each API for the
// next request. net/http's default of 2 made every verification beyond two at once open a
// TCP connection and close it after one request: with 32 users entering keys at once, that
// was 3 % of urlflow's CPU (docs/performance.md).
const IdleConnsPerHost = 32

// Resolve returns the URL of path under a's base URL, or ErrOutside. path is taken
// relative to the base's path whether or not it starts with a slash. It refuses anything
// that could climb out or smuggle a different target: dot segments (also
// percent-encoded), encoded or literal backslashes, encoded slashes, empty segments,
// control characters (also percent-encoded), a query or a fragment (queries go in
// Request.Query), and anything that parses with a scheme or host. It refuses a path that
// is not UTF-8, as is or percent-encoded (overlong forms such as %c0%af, which some
// decoders read as "/", never are), and unless a.AllowNonASCIIPath, any character beyond
// ASCII, which may look like a dot or a slash to the API (U+2024 ONE DOT LEADER, U+FF0F
// FULLWIDTH SOLIDUS).
func (a *API) Resolve(path string) (*url.URL, error) {
	return resolve(a.Base(), path, a.AllowNonASCIIPath)
}

// resolve is Resolve on base, with characters beyond ASCII allowed when nonASCII.
func resolve(base *url.URL, path string, nonASCII bool) (*url.URL, error) {
	outside := func(why string) error { return fmt.Errorf("%w: %s", ErrOutside, why) }
	control := func(r rune) bool { return r < 0x20 || r == 0x7f }
	if strings.ContainsFunc(path, control) {
		return nil, outside("control characters are not allowed")
	}
	if strings.ContainsAny(path, "\\?#") {
		return nil, outside(`"\", "?" and "#" are not allowed in the path (put the query in query)`)
	}
	// Before the other checks, so that a URL is refused as one, not for its "//".
	if u, err := url.Parse(path); err != nil || u.Scheme != "" || u.Host != "" || u.Opaque != "" {
		return nil, outside("the path must be a path, not a URL")
	}
	lower := strings.ToLower(path)
	for _, enc := range []string{"%2e", "%2f", "%5c", "%00", "%25"} {
		if strings.Contains(lower, enc) {
			return nil, outside("encoded dots, slashes, backslashes and percent signs are not allowed")
		}
	}
	if strings.Contains(path, "//") {
		return nil, outside("empty path segments are not allowed")
	}
	rel := strings.TrimPrefix(path, "/")
	var segments []string
	if rel != "" {
		segments = strings.Split(rel, "/")
	}
	for _, seg := range segments {
		unescaped, err := url.PathUnescape(seg)
		if err != nil {
			return nil, outside("malformed percent-encoding")
		}
		// Some servers (Tomcat, Spring) drop ";params" from a segment, making "..;x" a "..".
		if dots, _, _ := strings.Cut(unescaped, ";"); dots == "." || dots == ".." {
			return nil, outside("dot segments are not allowed")
		}
		// Encoded ones too: the API decodes them, and may pass them on.
		if strings.ContainsFunc(unescaped, control) {
			return nil, outside("control characters are not allowed, encoded or not")
		}
		// Raw bytes beyond ASCII are still there once unescaped: one check sees both.
		if !utf8.ValidString(unescaped) {
			return nil, outside("the path must be valid UTF-8, as is and once percent-decoded (overlong forms such as %c0%af never are)")
		}
		if !nonASCII && strings.ContainsFunc(unescaped, func(r rune) bool { return r >= utf8.RuneSelf }) {
			return nil, outside("characters beyond ASCII are not allowed in the path, as is or percent-encoded, since some look like dots or slashes to an API; its configuration can allow them (api.allow_non_ascii_path: true)")
		}
	}
	u := *base
	u.RawQuery, u.Fragment = "", ""
	if rel != "" {
		unescaped, err := url.PathUnescape(rel)
		if err != nil {
			return nil, outside("malformed percent-encoding")
		}
		u.Path = base.Path + "/" + unescaped
		u.RawPath = base.EscapedPath() + "/" + rel
		if u.EscapedPath() != u.RawPath {
			u.RawPath = "" // let net/url escape it
		}
	}
	if !Within(base, &u) {
		return nil, outside("the result is not under the base URL")
	}
	return &u, nil
}

// Within reports whether u is base or under it: same scheme and host, and a path that is
// base's path or continues it after a slash.
func Within(base, u *url.URL) bool {
	if !strings.EqualFold(u.Scheme, base.Scheme) || !strings.EqualFold(u.Host, base.Host) || u.User != nil {
		return false
	}
	bp, p := base.EscapedPath(), u.EscapedPath()
	return p == bp || strings.HasPrefix(p, strings.TrimSuffix(bp, "/")+"/")
}

// under reports whether u is under api's base URL by the rules Resolve applies to a path.
// Within alone accepts a path such as /base/%2e%2e/x, which the API may decode to one
// outside.
func under(api *API, u *url.URL) bool {
	if !Within(api.Base(), u) {
		return false
	}
	_, err := api.Resolve(strings.TrimPrefix(u.EscapedPath(), api.Base().EscapedPath()))
	return err == nil
}

// Call makes req to api with secret injected, and returns the response with the secret
// redacted. A request that carries the secret itself is refused with a
// *SecretInRequestError and not sent. Errors wrap the sentinels above.
func (c *Caller) Call(ctx context.Context, api *API, secret state.Secret, req Request) (*Response, error) {
	if !api.Allows(req.Method) {
		return nil, fmt.Errorf("%w: %s (allowed: %s)", ErrMethod, strings.ToUpper(req.Method), strings.Join(api.Methods, ", "))
	}
	target, err := api.Resolve(req.Path)
	if err != nil {
		return nil, err
	}
	if q := api.Inject.Query; q != "" {
		if _, ok := req.Query[q]; ok {
			return nil, fmt.Errorf("the query parameter %q is set by urlflow; leave it out", q)
		}
	}
	if err := CheckOwnParts(api, req); err != nil {
		return nil, err
	}
	// One redactor for the whole call: building its forms is most of its cost.
	r := newRedactor(api, secret)
	if err := r.checkRequest(req); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, api.Timeout)
	defer cancel()
	out := outgoing{method: strings.ToUpper(req.Method), query: req.Query, header: req.Header, body: req.Body, contentType: req.ContentType}
	resp, attempts, err := c.doRetrying(ctx, api, secret, target, out, req.Retries)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := readBody(ctx, api, secret, r, req.ResponseHeaders, resp)
	if err != nil {
		return nil, err
	}
	answer := r.redact(api, req.ResponseHeaders, resp, body)
	if attempts > 1 {
		answer.Attempts = attempts
	}
	return answer, nil
}

// Check makes the verification request v to api with secret and reports whether the API
// answered one of the statuses that mean valid. The error explains a failure in words
// for the user.
func (c *Caller) Check(ctx context.Context, api *API, v *Verify, secret state.Secret) error {
	if v == nil || api == nil {
		return errors.New("this secret has no check configured")
	}
	target, err := api.Resolve(v.Path)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, api.Timeout)
	defer cancel()
	resp, err := c.do(ctx, api, secret, target, outgoing{method: v.Method})
	if err != nil {
		return err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, api.MaxResponseBytes))
	resp.Body.Close()
	if !slices.Contains(v.Status, resp.StatusCode) {
		return &RefusedError{Status: resp.StatusCode}
	}
	return nil
}

// RefusedError is Check's answer when the API answered a status that does not mean valid.
type RefusedError struct{ Status int }

func (e *RefusedError) Error() string {
	return fmt.Sprintf("the API answered %s", e.StatusLine())
}

// StatusLine is the status as HTTP writes it: "401 Unauthorized".
func (e *RefusedError) StatusLine() string {
	return strings.TrimSpace(fmt.Sprintf("%d %s", e.Status, http.StatusText(e.Status)))
}

// outgoing is what a request sends besides its target: checked before do sends it.
type outgoing struct {
	method      string
	query       url.Values
	header      map[string]string
	body        string
	contentType string
}

// do sends one request with the secret injected, following redirects only while they stay
// under the base URL; a redirect that leaves it is returned as the response, unfollowed.
func (c *Caller) do(ctx context.Context, api *API, secret state.Secret, target *url.URL, out outgoing) (*http.Response, error) {
	if api.unbound() {
		// A marker's host could be someone's: never send there.
		return nil, errUnbound
	}
	query := cloneValues(out.query)
	if q := api.Inject.Query; q != "" {
		query.Set(q, secret.Reveal())
	}
	target.RawQuery = query.Encode()
	var reader io.Reader
	if out.body != "" {
		reader = strings.NewReader(out.body)
	}
	if api.TraceContext {
		ctx = tracing.Propagate(ctx)
	}
	req, err := http.NewRequestWithContext(ctx, out.method, target.String(), reader)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrOutside, "the request could not be built")
	}
	setHeaders(req.Header, out.header)
	if out.body != "" {
		req.Header.Set("Content-Type", cmp.Or(out.contentType, contentType(out.body)))
	}
	req.Header.Set("Accept-Encoding", acceptEncoding)
	req.Header.Set("User-Agent", buildinfo.UserAgent())
	inject(api, secret, req.Header, req)
	client := &http.Client{
		Transport: c.transport,
		CheckRedirect: func(next *http.Request, via []*http.Request) error {
			if len(via) > maxRedirects || !under(api, next.URL) {
				return http.ErrUseLastResponse
			}
			// Same place, same credential: net/http keeps headers on same-host redirects;
			// put the secret back where a redirect may have dropped it.
			inject(api, secret, next.Header, next)
			if q := api.Inject.Query; q != "" {
				v := next.URL.Query()
				v.Set(q, secret.Reveal())
				next.URL.RawQuery = v.Encode()
			}
			return nil
		},
	}
	resp, err := client.Do(req)
	if err != nil {
		if why := headersRefused(err, c.headerLimit); why != "" {
			return nil, fmt.Errorf("%w: %s", ErrTooLarge, why)
		}
		return nil, transportError(ctx, api, secret, err)
	}
	return resp, nil
}

func inject(api *API, secret state.Secret, h http.Header, req *http.Request) {
	in := api.Inject
	switch {
	case in.Header != "":
		h.Set(in.Header, Value(in.Template, secret.Reveal()))
	case in.Basic != nil:
		req.SetBasicAuth(Value(in.Basic.Username, secret.Reveal()), Value(in.Basic.Password, secret.Reveal()))
	}
}

func cloneValues(v url.Values) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = slices.Clone(vs)
	}
	return out
}

func contentType(body string) string {
	if json.Valid([]byte(body)) {
		return "application/json"
	}
	return "text/plain; charset=utf-8"
}

// transportError describes a failed exchange without its URL, which could hold a secret
// injected as a query parameter, and without the secret, which the API's answer can quote
// (a malformed response is quoted in the error, and may repeat the request line).
func transportError(ctx context.Context, api *API, secret state.Secret, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%w: no answer within %s", ErrTimeout, api.Timeout)
	}
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err
	}
	msg := strings.ReplaceAll(err.Error(), api.Base().Host, "the API host")
	// The same redaction as a response's text: an error may quote what the API sent.
	return &UnreachableError{Detail: newRedactor(api, secret).redactText(msg)}
}

// UnreachableError is ErrUnreachable with what the network said (redacted: no URL, no
// secret), which pages show as it came.
type UnreachableError struct{ Detail string }

func (e *UnreachableError) Error() string { return ErrUnreachable.Error() + ": " + e.Detail }

// Is makes an UnreachableError ErrUnreachable for errors.Is.
func (e *UnreachableError) Is(target error) bool { return target == ErrUnreachable }

// headersRefused says why net/http stopped reading the API's response headers at limit,
// its transport's MaxResponseHeaderBytes, or returns "" when err is something else or
// limit is 0 (not net/http's transport). net/http has no error values for it, so its
// messages are matched (TestResponseHeadersAreBoundedAsTheyAreRead fails if they change).
func headersRefused(err error, limit int64) string {
	if limit == 0 {
		return ""
	}
	switch msg := err.Error(); {
	case strings.Contains(msg, "server response headers exceeded"), // HTTP/1
		strings.Contains(msg, "response header list larger than advertised limit"): // HTTP/2
		return fmt.Sprintf("its headers, selected or not, are over urlflow's limit of %d bytes for them", limit)
	case strings.Contains(msg, "connection error: COMPRESSION_ERROR"):
		// HTTP/2's decoder gives up so on a header longer than the limit, and on a header
		// block that is not valid HPACK, and does not say which.
		return fmt.Sprintf("one of its headers is longer than %d bytes, which urlflow does not read, or its HTTP/2 header compression is broken", limit)
	}
	return ""
}

// QueryOf returns the query of one value per parameter m, as Request.Query holds it.
func QueryOf(m map[string]string) url.Values {
	if m == nil {
		return nil
	}
	q := make(url.Values, len(m))
	for k, v := range m {
		q[k] = []string{v}
	}
	return q
}
