package providers

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/urlflow/urlflow/internal/display"
	"github.com/urlflow/urlflow/upstream"
	"golang.org/x/oauth2"
)

// discoveryDocument is an OpenID provider's metadata for issuer, its endpoints under
// issuer + /oauth2.
func discoveryDocument(issuer string, issSupported bool, authMethods []string) string {
	doc := map[string]any{
		"issuer":                           issuer,
		"authorization_endpoint":           issuer + "/oauth2/authorize",
		"token_endpoint":                   issuer + "/oauth2/token",
		"userinfo_endpoint":                issuer + "/oauth2/userinfo",
		"revocation_endpoint":              issuer + "/oauth2/revoke",
		"jwks_uri":                         issuer + "/oauth2/keys",
		"response_types_supported":         []string{"code"},
		"code_challenge_methods_supported": []string{"S256"},
		"authorization_response_iss_parameter_supported": issSupported,
	}
	if authMethods != nil {
		doc["token_endpoint_auth_methods_supported"] = authMethods
	}
	b, _ := json.Marshal(doc)
	return string(b)
}

func TestDiscoveredProviderFollowsItsMetadata(t *testing.T) {
	tests := []struct {
		name         string
		issuer       string
		authMethods  []string
		issSupported bool
		basic        bool // the client authenticates with HTTP basic
	}{
		{name: "basic only, iss announced", issuer: "https://idp.example", authMethods: []string{"client_secret_basic"}, issSupported: true, basic: true},
		{name: "post and basic, issuer with a path", issuer: "https://idp.example/realms/acme",
			authMethods: []string{"client_secret_basic", "client_secret_post", "private_key_jwt"}},
		{name: "no methods listed", issuer: "https://idp.example"},
		{name: "loopback over http", issuer: "http://127.0.0.1:9", authMethods: []string{"client_secret_post"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStandIn(t)
			base, _ := url.Parse(tt.issuer)
			at := base.Host + base.Path
			s.handle("GET "+at+"/.well-known/openid-configuration", replyJSON(200, discoveryDocument(tt.issuer, tt.issSupported, tt.authMethods)))
			cfg := testConfig("acme")
			cfg.Issuer = tt.issuer
			p := s.provider(t, cfg)
			if r := s.only(t); r.Header.Get("Authorization") != "" {
				t.Errorf("discovery sent Authorization %q", r.Header.Get("Authorization"))
			}
			s.reset()

			u, _ := url.Parse(p.AuthCodeURL(testState, testVerifier, nil))
			if got := u.Scheme + "://" + u.Host + u.Path; got != tt.issuer+"/oauth2/authorize" {
				t.Errorf("authorization endpoint %s", got)
			}
			wantValues(t, "authorization URL", u.Query(), map[string]string{"client_id": testClientID, "redirect_uri": testRedirectURI,
				"state": testState, "scope": "openid profile email", "code_challenge": oauth2.S256ChallengeFromVerifier(testVerifier), "code_challenge_method": "S256"})

			for iss, ok := range map[string]bool{"": !tt.issSupported, tt.issuer: true, tt.issuer + "/": false, "https://evil.example": false} {
				if err := p.CheckIssuer(iss); (err == nil) != ok {
					t.Errorf("CheckIssuer(%q) = %v, want ok %v", iss, err, ok)
				}
			}

			s.handle("POST "+at+"/oauth2/token", replyJSON(200, `{"access_token":"at-1","token_type":"Bearer","expires_in":300,"refresh_token":"rt-1","scope":"openid profile email","id_token":"x.y.z"}`))
			s.handle("GET "+at+"/oauth2/userinfo", replyJSON(200, `{"sub":"248289761001","preferred_username":"j.doe","email":"janedoe@example.com"}`))
			tok, err := p.Exchange(context.Background(), testCode, testVerifier)
			if err != nil {
				t.Fatalf("Exchange: %v", err)
			}
			wantToken(t, tok, Token{AccessToken: "at-1", RefreshToken: "rt-1", TokenType: "Bearer", Scopes: []string{"openid", "profile", "email"},
				Account: Account{ID: "248289761001", Name: "j.doe"}}, 300*time.Second)
			reqs := s.requests()
			if len(reqs) != 2 {
				t.Fatalf("sent %q, want the token request and the userinfo request", routesOf(reqs))
			}
			wantClientAuth(t, reqs[0], tt.basic)
			wantValues(t, "token request", reqs[0].form(t), map[string]string{"code": testCode, "code_verifier": testVerifier, "grant_type": "authorization_code"})
			reqs[1].wantBearer(t, "at-1")
			s.reset()

			s.handle("POST "+at+"/oauth2/revoke", reply(200, "text/plain", ""))
			if err := p.Revoke(context.Background(), tok); err != nil {
				t.Fatalf("Revoke: %v", err)
			}
			r := s.only(t)
			wantClientAuth(t, r, tt.basic)
			wantValues(t, "revocation", r.form(t), map[string]string{"token": "rt-1", "token_type_hint": "refresh_token"})
		})
	}
}

