package main

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/urlflow/urlflow/mcp"
	"github.com/urlflow/urlflow/oauth/thirdparty"
	"github.com/urlflow/urlflow/services"
	"github.com/urlflow/urlflow/slots"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/audit"
	"github.com/urlflow/urlflow/state/flow"
	"github.com/urlflow/urlflow/state/ratelimit"
	"github.com/urlflow/urlflow/state/vault"
	"github.com/urlflow/urlflow/web"
)

// demoConfig is the configuration `urlflow dev` uses when URLFLOW_CONFIG names none.
//
//go:embed demo.yaml
var demoConfig []byte

// config is every setting of urlflow, loaded and validated in one place by loadConfig.
// Precedence: flag > environment > YAML file > default.
type config struct {
	Addr      string
	PublicURL *url.URL
	// publicURLGiven is the public URL as configured; empty means "http:// + the address".
	publicURLGiven string
	RedisURL       string
	RedisTopology  state.Topology
	// ConfigFile is the YAML file the slots came from; empty for the embedded demo.
	ConfigFile     string
	Keys           *vault.KeyRing
	keysGiven      bool
	OperatorTokens []string
	// OperatorReadOnlyTokens may only read (URLFLOW_OPERATOR_READONLY_TOKENS).
	OperatorReadOnlyTokens []string
	// StuckAfter are the thresholds of stuck flows (operators.stuck_after in YAML).
	StuckAfter flow.StuckAfter
	// OperatorSubjects are the users who are operators in the browser (operators.subjects,
	// and in urlflow dev the development operator, DevOperator).
	OperatorSubjects []string
	// OperatorClaim and OperatorClaimValue make operators in the browser by a claim of the
	// ID token (operators.claim).
	OperatorClaim, OperatorClaimValue string
	// AuditRetention and AuditMaxEntries bound the audit trail (URLFLOW_AUDIT_RETENTION,
	// URLFLOW_AUDIT_MAX_ENTRIES).
	AuditRetention  time.Duration
	AuditMaxEntries int64
	Style           mcp.Style
	TTL             time.Duration
	RateLimits      web.RateLimits
	// DebugAddr, when set, is the loopback address of the profiling listener
	// (net/http/pprof); empty means none.
	DebugAddr string
	// MCPSessions bounds the 2025-11-25 sessions of each user.
	MCPSessions mcpSessions
	// BodyReadTimeout is the time a request has to deliver its body.
	BodyReadTimeout time.Duration
	// TrustedProxies are the reverse proxies whose X-Forwarded-For names the client.
	TrustedProxies web.TrustedProxies
	// Waits are the tool calls' product timeouts, shortened only by the test-only settings
	// (testSettings); zero fields mean the defaults.
	Waits waits
	// Slots is set by resolvePublicURL: API base URLs may name the public URL.
	Slots     *slots.Catalog
	secrets   []slots.Slot
	providers []thirdparty.Config
	// DemoResource is the resource of urlflow dev's demo service (URLFLOW_DEV_DEMO_RESOURCE).
	DemoResource string
	// Services are the delegating MCP servers (buildServices).
	Services *services.Catalog
	services []services.Config
	// Production identity (urlflow serve).
	OIDC oidcConfig
}

// oidcConfig is the deployment's identity: the issuer of MCP access tokens and of the
// browser sign-in, and the client urlflow is registered as there.
type oidcConfig struct {
	Issuer       string
	ClientID     string
	ClientSecret string
	// Scopes must all be in an access token.
	Scopes []string
	// Introspection verifies opaque access tokens with RFC 7662.
	Introspection bool
}

// mcpSessions are the limits of MCP sessions (mcp.Options).
type mcpSessions struct {
	PerUser     int
	IdleTimeout time.Duration
}

// waits are the product timeouts that tests shorten instead of waiting them out.
type waits struct {
	Push, Progress, Retry, StatusLimit time.Duration
	// WebhookRetry replaces every wait of the webhook schedule after the first attempt.
	WebhookRetry time.Duration
}

