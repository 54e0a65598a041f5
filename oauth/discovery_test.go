package oauth

import (
	"testing"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/urlflow/urlflow/internal/issuertest"
)

func TestDiscoverReadsTheMetadataUrlflowUses(t *testing.T) {
	iss := issuertest.Start(t)
	s, err := Discover(t.Context(), iss.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.URL != iss.URL || s.Metadata.TokenEndpoint != iss.TokenEndpoint || s.Metadata.IntrospectionEndpoint != iss.IntrospectionEndpoint ||
		s.Metadata.AuthorizationEndpoint != iss.AuthorizationEndpoint {
		t.Fatalf("discovered %+v, want the endpoints of %s", s.Metadata, iss.URL)
	}
	if _, err := Discover(t.Context(), iss.URL+"/elsewhere", nil); err == nil {
		t.Fatal("discovery of an issuer whose document names another issuer succeeded")
	}
}

// TestEndpointAuthenticatesAsTheTokenEndpointAsks: oauth2 left to guess tries one way and
// then the other, which sends a refused code to the token endpoint twice.
func TestEndpointAuthenticatesAsTheTokenEndpointAsks(t *testing.T) {
	for _, tt := range []struct {
		methods []string
		want    oauth2.AuthStyle
	}{
		{nil, oauth2.AuthStyleInHeader}, // client_secret_basic is the default of discovery
		{[]string{"client_secret_basic"}, oauth2.AuthStyleInHeader},
		{[]string{"client_secret_post", "client_secret_basic"}, oauth2.AuthStyleInHeader},
		{[]string{"client_secret_post"}, oauth2.AuthStyleInParams},
		{[]string{"private_key_jwt"}, oauth2.AuthStyleAutoDetect},
	} {
		provider := (&oidc.ProviderConfig{IssuerURL: "https://idp.example", AuthURL: "https://idp.example/authorize",
			TokenURL: "https://idp.example/token"}).NewProvider(t.Context())
		s := &Server{URL: "https://idp.example", Provider: provider, Metadata: Metadata{TokenEndpointAuthMethods: tt.methods}}
		e := s.Endpoint()
		if e.AuthStyle != tt.want || e.TokenURL != "https://idp.example/token" || e.AuthURL != "https://idp.example/authorize" {
			t.Errorf("methods %v: endpoint %+v, want auth style %v", tt.methods, e, tt.want)
		}
	}
}
