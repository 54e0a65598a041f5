package identity

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/urlflow/urlflow/internal/expiring"
)

// How long urlflow believes an introspection answer, so that a token shown again does not
// make it ask the issuer again.
const (
	// ActiveAnswerLifetime bounds how long an active token is accepted without asking the
	// issuer again, and so how long a token revoked at the issuer may still be accepted.
	// An answer is never believed past the token's exp.
	ActiveAnswerLifetime = time.Minute
	// InactiveAnswerLifetime is how long a token the issuer called inactive (or that
	// urlflow refused for its claims) is refused without asking again.
	InactiveAnswerLifetime = 10 * time.Second
	// introspectionAnswers bounds the answers kept in memory.
	introspectionAnswers = 10_000
)

// introspectionCache keeps the outcomes of introspection by the SHA-256 of the token: the
// token itself is never kept. Errors that say nothing of the token (the issuer did not
// answer, or answered with an error) are not kept.
type introspectionCache struct {
	mu      sync.Mutex
	answers *expiring.Map[[sha256.Size]byte, introspected]
}

// introspected is the outcome of introspecting a token: its claims, or why it is refused
// (wrapping ErrInvalidToken).
type introspected struct {
	claims Claims
	err    error
}

func newIntrospectionCache() *introspectionCache {
	return &introspectionCache{answers: expiring.New[[sha256.Size]byte, introspected](introspectionAnswers)}
}

func (c *introspectionCache) get(token string, now time.Time) (introspected, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.answers.Get(sha256.Sum256([]byte(token)), now)
}

// keep keeps the outcome of introspecting token, if it is an answer about the token.
func (c *introspectionCache) keep(token string, claims Claims, err error, now time.Time) {
	var until time.Time
	switch {
	case err == nil:
		until = now.Add(ActiveAnswerLifetime)
		if claims.Expiry.Before(until) {
			until = claims.Expiry
		}
	case errors.Is(err, ErrInvalidToken):
		until = now.Add(InactiveAnswerLifetime)
	}
	if !until.After(now) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.answers.Set(sha256.Sum256([]byte(token)), introspected{claims: claims, err: err}, until, now)
}

// introspect checks an opaque token with RFC 7662, or with the answer kept from the last
// time.
func (r *ResourceServer) introspect(ctx context.Context, token string) (Claims, error) {
	if a, ok := r.introspected.get(token, r.now()); ok {
		a.claims.Scopes = slices.Clone(a.claims.Scopes)
		return a.claims, a.err
	}
	claims, err := r.askIssuer(ctx, token)
	r.introspected.keep(token, claims, err, r.now())
	return claims, err
}

// askIssuer sends token to the issuer's introspection endpoint.
func (r *ResourceServer) askIssuer(ctx context.Context, token string) (Claims, error) {
	in := r.cfg.Introspection
	form := url.Values{"token": {token}, "token_type_hint": {"access_token"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.issuer.Metadata.IntrospectionEndpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return Claims{}, fmt.Errorf("introspection request: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.SetBasicAuth(url.QueryEscape(in.ClientID), url.QueryEscape(in.ClientSecret))
	resp, err := r.issuer.Client.Do(req)
	if err != nil {
		return Claims{}, fmt.Errorf("introspection: %w", errors.Unwrap(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Claims{}, fmt.Errorf("introspection answered %d", resp.StatusCode)
	}
	var result struct {
		Active bool   `json:"active"`
		Issuer string `json:"iss"`
		accessClaims
	}
	if err := json.NewDecoder(http.MaxBytesReader(nil, resp.Body, 1<<20)).Decode(&result); err != nil {
		return Claims{}, fmt.Errorf("introspection answer: %w", err)
	}
	switch {
	case !result.Active:
		return Claims{}, fmt.Errorf("%w: not active", ErrInvalidToken)
	case result.Issuer != "" && result.Issuer != r.issuer.URL:
		return Claims{}, fmt.Errorf("%w: wrong issuer", ErrInvalidToken)
	}
	return r.identity(result.accessClaims)
}