// testSettings are the settings that exist for tests only: each shortens one of the
// product's waits so that an end-to-end test need not wait it out. urlflow dev accepts
// them; urlflow serve refuses to start when one is set.
var testSettings = []struct {
	name string
	wait func(*waits) *time.Duration
}{
	{"URLFLOW_TEST_PUSH_WAIT", func(w *waits) *time.Duration { return &w.Push }},
	{"URLFLOW_TEST_PROGRESS_INTERVAL", func(w *waits) *time.Duration { return &w.Progress }},
	{"URLFLOW_TEST_RETRY_WAIT", func(w *waits) *time.Duration { return &w.Retry }},
	{"URLFLOW_TEST_STATUS_WAIT_LIMIT", func(w *waits) *time.Duration { return &w.StatusLimit }},
	{"URLFLOW_TEST_WEBHOOK_RETRY", func(w *waits) *time.Duration { return &w.WebhookRetry }},
}

// loadTestSettings reads the test-only settings for mode, and names every problem.
func (c *config) loadTestSettings(mode string, getenv env) []error {
	var problems []error
	for _, ts := range testSettings {
		v, ok := getenv(ts.name)
		switch d, err := time.ParseDuration(v); {
		case !ok || v == "":
		case mode != "dev":
			problems = append(problems, fmt.Errorf("%s is a test-only setting that only urlflow dev accepts: unset it", ts.name))
		case err != nil || d < 10*time.Millisecond || d > time.Hour:
			problems = append(problems, fmt.Errorf("%s: want a duration between 10ms and 1h, got %q", ts.name, v))
		default:
			*ts.wait(&c.Waits) = d
		}
	}
	return problems
}

// fileConfig is the YAML configuration file.
type fileConfig struct {
	Addr             string              `yaml:"addr"`
	PublicURL        string              `yaml:"public_url"`
	ElicitationStyle string              `yaml:"elicitation_style"`
	ElicitationTTL   string              `yaml:"elicitation_ttl"`
	TrustedProxies   string              `yaml:"trusted_proxies"`
	Secrets          []slots.Slot        `yaml:"secrets"`
	Providers        []thirdparty.Config `yaml:"providers"`
	Services         []services.Config   `yaml:"services"`
	Operators        operatorsConfig     `yaml:"operators"`
}

// operatorsConfig is the operators: section of the YAML file.
type operatorsConfig struct {
	// Subjects are the users who are operators in the browser (the /admin pages): their
	// subjects at the deployment's issuer.
	Subjects []string `yaml:"subjects"`
	// Claim makes operators of the users whose ID token (urlflow serve's browser sign-in)
	// has the claim Name with Value, or Value among its values (a group).
	Claim struct {
		Name  string `yaml:"name"`
		Value string `yaml:"value"`
	} `yaml:"claim"`
	// StuckAfter maps a running state, or "notification", to how long a flow may stay in
	// it (or owe its notification) before it is stuck: a Go duration.
	StuckAfter map[string]string `yaml:"stuck_after"`
}

// stuckAfter returns the thresholds of c over the defaults, and names every problem.
func (c operatorsConfig) stuckAfter() (flow.StuckAfter, []error) {
	t := flow.DefaultStuckAfter
	fields := map[string]*time.Duration{
		string(flow.Pending): &t.Pending, string(flow.Consented): &t.Consented, string(flow.InProgress): &t.InProgress,
		string(flow.Failed): &t.Failed, string(flow.Unknown): &t.Unknown, string(flow.StuckNotification): &t.Notification,
	}
	var problems []error
	for _, name := range slices.Sorted(maps.Keys(c.StuckAfter)) {
		field, ok := fields[name]
		d, err := time.ParseDuration(c.StuckAfter[name])
		switch {
		case !ok:
			problems = append(problems, fmt.Errorf("operators.stuck_after: %q is not a running state nor notification (want %s)",
				name, strings.Join(slices.Sorted(maps.Keys(fields)), ", ")))
		case err != nil || d < 0:
			problems = append(problems, fmt.Errorf("operators.stuck_after.%s: want a duration such as 5m, got %q", name, c.StuckAfter[name]))
		default:
			*field = d
		}
	}
	return t, problems
}

// env reads the environment; a test replaces it.
type env func(string) (string, bool)

// secret reads a setting that holds a secret: NAME, or the contents of the file named by
// NAME_FILE (without its trailing newline). Errors never contain the value.
func (e env) secret(name string) (string, bool, error) {
	v, ok := e(name)
	path, fileOK := e(name + "_FILE")
	switch {
	case ok && fileOK:
		return "", false, fmt.Errorf("%s and %s_FILE are both set; set one", name, name)
	case fileOK:
		b, err := os.ReadFile(path)
		if err != nil {
			return "", false, fmt.Errorf("%s_FILE: %w", name, err)
		}
		return strings.TrimRight(string(b), "\r\n"), true, nil
	}
	return v, ok, nil
}

