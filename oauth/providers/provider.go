package providers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"github.com/urlflow/urlflow/upstream"
)

// Errors of the provider exchanges that callers branch on.
var (
	// ErrProviderDenied: the user or the provider refused the authorization.
	ErrProviderDenied = errors.New("the provider refused the authorization")
	// ErrReconnect: the provider no longer honours the connection (revoked or expired
	// grant); the user must connect again.
	ErrReconnect = errors.New("the provider no longer accepts this connection")
	// ErrNoRevocation: the provider offers no way to revoke a token.
	ErrNoRevocation = errors.New("the provider offers no revocation")
)

// Provider is a configured third-party provider, ready to use.
type Provider struct {
	Name  string
	Label string
	// API is what call_api reaches with this provider's tokens.
	API *upstream.API

	config      oauth2.Config
	issuer      string // expected "iss" of authorization responses (RFC 9207), if known
	issRequired bool   // the provider says it always sends "iss"
	userinfo    string
	revocation  string
	account     AccountConfig
	authParams  map[string]string
	scopeSep    string // between scopes: " " by default, "," for Slack and Linear
	scopeParam  string // the authorization parameter of the scopes when not "scope" (Slack: user_scope)
	noPKCE      bool   // the provider's PKCE support is absent or has side effects
	dialect     dialect
	client      *http.Client
}

// dialect is how a provider exchanges, refreshes, reads the account and revokes: standard
// for the providers of the configuration file, a preset's own type for a built-in one.
type dialect interface {
	// exchange trades the code for a token.
	exchange(ctx context.Context, p *Provider, code, verifier string) (*Token, error)
	// refresh trades a refresh token for a new token.
	refresh(ctx context.Context, p *Provider, refreshToken string) (*Token, error)
	// account reads the connected account.
	account(ctx context.Context, p *Provider, t *Token) (Account, error)
	// revoke revokes t at the provider.
	revoke(ctx context.Context, p *Provider, t *Token) error
}

// ownAccountReader is a dialect that reads the connected account its own way (from the
// token answer, or from an API of its provider) rather than at the account URL.
type ownAccountReader interface {
	readsAccountItself()
}

// issuerPattern is a dialect whose issuer is a pattern rather than one URL (Microsoft's
// multi-tenant endpoints): it checks the iss of an authorization response itself.
type issuerPattern interface {
	issuerMatches(iss string) bool
}

// AuthCodeURL returns the provider's authorization URL for state, with the PKCE challenge
// of verifier (S256, unless the provider cannot take it) and scopes (the provider's
// defaults when empty).
func (p *Provider) AuthCodeURL(state, verifier string, scopes []string) string {
	cfg := p.config
	if len(scopes) > 0 {
		cfg.Scopes = scopes
	}
	cfg.Scopes = p.joinScopes(cfg.Scopes)
	var opts []oauth2.AuthCodeOption
	if !p.noPKCE {
		opts = append(opts, oauth2.S256ChallengeOption(verifier))
	}
	if p.scopeParam != "" && len(cfg.Scopes) > 0 {
		opts = append(opts, oauth2.SetAuthURLParam(p.scopeParam, cfg.Scopes[0]))
		cfg.Scopes = nil
	}
	for k, v := range p.authParams {
		opts = append(opts, oauth2.SetAuthURLParam(k, v))
	}
	return cfg.AuthCodeURL(state, opts...)
}

// AuthorizationOrigin returns the scheme and host of the authorization endpoint: the page
// that posts to urlflow and is redirected there must allow it as a form target.
func (p *Provider) AuthorizationOrigin() string {
	u, err := url.Parse(p.config.Endpoint.AuthURL)
	if err != nil {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// DefaultScopes returns the scopes requested when connect asks for none.
func (p *Provider) DefaultScopes() []string { return p.config.Scopes }

// joinScopes returns scopes as x/oauth2 wants them for this provider: as they are when the
// provider separates them with spaces, or as one comma-joined element.
func (p *Provider) joinScopes(scopes []string) []string {
	if p.scopeSep == " " || len(scopes) == 0 {
		return scopes
	}
	return []string{strings.Join(scopes, p.scopeSep)}
}

// CheckIssuer checks the iss parameter of an authorization response (RFC 9207): when the
// provider is known to send it, it must be there; when it is there, it must be the
// provider's issuer, by simple string comparison. An iss from a provider whose issuer
// urlflow does not know (explicit endpoints without issuer, presets of providers that have
// none) is refused: urlflow cannot tell it from another provider's, which is the mix-up the
// parameter defends against. RFC 9207, section 2.4: a client SHOULD discard a response with
// iss from a server that does not say it sends one, and may accept it by configuration;
// here, by the provider's issuer setting.
func (p *Provider) CheckIssuer(iss string) error {
	pattern, isPattern := p.dialect.(issuerPattern)
	switch {
	case iss == "" && p.issRequired:
		return errors.New("the provider's answer names no issuer, though it always does")
	case iss == "":
		return nil
	case isPattern:
		if !pattern.issuerMatches(iss) {
			return fmt.Errorf("the answer names issuer %q, not this provider", iss)
		}
		return nil
	case p.issuer == "":
		return fmt.Errorf("the answer names issuer %q, and no issuer is configured for this provider", iss)
	case iss != p.issuer:
		return fmt.Errorf("the answer names issuer %q, not this provider", iss)
	}
	return nil
}

// Exchange trades an authorization code for a token and reads the connected account.
func (p *Provider) Exchange(ctx context.Context, code, verifier string) (*Token, error) {
	t, err := p.dialect.exchange(ctx, p, code, verifier)
	if err != nil {
		return nil, err
	}
	a, err := p.dialect.account(ctx, p, t)
	if err != nil {
		return nil, fmt.Errorf("read the connected account: %w", err)
	}
	t.Account = cleanAccount(a)
	t.Obtained = time.Now().UTC()
	return t, nil
}

// Refresh returns a new token for t, keeping what the provider does not send again (the
// refresh token of a provider that does not rotate, the account). A grant the provider no
// longer honours is ErrReconnect.
func (p *Provider) Refresh(ctx context.Context, t *Token) (*Token, error) {
	if t.RefreshToken == "" {
		return nil, fmt.Errorf("%w: there is no refresh token", ErrReconnect)
	}
	next, err := p.dialect.refresh(ctx, p, t.RefreshToken)
	if err != nil {
		return nil, err
	}
	if next.RefreshToken == "" {
		next.RefreshToken = t.RefreshToken
	}
	if len(next.Scopes) == 0 {
		next.Scopes = t.Scopes
	}
	next.Account = t.Account
	next.Obtained = time.Now().UTC()
	return next, nil
}

// Revoke revokes t at the provider, or returns ErrNoRevocation when the provider has no
// way to.
func (p *Provider) Revoke(ctx context.Context, t *Token) error { return p.dialect.revoke(ctx, p, t) }
