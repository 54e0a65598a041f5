package oauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/go-jose/go-jose/v4"
	"golang.org/x/oauth2"

	"github.com/urlflow/urlflow/internal/resend"
)

// Server is an OpenID provider (or an OAuth authorization server that publishes the same
// metadata), as its discovery document describes it.
type Server struct {
	// URL is the issuer identifier, as configured and as the discovery document repeats it.
	URL string
	// Metadata is what the discovery document says beyond what go-oidc reads.
	Metadata Metadata
	// Provider is go-oidc's view of the server's endpoints.
	Provider *oidc.Provider
	// Keys are the keys that sign the server's tokens, fetched at most once per
	// RefetchInterval whatever tokens urlflow is shown. Verify checks tokens with them.
	Keys *KeySet
	// Client is used for everything urlflow asks the server.
	Client *http.Client
}

// Metadata is the part of a discovery document that urlflow reads.
type Metadata struct {
	AuthorizationEndpoint string `json:"authorization_endpoint"`
	TokenEndpoint         string `json:"token_endpoint"`
	UserinfoEndpoint      string `json:"userinfo_endpoint"`
	RevocationEndpoint    string `json:"revocation_endpoint"`
	IntrospectionEndpoint string `json:"introspection_endpoint"`
	JWKSURI               string `json:"jwks_uri"`
	// SigningAlgorithms are the algorithms the server signs ID tokens with.
	SigningAlgorithms []string `json:"id_token_signing_alg_values_supported"`
	// IssParameterSupported says that the server sends iss with every authorization
	// response (RFC 9207).
	IssParameterSupported    bool     `json:"authorization_response_iss_parameter_supported"`
	TokenEndpointAuthMethods []string `json:"token_endpoint_auth_methods_supported"`
}

// Discover reads the discovery document of issuerURL (OpenID Connect Discovery) with
// go-oidc, which also checks that the document names issuerURL as its issuer. client is
// used for everything urlflow asks the server (resend.Client() if nil: a token request on a
// keep-alive connection the server just closed is sent again). The server's
// Keys are not fetched until a token needs them.
func Discover(ctx context.Context, issuerURL string, client *http.Client) (*Server, error) {
	if client == nil {
		client = resend.Client()
	}
	provider, err := oidc.NewProvider(oidc.ClientContext(ctx, client), issuerURL)
	if err != nil {
		return nil, fmt.Errorf("discover issuer %s: %w", issuerURL, err)
	}
	s := &Server{URL: issuerURL, Provider: provider, Client: client}
	if err := provider.Claims(&s.Metadata); err != nil {
		return nil, fmt.Errorf("discover issuer %s: %w", issuerURL, err)
	}
	s.Keys = NewKeySet(s.Metadata.JWKSURI, client, KeySetOptions{})
	return s, nil
}

// Verify checks raw, a JWT that names the server as its issuer, with go-oidc's verifier
// and config, against the server's Keys and signed with one of its SigningAlgorithms (RS256
// if it names none that go-oidc supports). When the keys could not be fetched, the error
// wraps ErrKeysUnavailable: go-oidc keeps only the text of a key set's error, so Verify
// keeps the error itself.
func (s *Server) Verify(ctx context.Context, raw string, config oidc.Config) (*oidc.IDToken, error) {
	if len(config.SupportedSigningAlgs) == 0 {
		for _, alg := range s.Metadata.SigningAlgorithms {
			if slices.Contains(signingAlgorithms, jose.SignatureAlgorithm(alg)) {
				config.SupportedSigningAlgs = append(config.SupportedSigningAlgs, alg)
			}
		}
	}
	keys := &keptError{KeySet: s.Keys}
	token, err := oidc.NewVerifier(s.URL, keys, &config).Verify(ctx, raw)
	if err != nil && errors.Is(keys.err, ErrKeysUnavailable) {
		return nil, fmt.Errorf("verify the token's signature: %w", keys.err)
	}
	return token, err
}

// keptError is a KeySet for one verification, which keeps the key set's error.
type keptError struct {
	*KeySet
	err error
}

func (k *keptError) VerifySignature(ctx context.Context, jwt string) ([]byte, error) {
	payload, err := k.KeySet.VerifySignature(ctx, jwt)
	k.err = err
	return payload, err
}

// Endpoint returns the server's authorization and token endpoints for golang.org/x/oauth2,
// with the client authentication its token endpoint asks for: HTTP basic when it offers
// client_secret_basic or names no method (basic is then the default, OpenID Connect
// Discovery 1.0, section 3), the form when it offers only client_secret_post. Left to
// guess, oauth2 tries one and then the other, which sends a failing code exchange twice.
func (s *Server) Endpoint() oauth2.Endpoint {
	e := s.Provider.Endpoint()
	methods := s.Metadata.TokenEndpointAuthMethods
	switch {
	case len(methods) == 0 || slices.Contains(methods, "client_secret_basic"):
		e.AuthStyle = oauth2.AuthStyleInHeader
	case slices.Contains(methods, "client_secret_post"):
		e.AuthStyle = oauth2.AuthStyleInParams
	}
	return e
}