// DevOperator is the name of urlflow dev's development operator: signed in with it, the
// /admin pages are open.
const DevOperator = "operator"

// operatorTokens reads the comma-separated operator tokens of setting name (or its _FILE),
// each at least 16 characters long, and reports problems through problem, never with a
// token in them.
func (e env) operatorTokens(name string, problem func(string, ...any)) []string {
	tokens, _, err := e.secret(name)
	if err != nil {
		problem("%v", err)
	}
	var out []string
	for _, t := range strings.Split(tokens, ",") {
		if t = strings.TrimSpace(t); t != "" {
			if len(t) < 16 {
				problem("%s: every token needs at least 16 characters", name)
				return out
			}
			out = append(out, t)
		}
	}
	return out
}

// loadConfig reads flags from args, the environment and the YAML file, applies defaults
// for mode ("dev"), and validates everything. Its error names every problem, one per line.
func loadConfig(mode string, args []string, getenv env, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("urlflow "+mode, flag.ContinueOnError)
	fs.SetOutput(stderr)
	addrFlag := fs.String("addr", "", "listen address (URLFLOW_ADDR; default 127.0.0.1:8080)")
	publicFlag := fs.String("public-url", "", "URL users reach urlflow at (URLFLOW_PUBLIC_URL; default http:// + the address)")
	configFlag := fs.String("config", "", "YAML configuration file (URLFLOW_CONFIG)")
	proxiesFlag := fs.String("trusted-proxies", "", "reverse proxies whose X-Forwarded-For is believed: IPs and CIDRs, comma separated (URLFLOW_TRUSTED_PROXIES)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}

	var problems []error
	problem := func(format string, a ...any) { problems = append(problems, fmt.Errorf(format, a...)) }

	cfg := &config{Addr: "127.0.0.1:8080", Style: mcp.StylePush, TTL: 10 * time.Minute, BodyReadTimeout: web.DefaultBodyReadTimeout}
	if mode == "serve" {
		cfg.Addr = ":8080"
	}
	style, ttl := string(cfg.Style), ""

	// YAML file.
	cfg.ConfigFile = pick(*configFlag, getenv, "URLFLOW_CONFIG", "")
	var raw []byte
	if mode == "dev" {
		raw = demoConfig // serve has no secret slots until its configuration file names some
	}
	if cfg.ConfigFile != "" {
		b, err := os.ReadFile(cfg.ConfigFile)
		if err != nil {
			problem("URLFLOW_CONFIG: %v", err)
		}
		raw = b
	}
	var file fileConfig
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&file); err != nil && !errors.Is(err, io.EOF) {
		problem("configuration file %s: %v", describeFile(cfg.ConfigFile), err)
	}
	if file.Addr != "" {
		cfg.Addr = file.Addr
	}
	cfg.publicURLGiven = file.PublicURL
	if file.ElicitationStyle != "" {
		style = file.ElicitationStyle
	}
	ttl = file.ElicitationTTL

	// Environment and flags.
	cfg.Addr = pick(*addrFlag, getenv, "URLFLOW_ADDR", cfg.Addr)
	cfg.publicURLGiven = pick(*publicFlag, getenv, "URLFLOW_PUBLIC_URL", cfg.publicURLGiven)
	style = pick("", getenv, "URLFLOW_ELICITATION_STYLE", style)
	ttl = pick("", getenv, "URLFLOW_ELICITATION_TTL", ttl)
	proxies := pick(*proxiesFlag, getenv, "URLFLOW_TRUSTED_PROXIES", file.TrustedProxies)

	var err error
	if cfg.RedisURL, _, err = getenv.secret("URLFLOW_REDIS_URL"); err != nil {
		problems = append(problems, err)
	}
	if cfg.RedisTopology, err = state.ParseTopology(pick("", getenv, "URLFLOW_REDIS_TOPOLOGY", "")); err != nil {
		problem("URLFLOW_REDIS_TOPOLOGY: %v", err)
	} else if cfg.RedisTopology != state.Standalone && cfg.RedisURL == "" {
		problem("URLFLOW_REDIS_TOPOLOGY is %s but URLFLOW_REDIS_URL is not set", cfg.RedisTopology)
	}
	keys, keysGiven, err := getenv.secret("URLFLOW_KEYS")
	if err != nil {
		problems = append(problems, err)
	} else if keysGiven {
		cfg.keysGiven = true
		if cfg.Keys, err = vault.ParseKeyRing(keys); err != nil {
			problem("URLFLOW_KEYS: %v", err)
		}
	}
	cfg.OperatorTokens = getenv.operatorTokens("URLFLOW_OPERATOR_TOKENS", problem)
	cfg.OperatorReadOnlyTokens = getenv.operatorTokens("URLFLOW_OPERATOR_READONLY_TOKENS", problem)
	var stuckProblems []error
	cfg.StuckAfter, stuckProblems = file.Operators.stuckAfter()
	cfg.OperatorSubjects = file.Operators.Subjects
	cfg.OperatorClaim, cfg.OperatorClaimValue = file.Operators.Claim.Name, file.Operators.Claim.Value
	if (cfg.OperatorClaim == "") != (cfg.OperatorClaimValue == "") {
		problem("operators.claim: set both name and value")
	}
	if mode == "dev" {
		cfg.OperatorSubjects = append(cfg.OperatorSubjects, DevOperator)
	}
	problems = append(problems, stuckProblems...)

	for _, rl := range []struct {
		name, def string
		limit     *ratelimit.Limit
	}{
		{"URLFLOW_RATE_LIMIT_MCP", "1200/1m", &cfg.RateLimits.MCP},
		{"URLFLOW_RATE_LIMIT_FORMS", "30/1m", &cfg.RateLimits.Forms},
		{"URLFLOW_RATE_LIMIT_BAD_TOKENS", "20/1m", &cfg.RateLimits.BadTokens},
		{"URLFLOW_RATE_LIMIT_SERVICES", "6000/1m", &cfg.RateLimits.Services},
	} {
		if *rl.limit, err = ratelimit.ParseLimit(pick("", getenv, rl.name, rl.def)); err != nil {
			problem("%s: %v", rl.name, err)
		}
	}

	cfg.DemoResource = pick("", getenv, "URLFLOW_DEV_DEMO_RESOURCE", defaultDemoResource)
	if u, err := url.Parse(cfg.DemoResource); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		problem("URLFLOW_DEV_DEMO_RESOURCE: want the demo service's MCP URL (absolute http or https), got %q", cfg.DemoResource)
	}

	if cfg.DebugAddr = pick("", getenv, "URLFLOW_DEBUG_ADDR", ""); cfg.DebugAddr != "" {
		if host, _, err := net.SplitHostPort(cfg.DebugAddr); err != nil || !isLoopback(host) {
			problem("URLFLOW_DEBUG_ADDR: the profiling listener listens on loopback only (127.0.0.1:PORT, [::1]:PORT or localhost:PORT), got %q", cfg.DebugAddr)
		}
	}
	perUser := pick("", getenv, "URLFLOW_MCP_SESSIONS_PER_USER", strconv.Itoa(mcp.DefaultSessionsPerUser))
	if n, err := strconv.Atoi(perUser); err != nil || n < 1 || n > 10000 {
		problem("URLFLOW_MCP_SESSIONS_PER_USER: want a number from 1 to 10000, got %q", perUser)
	} else {
		cfg.MCPSessions.PerUser = n
	}
	idle := pick("", getenv, "URLFLOW_MCP_SESSION_IDLE_TIMEOUT", mcp.DefaultSessionIdleTimeout.String())
	if d, err := time.ParseDuration(idle); err != nil || d < time.Minute || d > 24*time.Hour {
		problem("URLFLOW_MCP_SESSION_IDLE_TIMEOUT: want a duration from 1m to 24h, got %q", idle)
	} else {
		cfg.MCPSessions.IdleTimeout = d
	}
	if v := pick("", getenv, "URLFLOW_BODY_READ_TIMEOUT", ""); v != "" {
		d, err := time.ParseDuration(v)
		switch {
		case err != nil:
			problem("URLFLOW_BODY_READ_TIMEOUT: want a duration like 30s, got %q", v)
		case d < time.Second || d > 10*time.Minute:
			problem("URLFLOW_BODY_READ_TIMEOUT: want between 1s and 10m, got %s", d)
		default:
			cfg.BodyReadTimeout = d
		}
	}

	cfg.AuditRetention = audit.DefaultRetention
	if v := pick("", getenv, "URLFLOW_AUDIT_RETENTION", ""); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Hour || d > 3650*24*time.Hour {
			problem("URLFLOW_AUDIT_RETENTION: want a duration from 1h to 87600h (ten years), got %q", v)
		}
		cfg.AuditRetention = d
	}
	cfg.AuditMaxEntries = audit.DefaultMaxEntries
	if v := pick("", getenv, "URLFLOW_AUDIT_MAX_ENTRIES", ""); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 10_000 || n > 1_000_000_000 {
			problem("URLFLOW_AUDIT_MAX_ENTRIES: want a number from 10000 to 1000000000, got %q", v)
		}
		cfg.AuditMaxEntries = n
	}

	if mode == "serve" {
		problems = append(problems, cfg.loadServeSettings(getenv)...)
	}
	problems = append(problems, cfg.loadTestSettings(mode, getenv)...)

	// Validation.
	switch mcp.Style(style) {
	case mcp.StylePush, mcp.StyleError:
		cfg.Style = mcp.Style(style)
	default:
		problem("URLFLOW_ELICITATION_STYLE: want push or error, got %q", style)
	}
	if ttl != "" {
		d, err := time.ParseDuration(ttl)
		switch {
		case err != nil:
			problem("URLFLOW_ELICITATION_TTL: want a duration like 10m, got %q", ttl)
		case d < 5*time.Second || d > 24*time.Hour:
			problem("URLFLOW_ELICITATION_TTL: want between 5s and 24h, got %s", d)
		default:
			cfg.TTL = d
		}
	}
	if cfg.TrustedProxies, err = web.ParseTrustedProxies(proxies); err != nil {
		problem("URLFLOW_TRUSTED_PROXIES: %v", err)
	}
	host, _, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		problem("URLFLOW_ADDR: want host:port, got %q", cfg.Addr)
	} else if mode == "dev" && !isLoopback(host) {
		problem("URLFLOW_ADDR: urlflow dev listens on loopback only (127.0.0.1, [::1] or localhost), got %q", cfg.Addr)
	}
	if cfg.publicURLGiven != "" {
		u, err := url.Parse(cfg.publicURLGiven)
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			problem("URLFLOW_PUBLIC_URL: want an absolute http(s) URL, got %q", cfg.publicURLGiven)
		case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
			problem("URLFLOW_PUBLIC_URL: no query, fragment or user info, got %q", cfg.publicURLGiven)
		case mode == "dev" && !isLoopback(u.Hostname()):
			problem("URLFLOW_PUBLIC_URL: urlflow dev serves loopback only, got %q", cfg.publicURLGiven)
		case mode == "serve" && u.Scheme != "https" && !isLoopback(u.Hostname()):
			problem("URLFLOW_PUBLIC_URL: must be https (cookies and tokens travel over it), got %q", cfg.publicURLGiven)
		default:
			u.Path = strings.TrimRight(u.Path, "/")
			cfg.PublicURL = u
		}
	} else if mode == "serve" {
		problem("URLFLOW_PUBLIC_URL is required: the https URL users and clients reach urlflow at (behind a TLS proxy, its outside address)")
	}
	// Slots and providers are checked now, and built again once the public URL is known.
	cfg.secrets, cfg.providers = file.Secrets, file.Providers
	if _, err := slots.NewCatalog(cfg.secrets, "http://127.0.0.1"); err != nil {
		problem("configuration file %s: %v", describeFile(cfg.ConfigFile), err)
	}
	if _, err := thirdparty.NewProviders(context.Background(), cfg.providers, thirdparty.Options{
		PublicURL: "http://127.0.0.1", Getenv: getenv, CheckOnly: true,
	}); err != nil {
		problem("configuration file %s: %v", describeFile(cfg.ConfigFile), err)
	}
	for _, p := range cfg.providers {
		if hasSlot(cfg.secrets, p.Name) {
			problem("configuration file %s: %q is both a secret slot and a provider", describeFile(cfg.ConfigFile), p.Name)
		}
	}
	cfg.services = file.Services
	if err := cfg.buildServices(nil); err != nil {
		problems = append(problems, err)
	}
	if err := errors.Join(problems...); err != nil {
		return nil, err
	}
	return cfg, nil
}

