package upstream

import (
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"slices"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// The response headers a call returns: the API's response_headers always, and those a
// delegating service asks for by name or by prefix ("X-RateLimit-*") in its request, when
// the API's allow_response_headers covers them. A prefix never selects Set-Cookie, which
// carries the API's own session: only its name does, in both lists.

// MaxSelectedResponseHeaders bounds the names and prefixes a request asks for.
const MaxSelectedResponseHeaders = 32

// ErrResponseHeader: a request asked for a response header its API does not allow.
var ErrResponseHeader = errors.New("this response header is not the API's to return")

// headerPattern is a header name, or a prefix of names when it ends in "*".
type headerPattern string

// prefix returns the prefix of a pattern ending in "*", and whether it is one.
func (p headerPattern) prefix() (string, bool) {
	return strings.CutSuffix(string(p), "*")
}

// matches reports whether the header named name (canonical) is one p selects.
func (p headerPattern) matches(name string) bool {
	prefix, ok := p.prefix()
	if !ok {
		return strings.EqualFold(string(p), name)
	}
	return !cookieHeader(name) && len(name) >= len(prefix) && strings.EqualFold(name[:len(prefix)], prefix)
}

// covers reports whether every header that q selects, p selects too.
func (p headerPattern) covers(q headerPattern) bool {
	qprefix, qIsPrefix := q.prefix()
	if !qIsPrefix {
		return p.matches(string(q))
	}
	prefix, ok := p.prefix()
	return ok && len(qprefix) >= len(prefix) && strings.EqualFold(qprefix[:len(prefix)], prefix)
}

// cookieHeader reports whether name sets a cookie of the API's.
func cookieHeader(name string) bool {
	return strings.EqualFold(name, "Set-Cookie") || strings.EqualFold(name, "Set-Cookie2")
}

// canonicalPattern returns p with its name canonical ("x-ratelimit-*" is "X-Ratelimit-*"),
// or false when it is neither a header name nor one followed by "*".
func canonicalPattern(p string) (headerPattern, bool) {
	name, _ := strings.CutSuffix(p, "*")
	if name != "" && !httpguts.ValidHeaderFieldName(name) {
		return "", false
	}
	if name == "" {
		return headerPattern(p), p == "*"
	}
	return headerPattern(textproto.CanonicalMIMEHeaderKey(name) + strings.TrimPrefix(p, name)), true
}

// prepareResponseHeaders checks and canonicalizes the API's response_headers (names) and
// allow_response_headers (names or prefixes).
func (a *API) prepareResponseHeaders() []string {
	var problems []string
	if len(a.ResponseHeaders) == 0 {
		a.ResponseHeaders = []string{"Content-Type"}
	}
	for i, h := range a.ResponseHeaders {
		if !httpguts.ValidHeaderFieldName(h) {
			problems = append(problems, fmt.Sprintf("api.response_headers: %q is not a header name", h))
		}
		a.ResponseHeaders[i] = textproto.CanonicalMIMEHeaderKey(h)
	}
	for i, h := range a.AllowResponseHeaders {
		p, ok := canonicalPattern(h)
		if !ok {
			problems = append(problems, fmt.Sprintf(`api.allow_response_headers: %q is neither a header name nor a prefix of names ending in "*"`, h))
		}
		a.AllowResponseHeaders[i] = string(p)
	}
	return problems
}

// checkResponseHeaders refuses the names and prefixes a request asks for that its API's
// allow_response_headers (or response_headers) does not cover. The error says which by
// position, never quoting one: a service could send anything there, the secret too.
func checkResponseHeaders(api *API, want []string) error {
	if len(want) > MaxSelectedResponseHeaders {
		return fmt.Errorf("%w: at most %d names or prefixes", ErrResponseHeader, MaxSelectedResponseHeaders)
	}
	for i, w := range want {
		p, ok := canonicalPattern(w)
		if !ok {
			return fmt.Errorf(`%w: entry %d is neither a header name nor a prefix of names ending in "*"`, ErrResponseHeader, i+1)
		}
		covered := slices.ContainsFunc(api.AllowResponseHeaders, func(a string) bool { return headerPattern(a).covers(p) }) ||
			slices.ContainsFunc(api.ResponseHeaders, func(a string) bool { return headerPattern(a).covers(p) })
		if !covered {
			return fmt.Errorf("%w: entry %d is not in the API's allow-list (api.allow_response_headers: %s)",
				ErrResponseHeader, i+1, allowList(api))
		}
	}
	return nil
}

// allowList describes the response headers a request of api may ask for.
func allowList(api *API) string {
	all := append(slices.Clone(api.ResponseHeaders), api.AllowResponseHeaders...)
	return strings.Join(all, ", ")
}

// selectedHeaders returns the headers of resp that Call returns, as the API sent them: the
// API's response headers and those want selects (checked by checkResponseHeaders), the
// lines of each joined with ", ", and Location when resp is a redirect that urlflow did
// not follow.
func selectedHeaders(api *API, want []string, resp *http.Response) map[string]string {
	out := map[string]string{}
	add := func(name string) {
		if v := resp.Header.Values(name); len(v) > 0 {
			out[textproto.CanonicalMIMEHeaderKey(name)] = strings.Join(v, ", ")
		}
	}
	for _, name := range api.ResponseHeaders {
		add(name)
	}
	for _, w := range want {
		p, _ := canonicalPattern(w)
		if _, isPrefix := p.prefix(); !isPrefix {
			add(string(p))
			continue
		}
		for name := range resp.Header {
			if p.matches(name) {
				add(name)
			}
		}
	}
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		if loc := resp.Header.Get("Location"); loc != "" {
			out["Location"] = loc
		}
	}
	return out
}
