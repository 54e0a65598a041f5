package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/urlflow/urlflow/internal/brand"
	"github.com/urlflow/urlflow/internal/locale"
	"github.com/urlflow/urlflow/internal/loopback"
	"github.com/urlflow/urlflow/internal/tracing"
	"github.com/urlflow/urlflow/mcp"
	"github.com/urlflow/urlflow/oauth/identity"
	"github.com/urlflow/urlflow/oauth/providers"
	"github.com/urlflow/urlflow/services"
	"github.com/urlflow/urlflow/slots"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/flow"
	"github.com/urlflow/urlflow/state/ratelimit"
	"github.com/urlflow/urlflow/state/vault"
	"github.com/urlflow/urlflow/userref"
	"github.com/urlflow/urlflow/web"
	"github.com/urlflow/urlflow/web/limits"
)

// demoConfig is the configuration `urlflow dev` uses when URLFLOW_CONFIG names none.
//
//go:embed demo.yaml
var demoConfig []byte

// config is every setting of urlflow dev and serve, loaded and validated in one place by
// loadConfig from the settings table (settings.go) and the sections of the YAML file.
// Precedence: flag > environment > YAML file > default.
type config struct {
	Addr      string
	PublicURL *url.URL
	// publicURLGiven is the public URL as configured; empty means "http:// + the address".
	publicURLGiven string
	RedisURL       string
	RedisTopology  state.Topology
	// LogLevel and LogFormat ("text" or "json") say what is logged, and how.
	LogLevel  slog.Level
	LogFormat string
	// Tracing says whether and how spans are exported, as the OTEL_* variables ask.
	Tracing tracing.Settings
	// ConfigFile is the YAML file the slots came from; empty for the embedded demo.
	ConfigFile string
	Keys       *vault.KeyRing
	keysGiven  bool
	// UserRefs make the references services know users by (URLFLOW_USER_REFERENCE_KEY;
	// urlflow dev keeps its own otherwise).
	UserRefs       *userref.Refs
	OperatorTokens []string
	// OperatorReadOnlyTokens may only read (URLFLOW_OPERATOR_READONLY_TOKENS).
	OperatorReadOnlyTokens []string
	// StuckAfter are the thresholds of stuck flows (operators.stuck_after in YAML).
	StuckAfter flow.StuckAfter
	// OperatorSubjects are the users who are operators in the browser (operators.subjects,
	// and in urlflow dev the development operator, identity.DevOperator).
	OperatorSubjects []string
	// OperatorReadOnlySubjects are the users who may only look at the /admin pages
	// (operators.readonly_subjects; in dev also "viewer").
	OperatorReadOnlySubjects []string
	// Brand is the look of the end users' pages (the branding: section; nil: urlflow's).
	Brand *brand.Brand
	// Catalog is the pages' wording in every language, the messages: section's over the
	// embedded catalogs.
	Catalog *locale.Catalog
	// OperatorClaim and OperatorClaimValue make operators in the browser by a claim of the
	// ID token (operators.claim).
	OperatorClaim, OperatorClaimValue string
	// AuditRetention and AuditMaxEntries bound the audit trail (URLFLOW_AUDIT_RETENTION,
	// URLFLOW_AUDIT_MAX_ENTRIES).
	AuditRetention  time.Duration
	AuditMaxEntries int64
	Style           mcp.Style
	TTL             time.Duration
	// FlowRetention is how long ended flows are kept after their deadline
	// (URLFLOW_FLOW_RETENTION).
	FlowRetention time.Duration
	RateLimits    limits.Rates
	// DebugAddr, when set, is the loopback address of the profiling listener
	// (net/http/pprof); empty means none.
	DebugAddr string
	// MCPSessions bounds the 2025-11-25 sessions of each user.
	MCPSessions mcpSessions
	// BodyReadTimeout is the time a request has to deliver its body.
	BodyReadTimeout time.Duration
	// ShutdownGrace is the time the requests in progress have once urlflow stops.
	ShutdownGrace time.Duration
	// TrustedProxies are the reverse proxies whose X-Forwarded-For names the client.
	TrustedProxies web.TrustedProxies
	// Waits are the tool calls' product timeouts, shortened only by the test-only settings
	// (testSettings); zero fields mean the defaults.
	Waits waits
	// Slots is set by resolvePublicURL: API base URLs may name the public URL.
	Slots     *slots.Catalog
	secrets   []slots.Slot
	providers []providers.Config
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
	// ReplicaHeartbeat is how long a replica's heartbeat lasts (mcp.Options).
	ReplicaHeartbeat time.Duration
}