// loadServeSettings reads what only `urlflow serve` needs, and names every missing or
// invalid one. serve never falls back to development defaults.
func (c *config) loadServeSettings(getenv env) []error {
	var problems []error
	problem := func(format string, a ...any) { problems = append(problems, fmt.Errorf(format, a...)) }
	if c.RedisURL == "" {
		problem("URLFLOW_REDIS_URL is required: urlflow serve never runs the embedded Redis")
	}
	if !c.keysGiven {
		problem("URLFLOW_KEYS is required: the key ring that encrypts credentials (kid:base64-of-32-bytes, comma separated)")
	}
	c.OIDC.Issuer = pick("", getenv, "URLFLOW_OIDC_ISSUER", "")
	switch u, err := url.Parse(c.OIDC.Issuer); {
	case c.OIDC.Issuer == "":
		problem("URLFLOW_OIDC_ISSUER is required: the OpenID issuer of your users (MCP access tokens and browser sign-in)")
	case err != nil || u.Host == "" || (u.Scheme != "https" && !(u.Scheme == "http" && isLoopback(u.Hostname()))):
		problem("URLFLOW_OIDC_ISSUER: want an https URL, got %q", c.OIDC.Issuer)
	}
	c.OIDC.ClientID = pick("", getenv, "URLFLOW_OIDC_CLIENT_ID", "")
	if c.OIDC.ClientID == "" {
		problem("URLFLOW_OIDC_CLIENT_ID is required: the client urlflow is registered as at the issuer (redirect URI: public URL + /auth/callback)")
	}
	secret, ok, err := getenv.secret("URLFLOW_OIDC_CLIENT_SECRET")
	switch {
	case err != nil:
		problems = append(problems, err)
	case !ok || secret == "":
		problem("URLFLOW_OIDC_CLIENT_SECRET (or URLFLOW_OIDC_CLIENT_SECRET_FILE) is required")
	default:
		c.OIDC.ClientSecret = secret
	}
	c.OIDC.Scopes = strings.FieldsFunc(pick("", getenv, "URLFLOW_OIDC_SCOPES", ""), func(r rune) bool { return r == ' ' || r == ',' })
	switch v := pick("", getenv, "URLFLOW_OIDC_INTROSPECTION", "false"); v {
	case "true", "1", "yes":
		c.OIDC.Introspection = true
	case "false", "0", "no":
	default:
		problem("URLFLOW_OIDC_INTROSPECTION: want true or false, got %q", v)
	}
	return problems
}

