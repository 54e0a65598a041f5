package thirdparty

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"github.com/urlflow/urlflow/internal/resend"
	"github.com/urlflow/urlflow/oauth"
	"github.com/urlflow/urlflow/upstream"
)

// Config is one third-party OAuth provider of the configuration file: a preset, an
// OpenID issuer found by discovery, or explicit endpoints.
type Config struct {
	// Name identifies the provider in tools and configuration: [a-z0-9_]+.
	Name string `yaml:"name"`
	// Label is how people call it ("Acme"); the preset's or the name if empty.
	Label string `yaml:"label"`
	// Preset names a built-in provider: github, google, microsoft, slack, gitlab,
	// atlassian, notion, linear.
	Preset string `yaml:"preset"`
	// Issuer is the provider's issuer identifier. Alone, or with only one of
	// AuthorizationURL and TokenURL, it is an OpenID issuer whose discovery document gives
	// the endpoints. With both, nothing is discovered: it is only what the provider's
	// authorization responses must name in iss (RFC 9207).
	Issuer string `yaml:"issuer"`
	// Explicit endpoints, for providers without discovery or to override a preset.
	AuthorizationURL string `yaml:"authorization_url"`
	TokenURL         string `yaml:"token_url"`
	UserinfoURL      string `yaml:"userinfo_url"`
	RevocationURL    string `yaml:"revocation_url"`
	// Tenant is the Microsoft tenant (common, organizations, consumers, or an ID).
	Tenant   string `yaml:"tenant"`
	ClientID string `yaml:"client_id"`
	// The client secret comes from a file or an environment variable, never from the
	// configuration file in clear (ClientSecret is there only to be refused).
	ClientSecretFile string `yaml:"client_secret_file"`
	ClientSecretEnv  string `yaml:"client_secret_env"`
	ClientSecret     string `yaml:"client_secret"`
	// Scopes are requested by default; connect may ask for more.
	Scopes []string `yaml:"scopes"`
	// AuthParams are extra parameters of the authorization request.
	AuthParams map[string]string `yaml:"auth_params"`
	// TokenAuth is how urlflow authenticates at the token endpoint: basic or post.
	TokenAuth string `yaml:"token_auth"`
	// Account says how to read the connected account.
	Account *AccountConfig `yaml:"account"`
	// API is what call_api reaches with the access token (injected as a bearer token
	// unless the api says otherwise).
	API *upstream.API `yaml:"api"`
}

// AccountConfig says where the connected account's identity is read: a URL fetched with the
// access token (the userinfo endpoint by default) and the JSON fields (dotted paths) of a
// stable ID and a display name.
type AccountConfig struct {
	URL  string `yaml:"url"`
	ID   string `yaml:"id"`
	Name string `yaml:"name"`
}

// Account is the third-party account a connection belongs to.
type Account struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// Token is what urlflow keeps of a connection, sealed in the vault.
type Token struct {
	AccessToken  string    `json:"access_token"`
	RefreshToken string    `json:"refresh_token,omitempty"`
	TokenType    string    `json:"token_type,omitempty"`
	Expiry       time.Time `json:"expiry,omitzero"`
	// Obtained is when urlflow got the access token (the exchange or the last refresh).
	Obtained time.Time `json:"obtained,omitzero"`
	Scopes   []string  `json:"scopes,omitempty"`
	Account  Account   `json:"account"`
}

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

var providerNamePattern = regexp.MustCompile(`^[a-z0-9_]+$`)

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

// dialect holds what a provider does differently from plain OAuth 2.0. A nil function
// means the standard behaviour.
type dialect struct {
	// exchange trades the code for a token.
	exchange func(ctx context.Context, p *Provider, code, verifier string) (*Token, error)
	// refresh trades a refresh token for a new token.
	refresh func(ctx context.Context, p *Provider, refreshToken string) (*Token, error)
	// account reads the connected account.
	account func(ctx context.Context, p *Provider, t *Token) (Account, error)
	// revoke revokes t at the provider.
	revoke func(ctx context.Context, p *Provider, t *Token) error
	// issuerMatches checks an authorization response's iss when the issuer is a pattern.
	issuerMatches func(iss string) bool
}

// Providers is the set of configured providers.
type Providers struct {
	list []*Provider
}

// Lookup returns the provider named name.
func (ps *Providers) Lookup(name string) (*Provider, bool) {
	if ps == nil {
		return nil, false
	}
	i := slices.IndexFunc(ps.list, func(p *Provider) bool { return p.Name == name })
	if i < 0 {
		return nil, false
	}
	return ps.list[i], true
}

// Names returns the provider names in configuration order.
func (ps *Providers) Names() []string {
	if ps == nil {
		return nil
	}
	names := make([]string, len(ps.list))
	for i, p := range ps.list {
		names[i] = p.Name
	}
	return names
}

