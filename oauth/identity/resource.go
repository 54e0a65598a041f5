package identity

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/urlflow/urlflow/oauth"
	"github.com/urlflow/urlflow/state"
)

// DefaultClockSkew is the tolerance for exp and nbf between urlflow's clock and the
// issuer's.
const DefaultClockSkew = time.Minute

// ResourceServerConfig configures a ResourceServer.
type ResourceServerConfig struct {
	// Resource is urlflow's resource URL (public URL + /mcp): every accepted token must name
	// it in aud (RFC 8707).
	Resource string
	// Introspection, when set, verifies tokens that are not JWTs with RFC 7662 at the
	// issuer's introspection endpoint, with these client credentials.
	Introspection *ClientCredentials
	// ClockSkew is DefaultClockSkew if zero.
	ClockSkew time.Duration
}

// ClientCredentials identify urlflow to its issuer.
type ClientCredentials struct {
	ClientID     string
	ClientSecret string
}

// ResourceServer verifies the bearer tokens presented to urlflow's MCP endpoint and API.
// A JWT must be signed by a key the issuer publishes (keys rotate: the issuer's Keys fetch
// them again for an unknown key ID, at most once per interval), come from the issuer, name
// urlflow's resource in aud, and be within exp and nbf give or take the clock skew. A
// token that is not a JWT is checked by introspection when that is configured (an answer
// is believed for up to ActiveAnswerLifetime, or InactiveAnswerLifetime for a refusal), and
// refused otherwise. The user is the issuer and the token's sub.
type ResourceServer struct {
	issuer       *oauth.Server
	cfg          ResourceServerConfig
	introspected *introspectionCache
	now          func() time.Time
}

// NewResourceServer returns a ResourceServer for tokens of issuer.
func NewResourceServer(issuer *oauth.Server, cfg ResourceServerConfig) (*ResourceServer, error) {
	if cfg.ClockSkew == 0 {
		cfg.ClockSkew = DefaultClockSkew
	}
	if cfg.Introspection != nil && issuer.Metadata.IntrospectionEndpoint == "" {
		return nil, fmt.Errorf("issuer %s publishes no introspection endpoint", issuer.URL)
	}
	return &ResourceServer{issuer: issuer, cfg: cfg, introspected: newIntrospectionCache(), now: time.Now}, nil
}

// accessClaims are the claims urlflow reads from an access token (RFC 9068).
type accessClaims struct {
	Subject   string          `json:"sub"`
	Audience  audienceClaim   `json:"aud"`
	Expiry    *numericDate    `json:"exp"`
	NotBefore *numericDate    `json:"nbf"`
	Scope     string          `json:"scope"`
	Scp       json.RawMessage `json:"scp"`
	ClientID  string          `json:"client_id"`
	AZP       string          `json:"azp"`
	Act       *struct {
		Subject string `json:"sub"`
	} `json:"act"`
}

// numericDate is a JWT NumericDate (RFC 7519): seconds since the epoch, which may have a
// fraction. The fraction is dropped.
type numericDate int64

func (d *numericDate) UnmarshalJSON(b []byte) error {
	var secs float64
	if err := json.Unmarshal(b, &secs); err != nil {
		return err
	}
	if math.Abs(secs) > 1<<53 {
		return errors.New("date out of range")
	}
	*d = numericDate(secs)
	return nil
}

func (d numericDate) time() time.Time { return time.Unix(int64(d), 0) }

// audienceClaim is a JWT aud: one string or a list.
type audienceClaim []string

func (a *audienceClaim) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*a = audienceClaim{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return err
	}
	*a = many
	return nil
}

// Verify checks token and returns its identity. Errors wrap ErrInvalidToken and never
// contain the token.
func (r *ResourceServer) Verify(ctx context.Context, token string) (Claims, error) {
	if strings.Count(token, ".") != 2 {
		if r.cfg.Introspection != nil {
			return r.introspect(ctx, token)
		}
		return Claims{}, fmt.Errorf("%w: not a JWT", ErrInvalidToken)
	}
	// Signature and issuer are checked by go-oidc; audience and times here, with skew.
	t, err := r.issuer.Verify(ctx, token, oidc.Config{SkipClientIDCheck: true, SkipExpiryCheck: true})
	if errors.Is(err, oauth.ErrKeysUnavailable) {
		// The token may well be valid.
		return Claims{}, err
	}
	if err != nil {
		return Claims{}, fmt.Errorf("%w: %s", ErrInvalidToken, oidcReason(err))
	}
	var c accessClaims
	if err := t.Claims(&c); err != nil {
		return Claims{}, fmt.Errorf("%w: malformed claims", ErrInvalidToken)
	}
	return r.identity(c)
}

// identity applies the checks common to JWTs and introspected tokens.
func (r *ResourceServer) identity(c accessClaims) (Claims, error) {
	now := r.now()
	sub, exp, nbf := c.Subject, c.Expiry, c.NotBefore
	switch {
	case sub == "":
		return Claims{}, fmt.Errorf("%w: no subject", ErrInvalidToken)
	case !slices.Contains(c.Audience, r.cfg.Resource):
		return Claims{}, fmt.Errorf("%w: wrong audience (want %s)", ErrInvalidToken, r.cfg.Resource)
	case exp == nil:
		return Claims{}, fmt.Errorf("%w: no expiry", ErrInvalidToken)
	case now.After(exp.time().Add(r.cfg.ClockSkew)):
		return Claims{}, fmt.Errorf("%w: expired", ErrInvalidToken)
	case nbf != nil && now.Add(r.cfg.ClockSkew).Before(nbf.time()):
		return Claims{}, fmt.Errorf("%w: not valid yet", ErrInvalidToken)
	}
	claims := Claims{
		User:     state.User{Issuer: r.issuer.URL, Subject: sub},
		Expiry:   exp.time(),
		Scopes:   scopes(c.Scope, c.Scp),
		ClientID: cmp.Or(c.ClientID, c.AZP),
	}
	if c.Act != nil {
		if claims.Actor = c.Act.Subject; claims.Actor == "" {
			return Claims{}, fmt.Errorf("%w: an act claim without a subject", ErrInvalidToken)
		}
	}
	return claims, nil
}

// scopes reads the space-separated scope claim, or the scp list some issuers use.
func scopes(scope string, scp json.RawMessage) []string {
	if scope != "" {
		return strings.Fields(scope)
	}
	var list []string
	if json.Unmarshal(scp, &list) == nil {
		return list
	}
	var one string
	if json.Unmarshal(scp, &one) == nil {
		return strings.Fields(one)
	}
	return nil
}

// oidcReason names what go-oidc found wrong, without quoting the token.
func oidcReason(err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "different provider"):
		return "wrong issuer"
	case strings.Contains(msg, "malformed"): // before "signature": "malformed jwt: unexpected signature algorithm"
		return "malformed"
	case strings.Contains(msg, "signature"):
		return "bad signature"
	}
	return "not valid"
}