// buildServices builds the catalog of services from the configuration file and extra
// (urlflow dev's demo service), whose keys come from keys (service name → key digests).
func (c *config) buildServices(keys map[string][]string, extra ...services.Config) error {
	opts := services.Options{Keys: keys}
	for _, s := range c.secrets {
		opts.Slots = append(opts.Slots, s.Name)
	}
	for _, p := range c.providers {
		opts.Providers = append(opts.Providers, p.Name)
	}
	catalog, err := services.NewCatalog(append(slices.Clone(c.services), extra...), opts)
	if err != nil {
		return fmt.Errorf("configuration file %s: %w", describeFile(c.ConfigFile), err)
	}
	c.Services = catalog
	return nil
}

// hasSlot reports whether secrets has a slot named name.
func hasSlot(secrets []slots.Slot, name string) bool {
	return slices.ContainsFunc(secrets, func(s slots.Slot) bool { return s.Name == name })
}

// pick returns the flag value if set, else the environment variable if set, else def.
func pick(flagValue string, getenv env, name, def string) string {
	if flagValue != "" {
		return flagValue
	}
	if v, ok := getenv(name); ok && v != "" {
		return v
	}
	return def
}

func describeFile(path string) string {
	if path == "" {
		return "(built-in demo)"
	}
	return path
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// resolvePublicURL sets the public URL once the listener's address is known (the
// configured one, or http:// + the address as given, with the real port when the given
// port was 0) and builds the slot catalog with it.
func (c *config) resolvePublicURL(bound net.Addr) error {
	if c.PublicURL == nil {
		host, port, _ := net.SplitHostPort(c.Addr)
		if port == "0" {
			_, port, _ = net.SplitHostPort(bound.String())
		}
		c.PublicURL = &url.URL{Scheme: "http", Host: net.JoinHostPort(host, port)}
	}
	catalog, err := slots.NewCatalog(c.secrets, c.PublicURL.String())
	if err != nil {
		return fmt.Errorf("configuration file %s: %w", describeFile(c.ConfigFile), err)
	}
	c.Slots = catalog
	return nil
}