// testSettings are the test-only settings (settingsTable), each with the wait it shortens.
var testSettings = []struct {
	name string
	wait func(*waits) *time.Duration
}{
	{"test_push_wait", func(w *waits) *time.Duration { return &w.Push }},
	{"test_progress_interval", func(w *waits) *time.Duration { return &w.Progress }},
	{"test_retry_wait", func(w *waits) *time.Duration { return &w.Retry }},
	{"test_status_wait_limit", func(w *waits) *time.Duration { return &w.StatusLimit }},
	{"test_webhook_retry", func(w *waits) *time.Duration { return &w.WebhookRetry }},
	{"test_replica_heartbeat", func(w *waits) *time.Duration { return &w.ReplicaHeartbeat }},
}

// loadConfig reads the settings of mode ("dev" or "serve") from flags, the environment
// and the YAML file, applies mode's defaults, and validates them section by section. Its
// error names every problem, once, one per line.
func loadConfig(mode string, flags *pflag.FlagSet, getenv env) (*config, error) {
	cfg, l := load(mode, flags, getenv)
	if err := l.err(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// load is loadConfig that keeps what it read for urlflow config check: the config as far
// as it is valid, and the loading with every value, where it came from, and every problem.
func load(mode string, flags *pflag.FlagSet, getenv env) (*config, *loading) {
	l := &loading{mode: mode}
	cfg := &config{}
	file := cfg.readFile(l, flags, getenv)
	var problems []error
	l.v, problems = readSettings(mode, flags, getenv, file.Settings)
	l.problems = append(problems, l.problems...)

	cfg.loadListen(l)
	cfg.loadLogs(l)
	cfg.loadRedis(l)
	cfg.loadKeys(l)
	cfg.loadElicitation(l)
	cfg.loadMCPSessions(l)
	cfg.loadRateLimits(l)
	cfg.loadOperators(l, file.Operators)
	cfg.loadBrand(l, file.Branding)
	cfg.loadMessages(l, file.Messages)
	cfg.loadIdentity(l)
	cfg.loadDevelopment(l)
	cfg.loadTestSettings(l)
	cfg.loadCatalogs(l, file, getenv)
	cfg.loadUserReferences(l)
	cfg.loadTracing(l, getenv)
	return cfg, l
}

// loadListen checks where urlflow listens and the URL it is reached at.
func (c *config) loadListen(l *loading) {
	c.Addr = l.v.raw("addr")
	if host, _, err := net.SplitHostPort(c.Addr); err != nil {
		l.fail("addr", "want host:port, %s, got %q", l.example("addr"), c.Addr)
	} else if l.mode == cmdDev && !loopback.Host(host) {
		l.fail("addr", "urlflow dev listens on loopback only (127.0.0.1, [::1] or localhost), %s, got %q", l.example("addr"), c.Addr)
	}
	if c.publicURLGiven = l.v.raw("public_url"); c.publicURLGiven != "" {
		c.PublicURL = l.publicURL(c.publicURLGiven)
	}
	var err error
	if c.TrustedProxies, err = web.ParseTrustedProxies(l.v.raw("trusted_proxies")); err != nil {
		l.fail("trusted_proxies", "%v; %s", err, l.example("trusted_proxies"))
	}
	if c.DebugAddr = l.v.raw("debug_addr"); c.DebugAddr != "" {
		if host, _, err := net.SplitHostPort(c.DebugAddr); err != nil || !loopback.Host(host) {
			l.fail("debug_addr", "the profiling listener listens on loopback only (127.0.0.1:PORT, [::1]:PORT or localhost:PORT), %s, got %q", l.example("debug_addr"), c.DebugAddr)
		}
	}
	c.BodyReadTimeout = l.duration("body_read_timeout", time.Second, 10*time.Minute)
	c.ShutdownGrace = l.duration("shutdown_grace", time.Second, 10*time.Minute)
}

// publicURL returns the public URL given, without its trailing slash, or nil after adding
// its problem.
func (l *loading) publicURL(given string) *url.URL {
	example := l.example("public_url")
	if l.mode == cmdDev {
		example = l.exampleOf("public_url", "http://127.0.0.1:8080")
	}
	u, err := url.Parse(given)
	given = redactedURL(given)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		l.fail("public_url", "want an absolute http(s) URL, %s, got %q", example, given)
	case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		l.fail("public_url", "no query, fragment or user info, %s, got %q", example, given)
	case l.mode == cmdDev && !loopback.Host(u.Hostname()):
		l.fail("public_url", "urlflow dev serves loopback only, %s, got %q", example, given)
	case l.mode == cmdServe && u.Scheme != "https" && !loopback.Host(u.Hostname()):
		l.fail("public_url", "must be https (cookies and tokens travel over it), %s, got %q", example, given)
	default:
		u.Path = strings.TrimRight(u.Path, "/")
		return u
	}
	return nil
}

// redactedURL is raw, a URL as given, to quote in a problem: with the password of its user
// info masked, and not at all when it does not parse (it could hold one anywhere).
func redactedURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(not shown: it does not parse as a URL)"
	}
	return u.Redacted()
}

