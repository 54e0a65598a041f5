package providers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/oauth2"

	"github.com/urlflow/urlflow/internal/loopback"
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

// Set is the set of configured providers.
type Set struct {
	list []*Provider
}

// Lookup returns the provider named name.
func (ps *Set) Lookup(name string) (*Provider, bool) {
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
func (ps *Set) Names() []string {
	if ps == nil {
		return nil
	}
	names := make([]string, len(ps.list))
	for i, p := range ps.list {
		names[i] = p.Name
	}
	return names
}

// Options are what New needs besides the configuration.
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

// New checks every provider, reads its client secret, discovers issuers, and
// returns the set, or an error naming every problem.
func New(ctx context.Context, configs []Config, opts Options) (*Set, error) {
	if opts.Getenv == nil {
		opts.Getenv = os.LookupEnv
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = resend.Client()
	}
	ps := &Set{}
	var errs []error
	seen := map[string]bool{}
	for _, cfg := range configs {
		p, found := newProvider(ctx, cfg, opts)
		name := cfg.Name
		if name == "" {
			name = "(no name)"
		}
		for _, pr := range found {
			errs = append(errs, fmt.Errorf("provider %s: %s", name, pr))
		}
		if seen[cfg.Name] {
			errs = append(errs, fmt.Errorf("provider %s: defined twice", name))
		}
		seen[cfg.Name] = true
		if len(found) == 0 {
			ps.list = append(ps.list, p)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return ps, nil
}

var (
	providerNamePattern = regexp.MustCompile(`^[a-z0-9_]+$`)
	// tenantPattern matches a Microsoft tenant: common, organizations, consumers, a
	// tenant ID or a domain name. It keeps the tenant one segment of the endpoints' path.
	tenantPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.-]*$`)
)

// newProvider makes the provider of cfg, or names what is wrong with cfg.
func newProvider(ctx context.Context, cfg Config, opts Options) (*Provider, problems) {
	var ps problems
	if !providerNamePattern.MatchString(cfg.Name) {
		ps.add("name must match [a-z0-9_]+")
	}
	p := &Provider{Name: cfg.Name, Label: cfg.Label, client: opts.HTTPClient, dialect: standard{}, scopeSep: " ",
		account: AccountConfig{ID: "sub", Name: "preferred_username"}, authParams: map[string]string{}}
	p.config.RedirectURL = strings.TrimRight(opts.PublicURL, "/") + "/oauth/callback"
	p.config.Endpoint.AuthStyle = oauth2.AuthStyleInParams
	p.locate(ctx, cfg, opts.CheckOnly, &ps)
	p.identify(cfg, opts.Getenv, &ps)
	p.request(cfg, &ps)
	p.readAccountAs(cfg.Account, &ps)
	p.reach(cfg.API, opts.PublicURL, &ps)
	return p, ps
}

// locate finds the provider's endpoints: its preset's, its issuer's discovery document's,
// or the ones given; endpoints given override the first two.
func (p *Provider) locate(ctx context.Context, cfg Config, checkOnly bool, ps *problems) {
	ways := 0
	for _, given := range []bool{cfg.Preset != "", cfg.Issuer != "", cfg.AuthorizationURL != "" && cfg.Preset == "" && cfg.Issuer == ""} {
		if given {
			ways++
		}
	}
	if ways != 1 {
		ps.add("give exactly one of preset, issuer, or explicit endpoints (authorization_url and token_url)")
	}
	if cfg.Tenant != "" && cfg.Preset != "microsoft" {
		ps.add("tenant is a setting of the microsoft preset only")
	}
	switch {
	case cfg.Preset != "":
		p.usePreset(cfg, ps)
	case cfg.Issuer != "":
		p.useIssuer(ctx, cfg, checkOnly, ps)
	}
	for _, given := range []struct {
		val  string
		dest *string
	}{
		{cfg.AuthorizationURL, &p.config.Endpoint.AuthURL}, {cfg.TokenURL, &p.config.Endpoint.TokenURL},
		{cfg.UserinfoURL, &p.userinfo}, {cfg.RevocationURL, &p.revocation},
	} {
		if given.val != "" {
			*given.dest = given.val
		}
	}
	for _, u := range []struct{ key, val string }{
		{"authorization_url", p.config.Endpoint.AuthURL}, {"token_url", p.config.Endpoint.TokenURL},
		{"userinfo_url", p.userinfo}, {"revocation_url", p.revocation},
	} {
		switch {
		case u.val == "" && (u.key == "authorization_url" || u.key == "token_url"):
			ps.add("%s is required (or a preset, or an issuer with discovery)", u.key)
		case u.val != "" && !secureURL(u.val):
			ps.add("%s must be an https URL, got %q", u.key, u.val)
		}
	}
}

// usePreset starts p from the preset cfg names.
func (p *Provider) usePreset(cfg Config, ps *problems) {
	newPreset, ok := presets[cfg.Preset]
	if !ok {
		ps.add("unknown preset %q (known: %s)", cfg.Preset, strings.Join(slices.Sorted(maps.Keys(presets)), ", "))
		return
	}
	if cfg.Tenant != "" && !tenantPattern.MatchString(cfg.Tenant) {
		ps.add("tenant must be common, organizations, consumers, a tenant ID or a domain name, got %q", cfg.Tenant)
		cfg.Tenant = "" // the preset's default, so that no other problem follows from this one
	}
	preset := newPreset(cfg)
	preset.configure(p)
	p.dialect = preset
}

// useIssuer takes the endpoints from the discovery document of cfg's issuer, or, when
// the endpoints are given, only the issuer that authorization responses must name.
func (p *Provider) useIssuer(ctx context.Context, cfg Config, checkOnly bool, ps *problems) {
	// The discovery document names every endpoint: it must not come over plain HTTP.
	// An issuer identifier is an https URL in any case (RFC 8414, section 2).
	switch {
	case !secureURL(cfg.Issuer):
		ps.add("issuer must be an https URL, got %q", cfg.Issuer)
	case cfg.AuthorizationURL != "" && cfg.TokenURL != "":
		// A provider that has no discovery document can still send iss.
		p.issuer = cfg.Issuer
	case checkOnly:
		p.config.Endpoint.AuthURL, p.config.Endpoint.TokenURL, p.userinfo = cfg.Issuer, cfg.Issuer, cfg.Issuer
	default:
		if err := p.discover(ctx, cfg.Issuer); err != nil {
			ps.add("issuer: %v", err)
		}
	}
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

// identify gives p its label and its client: the client ID and the secret.
func (p *Provider) identify(cfg Config, getenv func(string) (string, bool), ps *problems) {
	if cfg.Label != "" {
		p.Label = cfg.Label
	}
	if p.Label == "" {
		p.Label = cfg.Name
	}
	p.config.ClientID = cfg.ClientID
	if cfg.ClientID == "" {
		ps.add("client_id is required")
	}
	secret, err := clientSecret(cfg, getenv)
	if err != nil {
		ps.add("%v", err)
	}
	p.config.ClientSecret = secret
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

// request sets what p asks for beyond its preset or discovery: scopes, parameters of the
// authorization request, and how the client authenticates at the token endpoint.
func (p *Provider) request(cfg Config, ps *problems) {
	if len(cfg.Scopes) > 0 {
		p.config.Scopes = slices.Clone(cfg.Scopes)
	}
	maps.Copy(p.authParams, cfg.AuthParams)
	switch cfg.TokenAuth {
	case "":
	case "basic":
		p.config.Endpoint.AuthStyle = oauth2.AuthStyleInHeader
	case "post":
		p.config.Endpoint.AuthStyle = oauth2.AuthStyleInParams
	default:
		ps.add("token_auth must be basic or post, got %q", cfg.TokenAuth)
	}
}

// readAccountAs sets where p reads the connected account: given fields override the
// preset's, and the userinfo endpoint is the default URL.
func (p *Provider) readAccountAs(given *AccountConfig, ps *problems) {
	if given != nil {
		p.account.URL = cmp.Or(given.URL, p.account.URL)
		p.account.ID = cmp.Or(given.ID, p.account.ID)
		p.account.Name = cmp.Or(given.Name, p.account.Name)
	}
	p.account.URL = cmp.Or(p.account.URL, p.userinfo)
	if _, own := p.dialect.(ownAccountReader); p.account.URL == "" && !own {
		ps.add("no way to read the connected account: give account.url (or userinfo_url, or an issuer with a userinfo endpoint)")
	}
}

// reach sets the API that call_api reaches with p's tokens: the configured one or the
// preset's, with the access token as a bearer token unless the API says otherwise.
func (p *Provider) reach(api *upstream.API, publicURL string, ps *problems) {
	if api != nil {
		p.API = api.Clone()
	}
	if p.API == nil {
		return
	}
	if p.API.Inject == (upstream.Injection{}) {
		p.API.Inject = bearer
	}
	if p.API.Templated() {
		// A connection has no page where the user would enter them, and a provider's own
		// endpoints are not templated.
		ps.add("api.parameters are for secret slots; a provider's API has one base URL")
	}
	for _, problem := range p.API.Prepare(publicURL) {
		ps.add("%s", problem)
	}
}

// secureURL reports whether s is an https URL, or an http URL of the loopback interface.
func secureURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.Host != "" && (u.Scheme == "https" || (u.Scheme == "http" && loopback.Host(u.Hostname())))
}