// Options are what NewProviders needs besides the configuration.
type Options struct {
	// PublicURL is urlflow's public URL: the redirect URI is PublicURL + /oauth/callback,
	// and {public_url} in API base URLs is replaced by it.
	PublicURL string
	// Getenv reads client_secret_env (os.LookupEnv if nil).
	Getenv func(string) (string, bool)
	// HTTPClient talks to the providers (resend.Client() if nil: a token request on a
	// keep-alive connection the provider just closed is sent again). Tests point it at
	// stand-ins.
	HTTPClient *http.Client
	// CheckOnly checks the configuration without reaching any provider (no discovery).
	CheckOnly bool
}

// NewProviders checks every provider, reads its client secret, discovers issuers, and
// returns the set, or an error naming every problem.
func NewProviders(ctx context.Context, configs []Config, opts Options) (*Providers, error) {
	if opts.Getenv == nil {
		opts.Getenv = os.LookupEnv
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = resend.Client()
	}
	ps := &Providers{}
	var errs []error
	seen := map[string]bool{}
	for _, cfg := range configs {
		p, problems := newProvider(ctx, cfg, opts)
		name := cfg.Name
		if name == "" {
			name = "(no name)"
		}
		for _, pr := range problems {
			errs = append(errs, fmt.Errorf("provider %s: %s", name, pr))
		}
		if seen[cfg.Name] {
			errs = append(errs, fmt.Errorf("provider %s: defined twice", name))
		}
		seen[cfg.Name] = true
		if len(problems) == 0 {
			ps.list = append(ps.list, p)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return ps, nil
}

func newProvider(ctx context.Context, cfg Config, opts Options) (*Provider, []string) {
	var problems []string
	problem := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }
	if !providerNamePattern.MatchString(cfg.Name) {
		problem("name must match [a-z0-9_]+")
	}
	p := &Provider{Name: cfg.Name, Label: cfg.Label, client: opts.HTTPClient, scopeSep: " ",
		account: AccountConfig{ID: "sub", Name: "preferred_username"}, authParams: map[string]string{}}
	p.config.RedirectURL = strings.TrimRight(opts.PublicURL, "/") + "/oauth/callback"
	p.config.Endpoint.AuthStyle = oauth2.AuthStyleInParams

	ways := 0
	for _, set := range []bool{cfg.Preset != "", cfg.Issuer != "", cfg.AuthorizationURL != "" && cfg.Preset == "" && cfg.Issuer == ""} {
		if set {
			ways++
		}
	}
	if ways != 1 {
		problem("give exactly one of preset, issuer, or explicit endpoints (authorization_url and token_url)")
	}
	switch {
	case cfg.Preset != "":
		preset, ok := presets[cfg.Preset]
		if !ok {
			problem("unknown preset %q (known: %s)", cfg.Preset, strings.Join(presetNames(), ", "))
			break
		}
		preset(p, cfg)
	case cfg.Issuer != "":
		// The discovery document names every endpoint: it must not come over plain HTTP.
		// An issuer identifier is an https URL in any case (RFC 8414, section 2).
		if !secureURL(cfg.Issuer) {
			problem("issuer must be an https URL, got %q", cfg.Issuer)
			break
		}
		if cfg.AuthorizationURL != "" && cfg.TokenURL != "" {
			// The endpoints are given: the issuer only checks the iss of authorization
			// responses. A provider that has no discovery document can still send iss.
			p.issuer = cfg.Issuer
			break
		}
		if opts.CheckOnly {
			p.config.Endpoint.AuthURL, p.config.Endpoint.TokenURL, p.userinfo = cfg.Issuer, cfg.Issuer, cfg.Issuer
			break
		}
		if err := p.discover(ctx, cfg.Issuer); err != nil {
			problem("issuer: %v", err)
		}
	}
	// Explicit settings override the preset or the discovery.
	for _, ov := range []struct {
		val  string
		dest *string
	}{
		{cfg.AuthorizationURL, &p.config.Endpoint.AuthURL}, {cfg.TokenURL, &p.config.Endpoint.TokenURL},
		{cfg.UserinfoURL, &p.userinfo}, {cfg.RevocationURL, &p.revocation},
	} {
		if ov.val != "" {
			*ov.dest = ov.val
		}
	}
	for _, u := range []struct{ key, val string }{
		{"authorization_url", p.config.Endpoint.AuthURL}, {"token_url", p.config.Endpoint.TokenURL},
		{"userinfo_url", p.userinfo}, {"revocation_url", p.revocation},
	} {
		if u.val == "" {
			if u.key == "authorization_url" || u.key == "token_url" {
				problem("%s is required (or a preset, or an issuer with discovery)", u.key)
			}
			continue
		}
		if !secureURL(u.val) {
			problem("%s must be an https URL, got %q", u.key, u.val)
		}
	}

	if cfg.Label != "" {
		p.Label = cfg.Label
	}
	if p.Label == "" {
		p.Label = cfg.Name
	}
	p.config.ClientID = cfg.ClientID
	if cfg.ClientID == "" {
		problem("client_id is required")
	}
	secret, err := clientSecret(cfg, opts.Getenv)
	if err != nil {
		problem("%v", err)
	}
	p.config.ClientSecret = secret
	if len(cfg.Scopes) > 0 {
		p.config.Scopes = slices.Clone(cfg.Scopes)
	}
	for k, v := range cfg.AuthParams {
		p.authParams[k] = v
	}
	switch cfg.TokenAuth {
	case "":
	case "basic":
		p.config.Endpoint.AuthStyle = oauth2.AuthStyleInHeader
	case "post":
		p.config.Endpoint.AuthStyle = oauth2.AuthStyleInParams
	default:
		problem("token_auth must be basic or post, got %q", cfg.TokenAuth)
	}
	if a := cfg.Account; a != nil {
		if a.URL != "" {
			p.account.URL = a.URL
		}
		if a.ID != "" {
			p.account.ID = a.ID
		}
		if a.Name != "" {
			p.account.Name = a.Name
		}
	}
	if p.account.URL == "" {
		p.account.URL = p.userinfo
	}
	if p.account.URL == "" && p.dialect.account == nil {
		problem("no way to read the connected account: give account.url (or userinfo_url, or an issuer with a userinfo endpoint)")
	}
	if cfg.API != nil {
		p.API = cfg.API.Clone()
	}
	if p.API != nil {
		if p.API.Inject == (upstream.Injection{}) {
			p.API.Inject = upstream.Injection{Header: "Authorization", Template: "Bearer {secret}"}
		}
		for _, pr := range p.API.Prepare(opts.PublicURL) {
			problem("%s", pr)
		}
	}
	return p, problems
}

// clientSecret reads the client secret from its file or environment variable. The
// configuration file may not hold it in clear.
func clientSecret(cfg Config, getenv func(string) (string, bool)) (string, error) {
	switch {
	case cfg.ClientSecret != "":
		return "", errors.New("client_secret may not be written in the configuration file: use client_secret_file or client_secret_env")
	case cfg.ClientSecretFile != "" && cfg.ClientSecretEnv != "":
		return "", errors.New("give client_secret_file or client_secret_env, not both")
	case cfg.ClientSecretFile != "":
		b, err := os.ReadFile(cfg.ClientSecretFile)
		if err != nil {
			return "", fmt.Errorf("client_secret_file: %w", err)
		}
		return strings.TrimRight(string(b), "\r\n"), nil
	case cfg.ClientSecretEnv != "":
		v, ok := getenv(cfg.ClientSecretEnv)
		if !ok || v == "" {
			return "", fmt.Errorf("client_secret_env: %s is not set", cfg.ClientSecretEnv)
		}
		return v, nil
	}
	return "", errors.New("client_secret_file or client_secret_env is required")
}

// discover reads an OpenID issuer's metadata (oauth.Discover) and takes its endpoints.
func (p *Provider) discover(ctx context.Context, issuer string) error {
	server, err := oauth.Discover(ctx, issuer, p.client)
	if err != nil {
		return err
	}
	meta := server.Metadata
	p.issuer, p.issRequired = issuer, meta.IssParameterSupported
	p.config.Endpoint.AuthURL, p.config.Endpoint.TokenURL = meta.AuthorizationEndpoint, meta.TokenEndpoint
	p.userinfo, p.revocation = meta.UserinfoEndpoint, meta.RevocationEndpoint
	if !slices.Contains(meta.TokenEndpointAuthMethods, "client_secret_post") && slices.Contains(meta.TokenEndpointAuthMethods, "client_secret_basic") {
		p.config.Endpoint.AuthStyle = oauth2.AuthStyleInHeader
	}
	if len(p.config.Scopes) == 0 {
		p.config.Scopes = []string{"openid", "profile", "email"}
	}
	return nil
}

// getJSON GETs u (with a bearer token when given) and decodes the JSON answer into v.
func (p *Provider) getJSON(ctx context.Context, u, bearer string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	return p.doJSON(req, v)
}

// doJSON sends req and decodes a 2xx JSON answer into v. Errors name the status, never a
// token.
func (p *Provider) doJSON(req *http.Request, v any) error {
	resp, err := p.do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("%s %s: %w", req.Method, req.URL.Host, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &providerError{status: resp.StatusCode, host: req.URL.Host, body: body}
	}
	// Numbers stay as they were sent: an account ID beyond 2^53 must not be rounded.
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s %s: not JSON: %w", req.Method, req.URL.Host, err)
	}
	return nil
}

// providerError is a non-2xx answer of a provider.
type providerError struct {
	status int
	host   string
	body   []byte
}

func (e *providerError) Error() string {
	var oe struct {
		Error string `json:"error"`
	}
	json.Unmarshal(e.body, &oe)
	if oe.Error != "" {
		return fmt.Sprintf("%s answered %d (%s)", e.host, e.status, oe.Error)
	}
	return fmt.Sprintf("%s answered %d", e.host, e.status)
}

// secureURL reports whether s is an https URL, or an http URL of the loopback interface.
func secureURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.Host != "" && (u.Scheme == "https" || (u.Scheme == "http" && loopbackHost(u.Hostname())))
}

func loopbackHost(host string) bool {
	return host == "localhost" || host == "127.0.0.1" || host == "::1"
}
