package thirdparty

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"github.com/urlflow/urlflow/internal/display"
)

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
	switch {
	case iss == "" && p.issRequired:
		return errors.New("the provider's answer names no issuer, though it always does")
	case iss == "":
		return nil
	case p.dialect.issuerMatches != nil:
		if !p.dialect.issuerMatches(iss) {
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
	var (
		t   *Token
		err error
	)
	if p.dialect.exchange != nil {
		t, err = p.dialect.exchange(ctx, p, code, verifier)
	} else {
		t, err = p.standardExchange(ctx, code, verifier)
	}
	if err != nil {
		return nil, err
	}
	if t.Account, err = p.readAccount(ctx, t); err != nil {
		return nil, fmt.Errorf("read the connected account: %w", err)
	}
	t.Obtained = time.Now().UTC()
	return t, nil
}

func (p *Provider) oauthContext(ctx context.Context) context.Context {
	return context.WithValue(ctx, oauth2.HTTPClient, p.client)
}

func (p *Provider) standardExchange(ctx context.Context, code, verifier string) (*Token, error) {
	var opts []oauth2.AuthCodeOption
	if !p.noPKCE {
		opts = append(opts, oauth2.VerifierOption(verifier))
	}
	tok, err := p.config.Exchange(p.oauthContext(ctx), code, opts...)
	if err != nil {
		return nil, fmt.Errorf("exchange the code: %w", describeRetrieveError(err))
	}
	return fromOAuth2(tok, nil), nil
}

// Refresh returns a new token for t, keeping what the provider does not send again (the
// refresh token of a provider that does not rotate, the account). A grant the provider no
// longer honours is ErrReconnect.
func (p *Provider) Refresh(ctx context.Context, t *Token) (*Token, error) {
	if t.RefreshToken == "" {
		return nil, fmt.Errorf("%w: there is no refresh token", ErrReconnect)
	}
	var (
		next *Token
		err  error
	)
	if p.dialect.refresh != nil {
		next, err = p.dialect.refresh(ctx, p, t.RefreshToken)
	} else {
		next, err = p.standardRefresh(ctx, t.RefreshToken)
	}
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

func (p *Provider) standardRefresh(ctx context.Context, refreshToken string) (*Token, error) {
	src := p.config.TokenSource(p.oauthContext(ctx), &oauth2.Token{RefreshToken: refreshToken, Expiry: time.Unix(1, 0)})
	tok, err := src.Token()
	if err != nil {
		return nil, refreshError(err)
	}
	return fromOAuth2(tok, nil), nil
}

// refreshError turns a refused refresh (any 4xx: invalid_grant, bad_refresh_token, …)
// into ErrReconnect; a network failure stays what it is.
func refreshError(err error) error {
	var re *oauth2.RetrieveError
	// GitHub and Slack refuse with HTTP 200 and an error code.
	if errors.As(err, &re) && (re.Response == nil || refusal(re.Response.StatusCode) || (re.Response.StatusCode < 300 && re.ErrorCode != "")) {
		return fmt.Errorf("%w: %s", ErrReconnect, describeRetrieveError(err))
	}
	return fmt.Errorf("refresh the token: %w", describeRetrieveError(err))
}

// refusal reports whether an HTTP status of a refresh means the provider refuses the grant
// (as opposed to a passing trouble: a server error, rate limiting, a timeout).
func refusal(status int) bool {
	return status >= 400 && status < 500 && status != http.StatusTooManyRequests && status != http.StatusRequestTimeout
}

// describeRetrieveError keeps the provider's error code and drops its body, which may echo
// what was sent.
func describeRetrieveError(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		status := 0
		if re.Response != nil {
			status = re.Response.StatusCode
		}
		code := re.ErrorCode
		if code == "" {
			code = "no error code"
		}
		return fmt.Errorf("the provider answered %d (%s)", status, code)
	}
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return uerr.Err
	}
	return err
}

// fromOAuth2 converts an x/oauth2 token. scopes, when nil, come from the response.
func fromOAuth2(tok *oauth2.Token, scopes []string) *Token {
	t := &Token{AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken, TokenType: "Bearer", Expiry: tok.Expiry}
	if scopes == nil {
		if s, ok := tok.Extra("scope").(string); ok {
			scopes = scopeList(s)
		}
	}
	t.Scopes = scopes
	return t
}

