package identity

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/url"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/urlflow/urlflow/oauth"
	"github.com/urlflow/urlflow/state"
)

// BrowserSignIn signs people in to urlflow's own pages with OpenID Connect against the
// deployment's issuer: authorization code with PKCE (S256), a nonce in the ID token, and a
// state that the caller keeps in the browser session and spends once.
type BrowserSignIn struct {
	issuer   *oauth.Server
	clientID string
	config   oauth2.Config
	// operatorClaim names the ID token claim, and operatorValue its value (or one of its
	// values), that makes a user an operator (SignedIn.Operator); none if empty.
	operatorClaim, operatorValue string
}

// RecogniseOperators makes the users whose ID token has claim with value (or, for a list,
// among its values) operators: SignedIn.Operator.
func (b *BrowserSignIn) RecogniseOperators(claim, value string) {
	b.operatorClaim, b.operatorValue = claim, value
}

// hasOperatorClaim reports whether claims make their user an operator.
func (b *BrowserSignIn) hasOperatorClaim(claims map[string]any) bool {
	if b.operatorClaim == "" {
		return false
	}
	switch v := claims[b.operatorClaim].(type) {
	case string:
		return v == b.operatorValue
	case []any:
		for _, item := range v {
			if s, ok := item.(string); ok && s == b.operatorValue {
				return true
			}
		}
	}
	return false
}

// NewBrowserSignIn returns a BrowserSignIn with issuer for the client urlflow is registered
// as. redirectURL is urlflow's /auth/callback, exactly as registered at the issuer.
func NewBrowserSignIn(issuer *oauth.Server, client ClientCredentials, redirectURL string) *BrowserSignIn {
	return &BrowserSignIn{
		issuer: issuer, clientID: client.ClientID,
		config: oauth2.Config{
			ClientID: client.ClientID, ClientSecret: client.ClientSecret, RedirectURL: redirectURL,
			Endpoint: issuer.Endpoint(), Scopes: []string{oidc.ScopeOpenID, "profile", "email"},
		},
	}
}

// SignInAttempt is what a sign-in in progress keeps in the browser session until the
// issuer sends the browser back.
type SignInAttempt struct {
	State    string
	Nonce    string
	Verifier string
}

// Start begins a sign-in: it returns the attempt to keep and the issuer's URL to send the
// browser to.
func (b *BrowserSignIn) Start() (SignInAttempt, string) {
	a := SignInAttempt{State: rand.Text(), Nonce: rand.Text(), Verifier: oauth2.GenerateVerifier()}
	return a, b.config.AuthCodeURL(a.State, oauth2.S256ChallengeOption(a.Verifier), oidc.Nonce(a.Nonce))
}

// Errors of Finish that callers explain to the user.
var (
	// ErrSignInDenied: the user or the issuer refused the sign-in.
	ErrSignInDenied = errors.New("the sign-in was refused at the issuer")
	// ErrSignInState: the answer does not belong to the attempt kept in this browser (a
	// replay, another browser, or a forged request).
	ErrSignInState = errors.New("this sign-in answer does not belong to this browser")
)

// Finish completes attempt with the issuer's answer (the callback's query): it checks the
// state, the issuer (RFC 9207, when the issuer names itself), exchanges the code with the
// PKCE verifier, and verifies the ID token and its nonce.
func (b *BrowserSignIn) Finish(ctx context.Context, attempt SignInAttempt, query url.Values) (SignedIn, error) {
	if attempt.State == "" || query.Get("state") != attempt.State {
		return SignedIn{}, ErrSignInState
	}
	if iss := query.Get("iss"); iss != "" && iss != b.issuer.URL {
		return SignedIn{}, fmt.Errorf("%w: the answer names issuer %q", ErrSignInState, iss)
	}
	if e := query.Get("error"); e != "" {
		return SignedIn{}, fmt.Errorf("%w: %s", ErrSignInDenied, e)
	}
	ctx = oidc.ClientContext(ctx, b.issuer.Client)
	tok, err := b.config.Exchange(ctx, query.Get("code"), oauth2.VerifierOption(attempt.Verifier))
	if err != nil {
		return SignedIn{}, fmt.Errorf("exchange the sign-in code: %w", err)
	}
	raw, ok := tok.Extra("id_token").(string)
	if !ok {
		return SignedIn{}, errors.New("the issuer sent no ID token")
	}
	// The issuer's Keys, shared with the resource server: one fetch serves both.
	id, err := b.issuer.Verify(ctx, raw, oidc.Config{ClientID: b.clientID})
	if err != nil {
		return SignedIn{}, fmt.Errorf("verify the ID token: %s", oidcReason(err))
	}
	if id.Nonce != attempt.Nonce {
		return SignedIn{}, fmt.Errorf("%w: the ID token's nonce does not match", ErrSignInState)
	}
	var claims struct {
		Name              string `json:"name"`
		PreferredUsername string `json:"preferred_username"`
		Email             string `json:"email"`
	}
	id.Claims(&claims) // display only: a failure leaves the subject as the name
	name := claims.PreferredUsername
	for _, n := range []string{claims.Email, claims.Name, id.Subject} {
		if name == "" {
			name = n
		}
	}
	var all map[string]any
	id.Claims(&all) // a failure makes nobody an operator
	return SignedIn{User: state.User{Issuer: b.issuer.URL, Subject: id.Subject}, Name: name, Operator: b.hasOperatorClaim(all)}, nil
}

// SignedIn is the outcome of a browser sign-in.
type SignedIn struct {
	User state.User
	// Name is how to call the user on the pages (a username, an email, or the subject).
	Name string
	// Operator is set when the ID token has the operators' claim (RecogniseOperators).
	Operator bool
}