// loadLogs checks the log level and format.
func (c *config) loadLogs(l *loading) {
	if err := c.LogLevel.UnmarshalText([]byte(l.v.raw("log_level"))); err != nil || strings.ContainsAny(l.v.raw("log_level"), "+-") {
		l.fail("log_level", "want debug, info, warn or error, got %q", l.v.raw("log_level"))
	}
	switch c.LogFormat = l.v.raw("log_format"); c.LogFormat {
	case "text", "json":
	default:
		l.fail("log_format", "want text or json, got %q", c.LogFormat)
	}
}

// redisSchemes are the beginnings of the Redis URLs go-redis reads.
var redisSchemes = []string{"redis://", "rediss://", "unix://"}

// loadRedis checks where Redis is: the URL's form here, the rest when connecting. The
// URL is not quoted in errors, since it may hold a password.
func (c *config) loadRedis(l *loading) {
	c.RedisURL = l.v.raw("redis_url")
	if c.RedisURL != "" && !slices.ContainsFunc(redisSchemes, func(s string) bool { return strings.HasPrefix(c.RedisURL, s) }) {
		l.fail("redis_url", "want redis://HOST:PORT (rediss:// for TLS, unix:///PATH for a socket), as in redis://127.0.0.1:6379")
	}
	var err error
	if c.RedisTopology, err = state.ParseTopology(l.v.raw("redis_topology")); err != nil {
		l.fail("redis_topology", "%v", err)
	} else if c.RedisTopology != state.Standalone && c.RedisURL == "" {
		l.problemf("%s: %s needs URLFLOW_REDIS_URL, the nodes to start from, e.g. URLFLOW_REDIS_URL=redis://host1:6379?addr=host2:6379",
			l.named("redis_topology"), c.RedisTopology)
	}
}

// loadKeys parses the key ring, when one is set (urlflow dev makes its own otherwise).
func (c *config) loadKeys(l *loading) {
	if !l.v["keys"].given() || l.v.raw("keys") == "" {
		return // unset, or set empty: reported once as missing where the key ring is required
	}
	c.keysGiven = true
	var err error
	if c.Keys, err = vault.ParseKeyRing(l.v.raw("keys")); err != nil {
		l.fail("keys", "%v; a key ring is kid:base64-of-32-bytes, comma separated, e.g. one made by: echo k1:$(openssl rand -base64 32)", err)
	}
}

// loadUserReferences parses the key of the user references, which urlflow serve requires
// when it has services to give references to (urlflow dev keeps its own otherwise).
func (c *config) loadUserReferences(l *loading) {
	if text := l.v.raw("user_reference_key"); text != "" {
		var err error
		if c.UserRefs, err = userref.Parse(text); err != nil {
			l.fail("user_reference_key", "%v", err)
		}
		return
	}
	if l.mode == cmdServe && c.Services != nil && len(c.Services.List()) > 0 {
		l.problemf("%s is required: the configuration file has services, which know their users by references made with this key (base64 of 32 random bytes, e.g. from: openssl rand -base64 32); keep it with the key ring, as changing it changes every reference",
			l.named("user_reference_key"))
	}
}

// MinElicitationTTL is the shortest time a link may be valid for: a person must have the
// time to read the request, find the secret and enter it.
const MinElicitationTTL = 2 * time.Minute