// scopeList splits a granted scope list, which providers separate with spaces or commas.
func scopeList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == ',' })
}

// readAccount reads the connected account, its name cleaned (cleanAccount).
func (p *Provider) readAccount(ctx context.Context, t *Token) (Account, error) {
	var (
		a   Account
		err error
	)
	if p.dialect.account != nil {
		a, err = p.dialect.account(ctx, p, t)
	} else {
		var doc map[string]any
		if err = p.getJSON(ctx, p.account.URL, t.AccessToken, &doc); err == nil {
			a, err = accountFrom(doc, p.account)
		}
	}
	if err != nil {
		return Account{}, err
	}
	return cleanAccount(a), nil
}

// accountNameLimit is the most runes of an account's name that urlflow keeps.
const accountNameLimit = 100

// cleanAccount bounds and cleans the account's name with display.Clean when Exchange reads
// it, before the token is sealed and the connection stored: the provider (or whoever
// controls the account) chose the name, and it reaches the page, the history and the model
// (connect, list_connections). A name with nothing visible left gives way to the ID, cleaned
// the same way. The ID itself is kept as the provider sent it; it is not shown.
func cleanAccount(a Account) Account {
	a.Name = display.Clean(a.Name, accountNameLimit)
	if a.Name == "" {
		a.Name = display.Clean(a.ID, accountNameLimit)
	}
	return a
}

// accountFrom reads an account from doc with the dotted paths of cfg.
func accountFrom(doc map[string]any, cfg AccountConfig) (Account, error) {
	id := field(doc, cfg.ID)
	if id == "" {
		return Account{}, fmt.Errorf("the account document has no %q", cfg.ID)
	}
	name := field(doc, cfg.Name)
	for _, alt := range []string{"preferred_username", "email", "name", "login"} {
		if name == "" {
			name = field(doc, alt)
		}
	}
	if name == "" {
		name = id
	}
	return Account{ID: id, Name: name}, nil
}

// field returns the value at a dotted path of doc as a string ("" if absent).
func field(doc map[string]any, path string) string {
	var cur any = doc
	for _, part := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return ""
		}
		cur = m[part]
	}
	switch v := cur.(type) {
	case string:
		return v
	case float64:
		return strings.TrimSuffix(fmt.Sprintf("%.0f", v), ".0")
	case json.Number:
		return v.String()
	case nil:
		return ""
	}
	return fmt.Sprint(cur)
}

// Revoke revokes t at the provider, or returns ErrNoRevocation when the provider has no
// way to.
func (p *Provider) Revoke(ctx context.Context, t *Token) error {
	if p.dialect.revoke != nil {
		return p.dialect.revoke(ctx, p, t)
	}
	if p.revocation == "" {
		return ErrNoRevocation
	}
	return p.revokeRFC7009(ctx, t)
}

// revokeRFC7009 revokes the refresh token (which ends the grant) or, without one, the
// access token, at the RFC 7009 endpoint.
func (p *Provider) revokeRFC7009(ctx context.Context, t *Token) error {
	token, hint := t.RefreshToken, "refresh_token"
	if token == "" {
		token, hint = t.AccessToken, "access_token"
	}
	form := url.Values{"token": {token}, "token_type_hint": {hint}}
	if p.config.Endpoint.AuthStyle != oauth2.AuthStyleInHeader {
		form.Set("client_id", p.config.ClientID)
		form.Set("client_secret", p.config.ClientSecret)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.revocation, strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if p.config.Endpoint.AuthStyle == oauth2.AuthStyleInHeader {
		req.SetBasicAuth(url.QueryEscape(p.config.ClientID), url.QueryEscape(p.config.ClientSecret))
	}
	return p.send(req)
}

// do sends req. Its error names the method and host, never the URL (which may carry a
// token in its query).
func (p *Provider) do(req *http.Request) (*http.Response, error) {
	resp, err := p.client.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Host, err)
	}
	return resp, nil
}

// send sends req and wants a 2xx answer.
func (p *Provider) send(req *http.Request) error {
	resp, err := p.do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("%s %s answered %d", req.Method, req.URL.Host, resp.StatusCode)
	}
	return nil
}