// wantClientAuth fails the test unless r authenticates the client with HTTP basic (basic)
// or with client_id and client_secret in its form.
func wantClientAuth(t *testing.T, r sentRequest, basic bool) {
	t.Helper()
	if basic {
		r.wantBasicClient(t)
		wantValues(t, r.route(), r.form(t), map[string]string{"client_secret": ""})
		return
	}
	r.wantNoAuthorization(t)
	wantValues(t, r.route(), r.form(t), map[string]string{"client_id": testClientID, "client_secret": testClientSecret})
}

func TestDiscoveryIsRefused(t *testing.T) {
	tests := []struct {
		name   string
		issuer string
		answer string // the discovery document; none if empty
		closed bool
		want   string
	}{
		{name: "a document naming another issuer", issuer: "https://idp.example", answer: discoveryDocument("https://evil.example", true, nil),
			want: `provider acme: issuer: discover issuer https://idp.example: oidc: issuer URL provided to client ("https://idp.example") did not match the issuer URL returned by provider ("https://evil.example")`},
		{name: "a document naming the issuer with a trailing slash", issuer: "https://idp.example", answer: discoveryDocument("https://idp.example/", false, nil),
			want: `returned by provider ("https://idp.example/")`},
		{name: "no document", issuer: "https://idp.example", want: "provider acme: issuer: discover issuer https://idp.example: 404 Not Found"},
		{name: "an unreachable issuer", issuer: "https://idp.example", closed: true, want: `provider acme: issuer: discover issuer https://idp.example: Get "https://idp.example/.well-known/openid-configuration"`},
		{name: "endpoints over plain http", issuer: "https://idp.example",
			answer: strings.ReplaceAll(discoveryDocument("https://idp.example", false, nil), `"https://idp.example/`, `"http://idp.example/`),
			want:   `authorization_url must be an https URL, got "http://idp.example/oauth2/authorize"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStandIn(t)
			if tt.answer != "" {
				s.handle("GET idp.example/.well-known/openid-configuration", replyJSON(200, tt.answer))
			}
			if tt.closed {
				s.srv.Close()
			}
			cfg := testConfig("acme")
			cfg.Issuer = tt.issuer
			_, err := s.newProviders(cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New: %v, want %q", err, tt.want)
			}
			wantNoSecret(t, err)
		})
	}
}

func TestPlainHTTPIssuerIsNotAskedForItsEndpoints(t *testing.T) {
	s := newStandIn(t)
	s.handle("GET idp.example/.well-known/openid-configuration", replyJSON(200, discoveryDocument("http://idp.example", false, nil)))
	cfg := testConfig("acme")
	cfg.Issuer = "http://idp.example"
	_, err := s.newProviders(cfg)
	if err == nil || !strings.Contains(err.Error(), `provider acme: issuer must be an https URL, got "http://idp.example"`) {
		t.Fatalf("New: %v", err)
	}
	if reqs := s.requests(); len(reqs) != 0 {
		t.Errorf("sent %q over plain http", routesOf(reqs))
	}
}

// acmeConfig is a provider without discovery, configured with explicit endpoints.
func acmeConfig(tokenAuth string) Config {
	cfg := testConfig("acme")
	cfg.Label = "Acme"
	cfg.AuthorizationURL = "https://auth.acme.example/oauth/authorize"
	cfg.TokenURL = "https://auth.acme.example/oauth/token"
	cfg.RevocationURL = "https://auth.acme.example/oauth/revoke"
	cfg.Scopes = []string{"read", "write"}
	cfg.AuthParams = map[string]string{"audience": "https://api.acme.example"}
	cfg.TokenAuth = tokenAuth
	cfg.Account = &AccountConfig{URL: "https://api.acme.example/v1/me", ID: "data.user.id", Name: "data.user.handle"}
	return cfg
}

func TestExplicitEndpointsProvider(t *testing.T) {
	for _, tt := range []struct {
		tokenAuth string
		basic     bool
	}{{"", false}, {"post", false}, {"basic", true}} {
		t.Run("token_auth "+tt.tokenAuth, func(t *testing.T) {
			s := newStandIn(t)
			p := s.provider(t, acmeConfig(tt.tokenAuth))
			if p.Label != "Acme" || p.API != nil {
				t.Errorf("provider %+v", p)
			}

			u, _ := url.Parse(p.AuthCodeURL(testState, testVerifier, nil))
			if got := u.Host + u.Path; got != "auth.acme.example/oauth/authorize" {
				t.Errorf("authorization endpoint %s", got)
			}
			wantValues(t, "authorization URL", u.Query(), map[string]string{"scope": "read write", "audience": "https://api.acme.example",
				"code_challenge": oauth2.S256ChallengeFromVerifier(testVerifier), "client_id": testClientID, "redirect_uri": testRedirectURI})
			if err := p.CheckIssuer(""); err != nil {
				t.Errorf("CheckIssuer without iss: %v", err)
			}
			// Without an issuer urlflow cannot tell Acme's iss from another provider's.
			if err := p.CheckIssuer("https://auth.acme.example"); err == nil || !strings.Contains(err.Error(), "no issuer is configured") {
				t.Errorf("CheckIssuer of an iss without a configured issuer: %v, want a refusal that says why", err)
			}

			s.handle("POST auth.acme.example/oauth/token", replyJSON(200, `{"access_token":"acme-at","token_type":"bearer","expires_in":600,"refresh_token":"acme-rt","scope":"read write"}`))
			// An ID beyond 2^53 is read as it was sent.
			s.handle("GET api.acme.example/v1/me", replyJSON(200, `{"data":{"user":{"id":1234567890123456789,"handle":"ada","email":"ada@example.com"}}}`))
			tok, err := p.Exchange(context.Background(), testCode, testVerifier)
			if err != nil {
				t.Fatalf("Exchange: %v", err)
			}
			wantToken(t, tok, Token{AccessToken: "acme-at", RefreshToken: "acme-rt", TokenType: "Bearer", Scopes: []string{"read", "write"},
				Account: Account{ID: "1234567890123456789", Name: "ada"}}, 10*time.Minute)
			reqs := s.requests()
			if got := routesOf(reqs); len(got) != 2 || got[0] != "POST auth.acme.example/oauth/token" || got[1] != "GET api.acme.example/v1/me" {
				t.Fatalf("sent %q", got)
			}
			wantClientAuth(t, reqs[0], tt.basic)
			wantValues(t, "token request", reqs[0].form(t), map[string]string{"code": testCode, "redirect_uri": testRedirectURI, "code_verifier": testVerifier})
			reqs[1].wantBearer(t, "acme-at")
			s.reset()

			s.handle("POST auth.acme.example/oauth/token", replyJSON(200, `{"access_token":"acme-at-2","token_type":"bearer","expires_in":600,"refresh_token":"acme-rt-2"}`))
			next, err := p.Refresh(context.Background(), tok)
			if err != nil {
				t.Fatalf("Refresh: %v", err)
			}
			wantToken(t, next, Token{AccessToken: "acme-at-2", RefreshToken: "acme-rt-2", TokenType: "Bearer", Scopes: []string{"read", "write"},
				Account: tok.Account}, 10*time.Minute)
			r := s.only(t)
			wantClientAuth(t, r, tt.basic)
			wantValues(t, "refresh request", r.form(t), map[string]string{"grant_type": "refresh_token", "refresh_token": "acme-rt"})
			s.reset()

			s.handle("POST auth.acme.example/oauth/revoke", reply(200, "text/plain", ""))
			if err := p.Revoke(context.Background(), next); err != nil {
				t.Fatalf("Revoke: %v", err)
			}
			r = s.only(t)
			wantClientAuth(t, r, tt.basic)
			wantValues(t, "revocation", r.form(t), map[string]string{"token": "acme-rt-2", "token_type_hint": "refresh_token"})
		})
	}
}

// A provider with explicit endpoints and an issuer is not discovered (it may have no
// discovery document) and its authorization responses' iss is checked against the issuer
// (RFC 9207): the right one passes, another is refused, and none passes, since such a
// provider has not said that it always sends one.
func TestExplicitEndpointsWithAnIssuerCheckItsIssWithoutDiscovery(t *testing.T) {
	const issuer = "https://auth.acme.example"
	s := newStandIn(t)
	cfg := acmeConfig("")
	cfg.Issuer = issuer
	p := s.provider(t, cfg)
	if reqs := s.requests(); len(reqs) != 0 {
		t.Errorf("configuring the provider sent %q, want nothing", routesOf(reqs))
	}
	u, _ := url.Parse(p.AuthCodeURL(testState, testVerifier, nil))
	if got := u.Host + u.Path; got != "auth.acme.example/oauth/authorize" {
		t.Errorf("authorization endpoint %s, want the configured one", got)
	}
	if got := p.DefaultScopes(); !slices.Equal(got, cfg.Scopes) {
		t.Errorf("default scopes %q, want the configured %q", got, cfg.Scopes)
	}
	for _, tt := range []struct {
		iss string
		ok  bool
	}{
		{issuer, true},
		{"", true},
		{"https://evil.example", false},
		{issuer + "/", false},
		{"https://AUTH.acme.example", false},
		{"auth.acme.example", false},
	} {
		if err := p.CheckIssuer(tt.iss); (err == nil) != tt.ok {
			t.Errorf("CheckIssuer(%q) = %v, want ok %v", tt.iss, err, tt.ok)
		}
	}

	// With one endpoint only, the issuer is still discovered for the other.
	s.handle("GET idp.example/.well-known/openid-configuration", replyJSON(200, discoveryDocument("https://idp.example", true, nil)))
	cfg = acmeConfig("")
	cfg.Issuer, cfg.TokenURL = "https://idp.example", ""
	p = s.provider(t, cfg)
	if got := routesOf(s.requests()); !slices.Equal(got, []string{"GET idp.example/.well-known/openid-configuration"}) {
		t.Errorf("sent %q, want the discovery", got)
	}
	u, _ = url.Parse(p.AuthCodeURL(testState, testVerifier, nil))
	if got := u.Host + u.Path; got != "auth.acme.example/oauth/authorize" {
		t.Errorf("authorization endpoint %s, want the configured one", got)
	}
	if err := p.CheckIssuer(""); err == nil {
		t.Error("CheckIssuer accepts no iss from a provider whose metadata says it always sends one")
	}
}

func TestRFC7009Revocation(t *testing.T) {
	t.Run("without a refresh token the access token is revoked", func(t *testing.T) {
		s := newStandIn(t)
		p := s.provider(t, acmeConfig("basic"))
		s.handle("POST auth.acme.example/oauth/revoke", reply(200, "text/plain", ""))
		if err := p.Revoke(context.Background(), &Token{AccessToken: "only-access"}); err != nil {
			t.Fatal(err)
		}
		wantValues(t, "revocation", s.only(t).form(t), map[string]string{"token": "only-access", "token_type_hint": "access_token"})
	})
	t.Run("a refusal is an error without secrets", func(t *testing.T) {
		s := newStandIn(t)
		p := s.provider(t, acmeConfig("post"))
		s.handle("POST auth.acme.example/oauth/revoke", replyJSON(400, `{"error":"unsupported_token_type","error_description":"old-refresh-token"}`))
		err := p.Revoke(context.Background(), connected())
		if err == nil || !strings.Contains(err.Error(), "400") {
			t.Fatalf("Revoke: %v", err)
		}
		wantNoSecret(t, err, "old-refresh-token", "old-access-token")
	})
	t.Run("an unreachable endpoint is an error without secrets", func(t *testing.T) {
		s := newStandIn(t)
		p := s.provider(t, acmeConfig("post"))
		s.srv.Close()
		err := p.Revoke(context.Background(), connected())
		if err == nil || errors.Is(err, ErrNoRevocation) {
			t.Fatalf("Revoke: %v", err)
		}
		wantNoSecret(t, err, "old-refresh-token", "old-access-token")
	})
	t.Run("no revocation endpoint", func(t *testing.T) {
		s := newStandIn(t)
		cfg := acmeConfig("")
		cfg.RevocationURL = ""
		p := s.provider(t, cfg)
		if err := p.Revoke(context.Background(), connected()); !errors.Is(err, ErrNoRevocation) {
			t.Fatalf("Revoke: %v, want ErrNoRevocation", err)
		}
		if reqs := s.requests(); len(reqs) != 0 {
			t.Errorf("sent %q", routesOf(reqs))
		}
	})
}

func TestExplicitEndpointsOverrideAPreset(t *testing.T) {
	s := newStandIn(t)
	p := s.preset(t, "gitlab", func(c *Config) {
		c.Label = "Acme GitLab"
		c.AuthorizationURL = "https://gitlab.acme.example/oauth/authorize"
		c.TokenURL = "https://gitlab.acme.example/oauth/token"
		c.RevocationURL = "https://gitlab.acme.example/oauth/revoke"
		c.Account = &AccountConfig{URL: "https://gitlab.acme.example/api/v4/user"}
	})
	if p.Label != "Acme GitLab" {
		t.Errorf("label %q", p.Label)
	}
	if got := p.AuthorizationOrigin(); got != "https://gitlab.acme.example" {
		t.Errorf("AuthorizationOrigin %s", got)
	}
	s.handle("POST gitlab.acme.example/oauth/token", replyJSON(200, `{"access_token":"at","token_type":"bearer","expires_in":7200,"refresh_token":"rt"}`))
	s.handle("GET gitlab.acme.example/api/v4/user", replyJSON(200, `{"id":7,"username":"ada"}`))
	tok, err := p.Exchange(context.Background(), testCode, testVerifier)
	if err != nil {
		t.Fatal(err)
	}
	if tok.Account != (Account{ID: "7", Name: "ada"}) {
		t.Errorf("account %+v: the preset's fields should read the overridden URL", tok.Account)
	}
	s.reset()
	s.handle("POST gitlab.acme.example/oauth/revoke", replyJSON(200, `{}`))
	if err := p.Revoke(context.Background(), tok); err != nil {
		t.Fatal(err)
	}
	if r := s.only(t); r.Host != "gitlab.acme.example" {
		t.Errorf("revoked at %s", r.route())
	}
}

func TestClientSecretFileIsReadWithoutItsNewline(t *testing.T) {
	s := newStandIn(t)
	file := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(file, []byte(testClientSecret+"\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := acmeConfig("post")
	cfg.ClientSecretEnv, cfg.ClientSecretFile = "", file
	p := s.provider(t, cfg)
	s.handle("POST auth.acme.example/oauth/token", replyJSON(200, `{"access_token":"at","token_type":"bearer"}`))
	s.handle("GET api.acme.example/v1/me", replyJSON(200, `{"data":{"user":{"id":"u1"}}}`))
	if _, err := p.Exchange(context.Background(), testCode, testVerifier); err != nil {
		t.Fatal(err)
	}
	wantValues(t, "token request", s.requests()[0].form(t), map[string]string{"client_secret": testClientSecret})
}

func TestNewNamesEveryProblem(t *testing.T) {
	const clear = "clear-text-secret-never-in-errors"
	preset := func(name, preset string, edit func(*Config)) Config {
		cfg := testConfig(name)
		cfg.Preset = preset
		if edit != nil {
			edit(&cfg)
		}
		return cfg
	}
	explicit := func(edit func(*Config)) Config {
		cfg := acmeConfig("")
		edit(&cfg)
		return cfg
	}
	tests := []struct {
		name    string
		configs []Config
		want    []string
	}{
		{"unknown preset", []Config{preset("bb", "bitbucket", nil)},
			[]string{`provider bb: unknown preset "bitbucket" (known: atlassian, github, gitlab, google, linear, microsoft, notion, slack)`}},
		{"neither preset, issuer nor endpoints", []Config{testConfig("acme")},
			[]string{"provider acme: give exactly one of preset, issuer, or explicit endpoints", "provider acme: authorization_url is required", "provider acme: token_url is required"}},
		{"preset and issuer", []Config{preset("gh", "github", func(c *Config) { c.Issuer = "https://idp.example" })},
			[]string{"provider gh: give exactly one of preset, issuer, or explicit endpoints"}},
		{"a token_url without authorization_url", []Config{explicit(func(c *Config) { c.AuthorizationURL = "" })},
			[]string{"provider acme: give exactly one of", "provider acme: authorization_url is required"}},
		{"no client_id", []Config{preset("gh", "github", func(c *Config) { c.ClientID = "" })},
			[]string{"provider gh: client_id is required"}},
		{"client_secret in clear", []Config{preset("gh", "github", func(c *Config) { c.ClientSecretEnv, c.ClientSecret = "", clear })},
			[]string{"provider gh: client_secret may not be written in the configuration file"}},
		{"client_secret in clear besides an env var", []Config{preset("gh", "github", func(c *Config) { c.ClientSecret = clear })},
			[]string{"provider gh: client_secret may not be written in the configuration file"}},
		{"both client_secret_file and client_secret_env", []Config{preset("gh", "github", func(c *Config) { c.ClientSecretFile = "/run/secrets/gh" })},
			[]string{"provider gh: give client_secret_file or client_secret_env, not both"}},
		{"no client secret", []Config{preset("gh", "github", func(c *Config) { c.ClientSecretEnv = "" })},
			[]string{"provider gh: client_secret_file or client_secret_env is required"}},
		{"unset env var", []Config{preset("gh", "github", func(c *Config) { c.ClientSecretEnv = "URLFLOW_TEST_UNSET" })},
			[]string{"provider gh: client_secret_env: URLFLOW_TEST_UNSET is not set"}},
		{"missing secret file", []Config{preset("gh", "github", func(c *Config) {
			c.ClientSecretEnv, c.ClientSecretFile = "", "/nonexistent/urlflow-test-secret"
		})}, []string{"provider gh: client_secret_file:", "/nonexistent/urlflow-test-secret"}},
		{"http endpoints", []Config{explicit(func(c *Config) {
			c.TokenURL, c.RevocationURL = "http://auth.acme.example/oauth/token", "http://10.0.0.1/revoke"
		})}, []string{`provider acme: token_url must be an https URL, got "http://auth.acme.example/oauth/token"`,
			`provider acme: revocation_url must be an https URL, got "http://10.0.0.1/revoke"`}},
		{"an endpoint that is no URL", []Config{explicit(func(c *Config) { c.AuthorizationURL = "auth.acme.example/authorize" })},
			[]string{`provider acme: authorization_url must be an https URL`}},
		{"http preset override", []Config{preset("gh", "github", func(c *Config) { c.TokenURL = "http://ghe.acme.example/login/oauth/access_token" })},
			[]string{`provider gh: token_url must be an https URL`}},
		{"http issuer", []Config{preset("idp", "", func(c *Config) { c.Issuer = "http://idp.example" })},
			[]string{`provider idp: issuer must be an https URL, got "http://idp.example"`}},
		{"http issuer with explicit endpoints", []Config{explicit(func(c *Config) { c.Issuer = "http://auth.acme.example" })},
			[]string{`provider acme: issuer must be an https URL, got "http://auth.acme.example"`}},
		{"a tenant that would leave its path segment", []Config{preset("ms", "microsoft", func(c *Config) { c.Tenant = "common/../evil" })},
			[]string{`provider ms: tenant must be common, organizations, consumers, a tenant ID or a domain name, got "common/../evil"`}},
		{"a tenant with an encoded slash", []Config{preset("ms", "microsoft", func(c *Config) { c.Tenant = "a%2Fb" })},
			[]string{`provider ms: tenant must be`}},
		{"a tenant for another preset", []Config{preset("gh", "github", func(c *Config) { c.Tenant = "contoso.onmicrosoft.com" })},
			[]string{"provider gh: tenant is a setting of the microsoft preset only"}},
		{"bad name", []Config{preset("Git Hub", "github", nil)}, []string{"provider Git Hub: name must match [a-z0-9_]+"}},
		{"no name", []Config{preset("", "github", nil)}, []string{"provider (no name): name must match [a-z0-9_]+"}},
		{"defined twice", []Config{preset("gh", "github", nil), preset("gh", "gitlab", nil)}, []string{"provider gh: defined twice"}},
		{"bad token_auth", []Config{explicit(func(c *Config) { c.TokenAuth = "private_key_jwt" })},
			[]string{`provider acme: token_auth must be basic or post, got "private_key_jwt"`}},
		{"no way to read the account", []Config{explicit(func(c *Config) { c.Account = nil })},
			[]string{"provider acme: no way to read the connected account"}},
		{"bad api", []Config{preset("gh", "github", func(c *Config) { c.API = &upstream.API{BaseURL: "ftp://api.acme.example"} })},
			[]string{`provider gh: api.base_url must be an absolute http(s) URL`}},
		{"a templated api", []Config{preset("gh", "github", func(c *Config) {
			c.API = &upstream.API{BaseURL: "https://{org}.ghe.example/api", Parameters: []upstream.Parameter{{Name: "org", Label: "Org", Pattern: "[a-z]+"}}}
		})}, []string{"provider gh: api.parameters are for secret slots"}},
		{"every problem of every provider at once", []Config{
			preset("ok", "github", nil),
			preset("bb", "bitbucket", func(c *Config) { c.ClientID = "" }),
			preset("gh", "github", func(c *Config) { c.ClientSecret = clear }),
			explicit(func(c *Config) {
				c.Name, c.TokenURL, c.TokenAuth = "Acme", "http://auth.acme.example/token", "jwt"
			}),
			preset("ok", "google", nil),
		}, []string{`provider bb: unknown preset "bitbucket"`, "provider bb: client_id is required",
			"provider gh: client_secret may not be written", "provider Acme: name must match", "provider Acme: token_url must be an https URL",
			"provider Acme: token_auth must be basic or post", "provider ok: defined twice"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStandIn(t)
			ps, err := s.newProviders(tt.configs...)
			if err == nil {
				t.Fatalf("New accepted the configuration: %v", ps.Names())
			}
			if ps != nil {
				t.Errorf("New returned providers with its error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error does not say %q:\n%v", w, err)
				}
			}
			wantNoSecret(t, err, clear)
			if reqs := s.requests(); len(reqs) != 0 {
				t.Errorf("sent %q", routesOf(reqs))
			}
		})
	}
}

func TestLoopbackHTTPEndpointsAreAllowed(t *testing.T) {
	s := newStandIn(t)
	cfg := acmeConfig("")
	cfg.AuthorizationURL = "http://localhost:8081/authorize"
	cfg.TokenURL = "http://127.0.0.1:8081/token"
	cfg.RevocationURL = "http://[::1]:8081/revoke"
	if _, err := s.newProviders(cfg); err != nil {
		t.Fatal(err)
	}
}

func TestProviderLabelDefaultsToTheName(t *testing.T) {
	s := newStandIn(t)
	cfg := acmeConfig("")
	cfg.Label = ""
	if p := s.provider(t, cfg); p.Label != "acme" {
		t.Errorf("label %q, want the name", p.Label)
	}
}

func TestAccountIsReadAtDottedPaths(t *testing.T) {
	tests := []struct {
		name     string
		doc      string
		id, disp string // the configured paths
		want     Account
		err      string
	}{
		{name: "userinfo defaults", doc: `{"sub":"abc","preferred_username":"ada","email":"ada@example.com"}`, id: "sub", disp: "preferred_username",
			want: Account{ID: "abc", Name: "ada"}},
		{name: "a numeric ID", doc: `{"id":583231,"login":"octocat"}`, id: "id", disp: "login", want: Account{ID: "583231", Name: "octocat"}},
		{name: "a numeric ID beyond 2^53", doc: `{"id":9007199254740993,"login":"big"}`, id: "id", disp: "login",
			want: Account{ID: "9007199254740993", Name: "big"}},
		{name: "nested paths", doc: `{"data":{"viewer":{"id":"2e7c","name":"Ada"}}}`, id: "data.viewer.id", disp: "data.viewer.name",
			want: Account{ID: "2e7c", Name: "Ada"}},
		{name: "the name falls back to well-known fields", doc: `{"sub":"abc","email":"ada@example.com","name":"Ada"}`, id: "sub", disp: "nickname",
			want: Account{ID: "abc", Name: "ada@example.com"}},
		{name: "the name falls back to login", doc: `{"id":1,"login":"octocat","name":null}`, id: "id", disp: "display",
			want: Account{ID: "1", Name: "octocat"}},
		{name: "the name falls back to the ID", doc: `{"sub":"abc"}`, id: "sub", disp: "preferred_username", want: Account{ID: "abc", Name: "abc"}},
		{name: "no ID", doc: `{"email":"ada@example.com"}`, id: "sub", disp: "email", err: `the account document has no "sub"`},
		{name: "a null ID", doc: `{"sub":null}`, id: "sub", disp: "email", err: `no "sub"`},
		{name: "a path through a string", doc: `{"data":"x"}`, id: "data.id", disp: "", err: `no "data.id"`},
		{name: "an empty document", doc: `null`, id: "sub", disp: "", err: `no "sub"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := accountFrom(decodeAccountDocument(t, tt.doc), AccountConfig{ID: tt.id, Name: tt.disp})
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("accountFrom = %+v, %v; want the error %q", got, err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("accountFrom = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

// decodeAccountDocument decodes doc as the providers' answers are decoded.
func decodeAccountDocument(t testing.TB, doc string) map[string]any {
	dec := json.NewDecoder(strings.NewReader(doc))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("decode %s: %v", doc, err)
	}
	return m
}

// FuzzAccountFields reads an account from any document with any paths: a document with the
// ID gives that ID and a name, and the name that urlflow keeps (cleanAccount) is valid UTF-8
// of at most accountNameLimit runes, without control or format characters, and clean
// already; it is empty only when neither the name nor the ID has anything visible.
func FuzzAccountFields(f *testing.F) {
	f.Add(`{"id":1,"login":"octocat"}`, "id", "login")
	f.Add(`{"id":"\u202e42","name":"\u202eadmin\u0007\n\u001b[31m  x"}`, "id", "name")
	f.Add(`{"id":"\u200b","login":"\u2066\u2069"}`, "id", "login")
	f.Add(`{"data":{"viewer":{"id":"2e7c","name":"Ada"}}}`, "data.viewer.id", "data.viewer.name")
	f.Add(`{"a":[1,{"b":2}],"n":1e308,"f":-0.5,"t":true,"z":null}`, "a.1.b", "n")
	f.Add(`{"":{"":""}}`, ".", "..")
	f.Add(`{"id":-0,"x":{"y":{"z":{}}}}`, "x.y.z", "id.")
	f.Add(`null`, "", "")
	f.Fuzz(func(t *testing.T, doc, idPath, namePath string) {
		for _, useNumber := range []bool{false, true} {
			dec := json.NewDecoder(strings.NewReader(doc))
			if useNumber {
				dec.UseNumber()
			}
			var m map[string]any
			if dec.Decode(&m) != nil {
				m = nil
			}
			id := field(m, idPath)
			_ = field(m, namePath)
			a, err := accountFrom(m, AccountConfig{ID: idPath, Name: namePath})
			switch {
			case (err == nil) != (id != ""):
				t.Fatalf("accountFrom error %v with the ID %q", err, id)
			case err == nil && (a.ID != id || a.Name == ""):
				t.Fatalf("accountFrom = %+v, the ID is %q", a, id)
			case err != nil:
				continue
			}
			kept := cleanAccount(a)
			if kept.ID != a.ID || !utf8.ValidString(kept.Name) || utf8.RuneCountInString(kept.Name) > accountNameLimit ||
				strings.IndexFunc(kept.Name, func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }) >= 0 ||
				cleanAccount(kept) != kept || (kept.Name == "" && display.Clean(a.ID, 1) != "") {
				t.Fatalf("cleanAccount(%+q) = %+q", a, kept)
			}
		}
	})
}

// TestABadTenantIsOneProblem: a tenant urlflow refuses is reported once, without the
// missing endpoints it would otherwise have led to.
func TestABadTenantIsOneProblem(t *testing.T) {
	cfg := testConfig("ms")
	cfg.Preset, cfg.Tenant = "microsoft", "common/../evil"
	_, err := newStandIn(t).newProviders(cfg)
	if err == nil || !strings.Contains(err.Error(), "tenant must be") {
		t.Fatalf("New: %v, want the tenant refused", err)
	}
	if n := strings.Count(err.Error(), "provider ms:"); n != 1 {
		t.Errorf("New named %d problems, want the tenant alone:\n%v", n, err)
	}
}
