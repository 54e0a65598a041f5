package identity

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/urlflow/urlflow/state"
)

// DevIssuer is the issuer of development identities. A development user is DevIssuer plus
// the name typed at the development sign-in, so the same name in the browser and in a
// token is the same user.
const DevIssuer = "urn:urlflow:dev"

// DevTokenTTL is how long a development token stays valid.
const DevTokenTTL = 30 * 24 * time.Hour

var devNamePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// ValidDevName reports whether name can name a development user: 1 to 64 of lower-case
// letters, digits, '.', '_' and '-', starting with a letter or digit.
func ValidDevName(name string) bool { return devNamePattern.MatchString(name) }

// Dev is the identity provider of `urlflow dev`: it issues and verifies HS256 JWTs
// for development users. Its key lives in the user's configuration directory, so tokens
// survive a restart. It is never used by `urlflow serve`.
type Dev struct {
	key      []byte
	audience string
	now      func() time.Time
}

// NewDev returns a development identity that signs with key and issues tokens for
// audience (the MCP resource URL).
func NewDev(key []byte, audience string) *Dev {
	return &Dev{key: key, audience: audience, now: time.Now}
}

// ForAudience returns a development identity with d's key for tokens of audience: the
// resource of a delegating service, whose users' tokens urlflow checks as evidence.
func (d *Dev) ForAudience(audience string) *Dev {
	return &Dev{key: d.key, audience: audience, now: d.now}
}

// User returns the development user called name.
func (d *Dev) User(name string) state.User {
	return state.User{Issuer: DevIssuer, Subject: name}
}

// Issue returns a token for the development user called name.
func (d *Dev) Issue(name string) (string, error) {
	if !ValidDevName(name) {
		return "", fmt.Errorf("development user name %q: use 1 to 64 of a-z, 0-9, '.', '_', '-'", name)
	}
	now := d.now()
	claims := jwt.RegisteredClaims{
		Issuer:    DevIssuer,
		Subject:   name,
		Audience:  jwt.ClaimStrings{d.audience},
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(DevTokenTTL)),
	}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(d.key)
	if err != nil {
		return "", fmt.Errorf("sign development token: %w", err)
	}
	return tok, nil
}

// Verify checks a development token: signature, issuer, audience and expiry.
func (d *Dev) Verify(_ context.Context, token string) (Claims, error) {
	var claims jwt.RegisteredClaims
	_, err := jwt.ParseWithClaims(token, &claims, func(*jwt.Token) (any, error) { return d.key, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithIssuer(DevIssuer),
		jwt.WithAudience(d.audience),
		jwt.WithExpirationRequired(),
		jwt.WithTimeFunc(d.now),
		jwt.WithLeeway(30*time.Second),
	)
	if err != nil {
		return Claims{}, fmt.Errorf("%w: %s", ErrInvalidToken, reason(err))
	}
	if !ValidDevName(claims.Subject) {
		return Claims{}, fmt.Errorf("%w: bad subject", ErrInvalidToken)
	}
	return Claims{User: d.User(claims.Subject), Expiry: claims.ExpiresAt.Time}, nil
}

// reason names what was wrong with a token without quoting any of it.
func reason(err error) string {
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return "expired"
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return "wrong audience"
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return "wrong issuer"
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return "bad signature"
	case errors.Is(err, jwt.ErrTokenMalformed):
		return "malformed"
	}
	return "not valid"
}

// DevOperator is the name of urlflow dev's development operator: signed in with it on the
// development sign-in, the operators' pages (/admin) are open.
const DevOperator = "operator"

// DevViewer is the name of urlflow dev's read-only operator: signed in with it, the
// operators' pages show everything and offer no action.
const DevViewer = "viewer"