// loadElicitation checks the elicitation style and the time a link is valid.
func (c *config) loadElicitation(l *loading) {
	switch style := mcp.Style(l.v.raw("elicitation_style")); style {
	case mcp.StylePush, mcp.StyleError:
		c.Style = style
	default:
		l.fail("elicitation_style", "want push or error, got %q", style)
	}
	c.TTL = l.duration("elicitation_ttl", MinElicitationTTL, 24*time.Hour)
	if l.v["test_elicitation_ttl"].given() { // dev only: tests that watch a link lapse
		c.TTL = l.duration("test_elicitation_ttl", time.Second, 24*time.Hour)
	}
	c.FlowRetention = l.duration("flow_retention", time.Hour, 365*24*time.Hour)
}

// loadMCPSessions checks the limits of MCP sessions.
func (c *config) loadMCPSessions(l *loading) {
	c.MCPSessions.PerUser = int(l.number("mcp_sessions_per_user", 1, 10_000))
	c.MCPSessions.IdleTimeout = l.duration("mcp_session_idle_timeout", time.Minute, 24*time.Hour)
}

// loadRateLimits parses the rate limits.
func (c *config) loadRateLimits(l *loading) {
	for _, rl := range []struct {
		name  string
		limit *ratelimit.Limit
	}{
		{"rate_limit_mcp", &c.RateLimits.MCP}, {"rate_limit_forms", &c.RateLimits.Forms},
		{"rate_limit_bad_tokens", &c.RateLimits.BadTokens}, {"rate_limit_services", &c.RateLimits.Services},
	} {
		var err error
		if *rl.limit, err = ratelimit.ParseLimit(l.v.raw(rl.name)); err != nil {
			l.fail(rl.name, "%v (%s)", err, l.example(rl.name))
		}
	}
}

// loadOperators reads the operator tokens, the operators: section of the file, and the
// bounds of the audit trail.
func (c *config) loadOperators(l *loading, file operatorsConfig) {
	c.OperatorTokens = l.tokens("operator_tokens")
	c.OperatorReadOnlyTokens = l.tokens("operator_readonly_tokens")
	c.StuckAfter = file.stuckAfter(l.fileProblemf)
	c.OperatorSubjects = file.Subjects
	c.OperatorReadOnlySubjects = file.ReadOnlySubjects
	if l.mode == cmdDev {
		c.OperatorSubjects = append(c.OperatorSubjects, identity.DevOperator)
		c.OperatorReadOnlySubjects = append(c.OperatorReadOnlySubjects, identity.DevViewer)
	}
	c.OperatorClaim, c.OperatorClaimValue = file.Claim.Name, file.Claim.Value
	if (c.OperatorClaim == "") != (c.OperatorClaimValue == "") {
		l.fileProblemf("operators.claim", "set both name and value, e.g. claim: {name: groups, value: urlflow-operators}")
	}
	c.AuditRetention = l.duration("audit_retention", time.Hour, 3650*24*time.Hour)
	c.AuditMaxEntries = l.number("audit_max_entries", 10_000, 1_000_000_000)
}

// loadBrand reads the branding: section of the file. A logo's relative path is relative
// to the file's directory.
func (c *config) loadBrand(l *loading, file brand.Config) {
	readFile := func(path string) ([]byte, error) {
		if !filepath.IsAbs(path) && c.ConfigFile != "" {
			path = filepath.Join(filepath.Dir(c.ConfigFile), path)
		}
		return os.ReadFile(path)
	}
	b, problems := brand.Load(file, readFile)
	for _, p := range problems {
		l.fileProblemf(p.Path, "%s", p.Message)
	}
	c.Brand = b
}

// loadMessages reads the messages: section of the file: the operator's own wording over the
// catalogs.
func (c *config) loadMessages(l *loading, overrides locale.Overrides) {
	catalog, err := locale.Load(overrides)
	var problems locale.OverrideProblems
	switch {
	case errors.As(err, &problems):
		for _, p := range problems {
			l.fileProblemf("messages."+p.Language, "%s", p.Message)
		}
	case err != nil:
		l.fileProblemf("messages", "%v", err)
	default:
		if c.Catalog, err = catalog.WithDefault(l.v.raw("default_language")); err != nil {
			l.fail("default_language", "%v", err)
		}
	}
}

