package identity

import (
	"context"
	"crypto/sha256"
	"strings"
	"sync"
	"time"

	"github.com/urlflow/urlflow/internal/expiring"
)

// How long, and how many, accepted tokens Remember keeps.
const (
	// RememberedTokenLifetime is the longest a token is accepted without being verified
	// again; never past its expiry. A key the issuer withdraws from its key set stops
	// tokens it signed within this time.
	RememberedTokenLifetime = time.Minute
	// rememberedTokens bounds the tokens kept in memory.
	rememberedTokens = 10_000
)

// Remember returns a Verifier that remembers the tokens v accepted, by their SHA-256 (the
// token itself is never kept), for RememberedTokenLifetime and never past their expiry.
// An MCP client sends the same token with every request: its signature is then checked
// about once a minute instead of on every request. Only JWTs are remembered: an opaque
// token is introspected, and ResourceServer keeps the issuer's answers itself
// (ActiveAnswerLifetime), which remembering them again would stretch. What v refuses or
// cannot check is not remembered; a token without an expiry is not remembered either. The
// claims it returns are shared between requests and must not be changed. A v that already
// remembers is returned as it is, so that the parts of the HTTP surface that share a
// verifier share one memory.
func Remember(v Verifier) Verifier {
	if r, ok := v.(*remembering); ok {
		return r
	}
	return &remembering{v: v, now: time.Now, accepted: expiring.New[[sha256.Size]byte, Claims](rememberedTokens)}
}

type remembering struct {
	v   Verifier
	now func() time.Time

	mu       sync.Mutex
	accepted *expiring.Map[[sha256.Size]byte, Claims]
}

func (r *remembering) Verify(ctx context.Context, token string) (Claims, error) {
	if strings.Count(token, ".") != 2 { // not a JWT
		return r.v.Verify(ctx, token)
	}
	digest, now := sha256.Sum256([]byte(token)), r.now()
	r.mu.Lock()
	claims, ok := r.accepted.Get(digest, now)
	r.mu.Unlock()
	if ok {
		return claims, nil
	}
	claims, err := r.v.Verify(ctx, token)
	if err != nil {
		return Claims{}, err
	}
	until := now.Add(RememberedTokenLifetime)
	if claims.Expiry.Before(until) {
		until = claims.Expiry
	}
	if !until.After(now) { // expiring now, or without an expiry
		return claims, nil
	}
	r.mu.Lock()
	r.accepted.Set(digest, claims, until, now)
	r.mu.Unlock()
	return claims, nil
}
