package oauth

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// Server is an OpenID provider (or an OAuth authorization server that publishes the same
// metadata), as its discovery document describes it.
type Server struct {
	// URL is the issuer identifier, as configured and as the discovery document repeats it.
	URL string
	// Metadata is what the discovery document says beyond what go-oidc reads.
	Metadata Metadata
	// Provider is go-oidc's view of the server: endpoints and the keys that sign its tokens
	// (fetched again when a token names an unknown key).
	Provider *oidc.Provider
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
	// IssParameterSupported says that the server sends iss with every authorization
	// response (RFC 9207).
	IssParameterSupported    bool     `json:"authorization_response_iss_parameter_supported"`
	TokenEndpointAuthMethods []string `json:"token_endpoint_auth_methods_supported"`
}

// Discover reads the discovery document of issuerURL (OpenID Connect Discovery) with
// go-oidc, which also checks that the document names issuerURL as its issuer. client is
// used for everything urlflow asks the server (http.DefaultClient if nil).
func Discover(ctx context.Context, issuerURL string, client *http.Client) (*Server, error) {
	if client == nil {
		client = http.DefaultClient
	}
	provider, err := oidc.NewProvider(oidc.ClientContext(ctx, client), issuerURL)
	if err != nil {
		return nil, fmt.Errorf("discover issuer %s: %w", issuerURL, err)
	}
	s := &Server{URL: issuerURL, Provider: provider, Client: client}
	if err := provider.Claims(&s.Metadata); err != nil {
		return nil, fmt.Errorf("discover issuer %s: %w", issuerURL, err)
	}
	return s, nil
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