// loadIdentity reads what only urlflow serve needs: the deployment's OpenID issuer and the
// client urlflow is registered as there. serve never falls back to development defaults.
func (c *config) loadIdentity(l *loading) {
	if l.mode != cmdServe {
		return
	}
	c.OIDC.Issuer = l.v.raw("oidc_issuer")
	if u, err := url.Parse(c.OIDC.Issuer); c.OIDC.Issuer != "" &&
		(err != nil || u.Host == "" || (u.Scheme != "https" && !(u.Scheme == "http" && loopback.Host(u.Hostname())))) {
		l.fail("oidc_issuer", "want an https URL (http only on loopback), %s, got %q", l.example("oidc_issuer"), redactedURL(c.OIDC.Issuer))
	}
	c.OIDC.ClientID = l.v.raw("oidc_client_id")
	c.OIDC.ClientSecret = l.v.raw("oidc_client_secret")
	c.OIDC.Scopes = strings.FieldsFunc(l.v.raw("oidc_scopes"), func(r rune) bool { return r == ' ' || r == ',' })
	switch v := l.v.raw("oidc_introspection"); v {
	case "true", "1", "yes":
		c.OIDC.Introspection = true
	case "false", "0", "no":
	default:
		l.fail("oidc_introspection", "want true or false, %s, got %q", l.example("oidc_introspection"), v)
	}
}

// loadDevelopment checks the resource of urlflow dev's demo service.
func (c *config) loadDevelopment(l *loading) {
	if l.mode != cmdDev {
		return
	}
	c.DemoResource = l.v.raw("dev_demo_resource")
	if u, err := url.Parse(c.DemoResource); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		l.fail("dev_demo_resource", "want the demo service's MCP URL (absolute http or https), %s, got %q", l.example("dev_demo_resource"), c.DemoResource)
	}
}

// loadTestSettings reads the test-only settings that are set (readSettings refuses them
// where they are not accepted).
func (c *config) loadTestSettings(l *loading) {
	for _, ts := range testSettings {
		if l.v[ts.name].given() {
			*ts.wait(&c.Waits) = l.duration(ts.name, 10*time.Millisecond, time.Hour)
		}
	}
}

// loadCatalogs checks the file's secret slots, providers and services now; they are built
// again once the public URL is known (resolvePublicURL, runService).
func (c *config) loadCatalogs(l *loading, file fileConfig, getenv env) {
	c.secrets, c.providers, c.services = file.Secrets, file.Providers, file.Services
	if _, err := slots.NewCatalog(c.secrets, "http://127.0.0.1"); err != nil {
		l.catalogProblems(err)
	}
	// Providers name the variables of their client secrets (client_secret_env): those are
	// the file's, not settings of urlflow.
	if _, err := providers.New(context.Background(), c.providers, providers.Options{
		PublicURL: "http://127.0.0.1", Getenv: getenv, CheckOnly: true,
	}); err != nil {
		l.catalogProblems(err)
	}
	for i, p := range c.providers {
		if hasSlot(c.secrets, p.Name) {
			l.fileProblemf(fmt.Sprintf("providers[%d]", i), "%q is both a secret slot and a provider: rename one", p.Name)
		}
	}
	if err := c.buildServices(nil); err != nil {
		l.catalogProblems(errors.Unwrap(err)) // without buildServices' "configuration file" prefix
	}
}

// tokens reads the comma-separated operator tokens of setting name, each at least 16
// characters long; its problems never show a token.
func (l *loading) tokens(name string) []string {
	var out []string
	for _, t := range strings.Split(l.v.raw(name), ",") {
		if t = strings.TrimSpace(t); t != "" {
			if len(t) < 16 {
				l.fail(name, "every token needs at least 16 characters, e.g. one made by: openssl rand -hex 16")
				return out
			}
			out = append(out, t)
		}
	}
	return out
}

// duration returns setting name as a duration from least to most, or adds its problem.
func (l *loading) duration(name string, least, most time.Duration) time.Duration {
	raw := l.v.raw(name)
	d, err := time.ParseDuration(raw)
	switch {
	case err != nil:
		l.fail(name, "want a duration (a number and a unit: ms, s, m or h), %s, got %q", l.example(name), raw)
	case d < least || d > most:
		l.fail(name, "want a duration from %s to %s, %s, got %q", durationText(least), durationText(most), l.example(name), raw)
	default:
		return d
	}
	return 0
}

// number returns setting name as a number from least to most, or adds its problem.
func (l *loading) number(name string, least, most int64) int64 {
	raw := l.v.raw(name)
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || n < least || n > most {
		l.fail(name, "want a number from %d to %d, %s, got %q", least, most, l.example(name), raw)
		return 0
	}
	return n
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

func describeFile(path string) string {
	if path == "" {
		return "(built-in demo)"
	}
	return path
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
