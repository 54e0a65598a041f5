package upstream

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
)

// ErrSecretInRequest: the request a tool asked for carries the secret it would be sent
// with, or a form of it. Nobody who is meant to use the secret through urlflow knows it, so
// such a request is a guess being tested (redaction of the answer would confirm it) or a
// secret being moved somewhere it does not belong. It is never sent.
var ErrSecretInRequest = errors.New("the request carries the secret itself")

// SecretInRequestError is the error of a request refused for carrying the secret. Where
// names the part of the request ("path", "query" or "body"); it never quotes the request.
type SecretInRequestError struct {
	Where string
}

func (e *SecretInRequestError) Error() string {
	return fmt.Sprintf("%v (in its %s), or a form of it; it was not sent", ErrSecretInRequest, e.Where)
}

func (e *SecretInRequestError) Unwrap() error { return ErrSecretInRequest }

// checkRequest returns a *SecretInRequestError if req carries a form of r's secret that
// redaction would replace in an answer (see redact), in its path, query, headers or body,
// as written or with its percent-encoding undone.
func (r *redactor) checkRequest(req Request) error {
	carries := func(texts ...string) bool {
		return slices.ContainsFunc(texts, func(text string) bool {
			return slices.ContainsFunc(decodings(text), r.shows)
		})
	}
	if carries(req.Path) {
		return &SecretInRequestError{Where: "path"}
	}
	for _, k := range slices.Sorted(maps.Keys(req.Query)) {
		if carries(append([]string{k}, req.Query[k]...)...) {
			return &SecretInRequestError{Where: "query"}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(req.Header)) {
		if carries(k, req.Header[k]) {
			return &SecretInRequestError{Where: "headers"}
		}
	}
	if carries(req.Body, req.ContentType) {
		return &SecretInRequestError{Where: "body"}
	}
	return nil
}

// decodings returns s as written and with its percent-encoding undone, the way a path
// segment, a query or a form body reaches the API.
func decodings(s string) []string {
	out := []string{s}
	if u, err := url.PathUnescape(s); err == nil && u != s {
		out = append(out, u)
	}
	if u, err := url.QueryUnescape(s); err == nil && u != s {
		out = append(out, u)
	}
	return out
}

// shows reports whether text has a form of the secret that redactText would replace: as
// written, or in a JSON token once its escapes are decoded.
func (r *redactor) shows(text string) bool {
	if r.text.in(text) {
		return true
	}
	for tok, err := range scanJSON(text) {
		if err != nil {
			return false
		}
		if _, ok := r.redactToken(tok.kind, text[tok.start:tok.end]); ok {
			return true
		}
	}
	return false
}
