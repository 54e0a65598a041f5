package providers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"golang.org/x/oauth2"
)

// standard is the dialect of plain OAuth 2.0: x/oauth2's code exchange and refresh, the
// account read as JSON at the account URL, and revocation at an RFC 7009 endpoint when the
// provider has one. Most presets' dialects embed it and replace what their provider does
// differently; Notion's and Slack's differ in all four.
type standard struct{}

func (standard) exchange(ctx context.Context, p *Provider, code, verifier string) (*Token, error) {
	var opts []oauth2.AuthCodeOption
	if !p.noPKCE {
		opts = append(opts, oauth2.VerifierOption(verifier))
	}
	tok, err := p.config.Exchange(p.oauthContext(ctx), code, opts...)
	if err != nil {
		return nil, fmt.Errorf("exchange the code: %w", describeRetrieveError(err))
	}
	return fromOAuth2(tok), nil
}

func (standard) refresh(ctx context.Context, p *Provider, refreshToken string) (*Token, error) {
	src := p.config.TokenSource(p.oauthContext(ctx), &oauth2.Token{RefreshToken: refreshToken, Expiry: time.Unix(1, 0)})
	tok, err := src.Token()
	if err != nil {
		return nil, refreshError(err)
	}
	return fromOAuth2(tok), nil
}

func (standard) account(ctx context.Context, p *Provider, t *Token) (Account, error) {
	req, err := newBearerRequest(ctx, http.MethodGet, p.account.URL, t.AccessToken, nil)
	if err != nil {
		return Account{}, err
	}
	var doc map[string]any
	if err := p.doJSON(req, &doc); err != nil {
		return Account{}, err
	}
	return accountFrom(doc, p.account)
}

// revoke revokes the refresh token (which ends the grant) or, without one, the access
// token, at the RFC 7009 endpoint.
func (standard) revoke(ctx context.Context, p *Provider, t *Token) error {
	if p.revocation == "" {
		return ErrNoRevocation
	}
	token, hint := t.RefreshToken, "refresh_token"
	if token == "" {
		token, hint = t.AccessToken, "access_token"
	}
	form := url.Values{"token": {token}, "token_type_hint": {hint}}
	if p.config.Endpoint.AuthStyle != oauth2.AuthStyleInHeader {
		form.Set("client_id", p.config.ClientID)
		form.Set("client_secret", p.config.ClientSecret)
	}
	req, err := newFormRequest(ctx, p.revocation, form)
	if err != nil {
		return err
	}
	if p.config.Endpoint.AuthStyle == oauth2.AuthStyleInHeader {
		req.SetBasicAuth(url.QueryEscape(p.config.ClientID), url.QueryEscape(p.config.ClientSecret))
	}
	return p.send(req)
}

func (p *Provider) oauthContext(ctx context.Context) context.Context {
	return context.WithValue(ctx, oauth2.HTTPClient, p.client)
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

// fromOAuth2 converts an x/oauth2 token, its scopes from the response.
func fromOAuth2(tok *oauth2.Token) *Token {
	t := &Token{AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken, TokenType: "Bearer", Expiry: tok.Expiry}
	if s, ok := tok.Extra("scope").(string); ok {
		t.Scopes = scopeList(s)
	}
	return t
}
