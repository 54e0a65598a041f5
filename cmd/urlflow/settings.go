package main

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/urlflow/urlflow/mcp"
	"github.com/urlflow/urlflow/state/audit"
	"github.com/urlflow/urlflow/state/flow"
	"github.com/urlflow/urlflow/web"
)

// A setting is one row of the settings table: everything the loader, the generated
// docs/configuration.md and docs/urlflow.schema.json, and `urlflow config check` know about
// one setting. readSettings reads every row the same way; the validators of config.go turn the
// values into the config, section by section.
type setting struct {
	// Name identifies the setting in the code: the variable's name without URLFLOW_, in
	// lower case.
	Name string
	// Section is the name of the section the setting belongs to (sections).
	Section string
	// Flag is the command-line flag (--Flag), Env the environment variable, YAML the key at
	// the top of the configuration file; empty when the setting has none.
	Flag, Env, YAML string
	// Type says what the value is, for people and schemas.
	Type string
	// Default is the value when nothing sets it; DefaultIn holds a command's own default
	// where it differs. DefaultNote says in words what an empty default means.
	Default     string
	DefaultIn   map[string]string
	DefaultNote string
	// Example is a valid value.
	Example string
	// Summary is one line for the flag's help; Description the whole story, for the docs.
	Summary, Description string
	// Secret settings also read NAME_FILE (a file that holds the value), and their value is
	// never shown.
	Secret bool
	// Commands are the commands that read the setting, and their subcommands ("hook"
	// stands for every urlflow hook command).
	Commands []string
	// Required are the commands that refuse to start without it, RequiredWhy says why.
	Required    []string
	RequiredWhy string
	// TestOnly settings shorten a product timeout for the end-to-end tests: the commands
	// in RefusedBy refuse to start when one is set.
	TestOnly  bool
	RefusedBy []string
}

// A section groups settings in the docs and in validation.
type section struct {
	Name, Title, Intro string
}

// The commands that read settings.
const (
	cmdDev   = "dev"
	cmdServe = "serve"
	cmdFlows = "flows"
	cmdAudit = "audit"
	cmdUsers = "users"
	cmdHook  = "hook"
	// cmdHookServe is the one hook command that reads a setting of its own.
	cmdHookServe = "hook serve"
	// The keys commands that reach Redis read where it is and the key ring.
	cmdKeysStatus  = "keys status"
	cmdKeysReseal  = "keys reseal"
	cmdKeysRecount = "keys recount"
	// cmdHealthcheck reads the address serve listens on, to ask it /readyz.
	cmdHealthcheck = "healthcheck"
)

var (
	forServers   = []string{cmdDev, cmdServe}
	forOperators = []string{cmdFlows, cmdAudit, cmdUsers}
	forDev       = []string{cmdDev}
	forServe     = []string{cmdServe}
	forKeys      = []string{cmdKeysStatus, cmdKeysReseal, cmdKeysRecount}
)

// sections are the sections of the settings table, in the order of the docs.
var sections = []section{
	{"listen", "Listening and addresses", "Where urlflow listens and the URL people and clients reach it at."},
	{"file", "The configuration file", "The YAML file. Its top level may set the settings of this page that have a YAML key; its sections are at the end of this page."},
	{"logs", "Logs", "What urlflow logs, and how: on stderr, one line per event, with go-redis's own messages among them."},
	{"redis", "Redis", "Where urlflow keeps elicitations, credentials and sessions."},
	{"keys", "Keys", "The key ring that encrypts credentials."},
	{"elicitation", "Elicitations", "How urlflow asks, and for how long a link is valid."},
	{"mcp", "MCP sessions", "The limits of the MCP sessions of 2025-11-25 clients."},
	{"limits", "Rate limits", "Each `EVENTS/WINDOW` (a window of whole seconds from 1s to 24h), or `off`."},
	{"operators", "Operators and the audit trail", "Operator tokens and how much of the audit trail is kept (see docs/operating.md)."},
	{"identity", "Production identity (`urlflow serve`)", "Your OpenID issuer: MCP access tokens must carry the resource (public URL + `/mcp`) in `aud`."},
	{"development", "Development (`urlflow dev`)", ""},
	{"testing", "Test-only settings", "Each shortens one of the product's waits so that an end-to-end test need not wait it out (a duration from 10ms to 1h); `urlflow dev` accepts them and `urlflow serve` refuses to start with one set."},
	{"operator-commands", "Operators' commands (`urlflow flows`, `urlflow audit export`)", "Where the commands for operators send their requests, and with what token."},
	{"hook", "Claude Code hook (`urlflow hook`)", ""},
	{"environment", "Other programs' variables", "Variables of other programs that urlflow honours."},
}

// settingsTable is every setting of urlflow, in the order of the docs.
var settingsTable = []setting{
	{Name: "addr", Section: "listen", Flag: "addr", Env: "URLFLOW_ADDR", YAML: "addr", Type: "host:port",
		Default: "127.0.0.1:8080", DefaultIn: map[string]string{cmdServe: ":8080", cmdHealthcheck: ":8080"}, Example: "127.0.0.1:0",
		Commands:    []string{cmdDev, cmdServe, cmdHealthcheck},
		Summary:     "listen address",
		Description: "The address urlflow listens on. `urlflow dev` accepts loopback only (127.0.0.1, [::1] or localhost); port 0 picks a free port. `urlflow healthcheck` asks `/readyz` at this address (on loopback when the host is empty, 0.0.0.0 or ::), from the flag or the environment, not the configuration file."},
	{Name: "public_url", Section: "listen", Flag: "public-url", Env: "URLFLOW_PUBLIC_URL", YAML: "public_url", Type: "URL",
		DefaultNote: "`http://` + the address as given", Example: "https://urlflow.example.com", Commands: forServers,
		Required: forServe, RequiredWhy: "the https URL users and clients reach urlflow at (behind a TLS proxy, its outside address)",
		Summary:     "URL users reach urlflow at",
		Description: "Every URL urlflow hands out starts with it; the MCP resource is this + `/mcp`. No query, fragment or user info. `urlflow dev` serves loopback only; `urlflow serve` wants https (cookies and tokens travel over it), except on loopback."},
	{Name: "trusted_proxies", Section: "listen", Flag: "trusted-proxies", Env: "URLFLOW_TRUSTED_PROXIES", YAML: "trusted_proxies", Type: "list of IPs and CIDR prefixes",
		DefaultNote: "none", Example: "10.0.0.0/8, 192.0.2.7", Commands: forServers,
		Summary:     "reverse proxies whose X-Forwarded-For is believed: IPs and CIDRs, comma separated",
		Description: "Reverse proxies whose `X-Forwarded-For` is believed: IP addresses and CIDR prefixes, comma separated. The client address is then the rightmost entry that is not a trusted proxy. Without it, the TCP peer."},
	{Name: "debug_addr", Section: "listen", Env: "URLFLOW_DEBUG_ADDR", Type: "host:port",
		DefaultNote: "none (off)", Example: "127.0.0.1:6060", Commands: forServers,
		Summary:     "loopback address of the profiling listener",
		Description: "A loopback address where urlflow serves Go's profiler, `net/http/pprof`, under `/debug/pprof/`, on a listener of its own; a non-loopback address is refused. It shows the process's memory and stacks: reach it through an SSH tunnel or `kubectl port-forward`, e.g. `go tool pprof http://127.0.0.1:6060/debug/pprof/profile?seconds=30`."},
	{Name: "body_read_timeout", Section: "listen", Env: "URLFLOW_BODY_READ_TIMEOUT", Type: "duration",
		Default: durationText(web.DefaultBodyReadTimeout), Example: "45s", Commands: forServers,
		Summary:     "the time a request has to send its body (1s to 10m)",
		Description: "The time a request has to send its body once its headers have arrived (1s to 10m); past it the request fails (the pages and the API answer `408`) and the connection is closed. It bounds reading only: answers, event streams and tool calls that wait are not cut."},

	{Name: "shutdown_grace", Section: "listen", Env: "URLFLOW_SHUTDOWN_GRACE", Type: "duration",
		Default: durationText(defaultShutdownGrace), Example: "90s", Commands: forServers,
		Summary:     "the time a stopping urlflow gives the requests in progress (1s to 10m)",
		Description: "On SIGTERM or SIGINT urlflow drains: `/readyz` answers `503` at once (load balancers send new requests elsewhere), new 2025-11-25 MCP sessions are refused with `503`, and the requests in progress (a push-style tool call waiting for its user, a secret being checked) have up to this long to finish while everything else is still served, so that a user who is on a page can finish there. Then the listener closes, and open streams get 5 more seconds. The default is the longest wait of a push-style call (50s) and 10 seconds more; give the orchestrator's own grace period (`terminationGracePeriodSeconds`, systemd's `TimeoutStopSec`) this and 10 seconds more."},

	{Name: "log_level", Section: "logs", Flag: "log-level", Env: "URLFLOW_LOG_LEVEL", YAML: "log_level", Type: "debug, info, warn or error",
		Default: "info", Example: "debug", Commands: forServers,
		Summary:     "the least important events logged",
		Description: "The least important events logged: `debug` adds what helps to follow one request through urlflow; `warn` keeps only what may need attention. Secrets and tokens are never logged at any level."},
	{Name: "log_format", Section: "logs", Flag: "log-format", Env: "URLFLOW_LOG_FORMAT", YAML: "log_format", Type: "text or json",
		Default: "text", DefaultIn: map[string]string{cmdServe: "json"}, Example: "json", Commands: forServers,
		Summary:     "text for people, json for a log collector",
		Description: "`text` (key=value, the default of `urlflow dev`) or `json` (one object per line, the default of `urlflow serve`, for a log collector)."},

	{Name: "config", Section: "file", Flag: "config", Env: "URLFLOW_CONFIG", Type: "path",
		DefaultNote: "the built-in demo in urlflow dev, none in serve", Example: "/etc/urlflow/urlflow.yaml", Commands: forServers,
		Summary:     "YAML configuration file",
		Description: "The YAML configuration file: secret slots, providers, services, operators, and the settings of this table that have a YAML key. Unknown keys are errors; urlflow checks the whole file at start and names every problem."},

	{Name: "redis_url", Section: "redis", Env: "URLFLOW_REDIS_URL", Type: "URL", Secret: true,
		DefaultNote: "an embedded in-process Redis in urlflow dev", Example: "redis://redis:6379", Commands: slices.Concat(forServers, forKeys),
		Required: slices.Concat(forServe, forKeys), RequiredWhy: "urlflow serve and the keys commands never run the embedded Redis",
		Summary:     "the Redis URL",
		Description: "`redis://[user:password@]host:port[/db]` or `rediss://`. Without it `urlflow dev` starts an in-process Redis (miniredis) and says so: everything is lost when it stops. For a Cluster or Sentinel see `URLFLOW_REDIS_TOPOLOGY`."},
	{Name: "redis_topology", Section: "redis", Env: "URLFLOW_REDIS_TOPOLOGY", Type: "standalone, cluster or sentinel",
		Default: "standalone", Example: "cluster", Commands: slices.Concat(forServers, forKeys),
		Summary:     "standalone, cluster or sentinel",
		Description: "`standalone`; `cluster`: the URL names seed nodes, `redis://[user:password@]host:port?addr=host2:port2&addr=host3:port3`; `sentinel`: the URL names the sentinels and the primary, `redis://[sentinel-user:sentinel-password@]host:port?master_name=NAME&addr=host2:port2` (the primary's own credentials in the `username` and `password` parameters). Every key that an atomic change touches carries the user's hash tag, so each change stays in one Cluster slot. With `rediss://`, go-redis checks every node's certificate against the first host's name."},

	{Name: "keys", Section: "keys", Env: "URLFLOW_KEYS", Type: "key ring", Secret: true,
		DefaultNote: "generated in urlflow dev, and kept in its dev.json", Example: "k2:<base64 of 32 bytes>,k1:<base64 of 32 bytes>", Commands: slices.Concat(forServers, forKeys),
		Required: slices.Concat(forServe, forKeys), RequiredWhy: "the key ring that encrypts credentials (kid:base64-of-32-bytes, comma separated; urlflow keys generate makes an entry)",
		Summary:     "the key ring: kid:base64-of-32-bytes, comma separated",
		Description: "Key ring `kid:base64-of-32-bytes`, comma separated; `urlflow keys generate` prints an entry. The first key is active: it encrypts new credentials and signs browser sessions, CSRF tokens, requestStates and elicitation IDs. Every other key is verify-only: it still decrypts and verifies what it made, so adding a key signs nobody out. To rotate: add the new key at the end on every replica, then move it to the front, run `urlflow keys reseal`, and remove the old key last (docs/production.md#keys-and-rotation). urlflow refuses to start when stored credentials need a key that is not in the ring."},

	{Name: "user_reference_key", Section: "keys", Env: "URLFLOW_USER_REFERENCE_KEY", Type: "key", Secret: true,
		DefaultNote: "generated in urlflow dev, and kept in its dev.json", Example: "<base64 of 32 bytes>", Commands: forServers,
		Summary:     "the key of the user references services know users by (base64 of 32 bytes or more)",
		Description: "The key of the user references: each delegating service knows a user by an opaque reference (`usr_` and 32 letters and digits), a keyed hash of the service, the issuer and the subject, the same in every answer, event and webhook, and different at every service. Base64 of 32 or more random bytes, e.g. from `openssl rand -base64 32`. `urlflow serve` requires it when the configuration file has services. It is not part of `URLFLOW_KEYS` and never rotates with it: changing it changes every reference every service has stored, so set it once and keep it with the key ring (docs/production.md#keys-and-rotation)."},

	{Name: "elicitation_style", Section: "elicitation", Env: "URLFLOW_ELICITATION_STYLE", YAML: "elicitation_style", Type: "push or error",
		Default: string(mcp.StylePush), Example: string(mcp.StyleError), Commands: forServers,
		Summary:     "push or error, for 2025-11-25 clients with URL mode",
		Description: "`push` or `error`, for 2025-11-25 clients with URL mode."},
	{Name: "elicitation_ttl", Section: "elicitation", Env: "URLFLOW_ELICITATION_TTL", YAML: "elicitation_ttl", Type: "duration",
		Default: "10m", Example: "30m", Commands: forServers,
		Summary:     "time from creation to the deadline (2m to 24h)",
		Description: "The time from an elicitation's creation to its deadline (2m to 24h): the time a person has to read the request, find the secret and enter it, or to approve the grant. The pages show it, and below 2 minutes too many people would lose their link while they look for the secret (WCAG 2.2.1, docs/reference.md)."},
	{Name: "flow_retention", Section: "elicitation", Env: "URLFLOW_FLOW_RETENTION", YAML: "flow_retention", Type: "duration",
		Default: durationText(flow.DefaultRetention), Example: "48h", Commands: forServers,
		Summary:     "how long an ended flow is kept after its deadline (1h to 8760h)",
		Description: "How long an elicitation's record, history and index entries are kept after its deadline (1h to 8760h, a year): what `urlflow flows`, `/admin`, `elicitation_status` and the status API can show of an ended flow. The audit trail keeps its events for `audit_retention`, apart. Redis holds about 1.4 KB per ended flow for this long (docs/performance.md, \"Footprint\")."},

	{Name: "default_language", Section: "elicitation", Env: "URLFLOW_DEFAULT_LANGUAGE", YAML: "default_language", Type: "language tag",
		Default: "en", Example: "de", Commands: forServers,
		Summary:     "the language of readers who ask for none urlflow has: en, ar, de, es, fr or ja",
		Description: "The language of the pages for a reader whose browser asks for none that urlflow has, and of the words of MCP results for a user who has not yet read urlflow's pages (after that, results come in the language of the pages they last read): `en`, `ar`, `de`, `es`, `fr` or `ja` (docs/languages.md)."},

	{Name: "mcp_sessions_per_user", Section: "mcp", Env: "URLFLOW_MCP_SESSIONS_PER_USER", Type: "integer",
		Default: strconv.Itoa(mcp.DefaultSessionsPerUser), Example: "50", Commands: forServers,
		Summary:     "live MCP sessions per user (1 to 10000)",
		Description: "Live MCP sessions (2025-11-25) per user, counted on all replicas (1 to 10000). A new session beyond it closes the user's least recently used session that has no tool call in progress and no completion notification owed (as known at the last 30-second refresh for a session on another replica); when every session has one, `initialize` gets `429` with a JSON-RPC error that says why."},
	{Name: "mcp_session_idle_timeout", Section: "mcp", Env: "URLFLOW_MCP_SESSION_IDLE_TIMEOUT", Type: "duration",
		Default: durationText(mcp.DefaultSessionIdleTimeout), Example: "30m", Commands: forServers,
		Summary:     "an idle MCP session is closed after this long (1m to 24h)",
		Description: "An MCP session that sends no request for this long is closed (1m to 24h)."},

	{Name: "rate_limit_mcp", Section: "limits", Env: "URLFLOW_RATE_LIMIT_MCP", Type: "rate limit",
		Default: "1200/1m", Example: "600/1m", Commands: forServers,
		Summary:     "requests to /mcp per user and window",
		Description: "Requests to `/mcp` per user and window; over it, `429` with `Retry-After` and the request is not served."},
	{Name: "rate_limit_forms", Section: "limits", Env: "URLFLOW_RATE_LIMIT_FORMS", Type: "rate limit",
		Default: "30/1m", Example: "10/1m", Commands: forServers,
		Summary:     "secret-form and connect posts per user and window",
		Description: "Secret-form and connect posts per user and window (each may make urlflow call out: a secret checked with its API, a connect that leaves for the provider); over it, a `429` page with `Retry-After` that changes nothing."},
	{Name: "rate_limit_bad_tokens", Section: "limits", Env: "URLFLOW_RATE_LIMIT_BAD_TOKENS", Type: "rate limit",
		Default: "20/1m", Example: "off", Commands: forServers,
		Summary:     "bearer tokens that do not verify, per client address and window",
		Description: "Bearer tokens that do not verify per client address and window, `/mcp` and the API together, counted in each replica's memory; over it, `429` with `Retry-After` and the address's tokens are not checked (one that verified in the last hour still is). See *Calls to your issuer* in docs/security.md."},
	{Name: "rate_limit_services", Section: "limits", Env: "URLFLOW_RATE_LIMIT_SERVICES", Type: "rate limit",
		Default: "6000/1m", Example: "1000/1m", Commands: forServers,
		Summary:     "API requests per delegating service and window",
		Description: "API requests per delegating service and window, for every service without its own `rate_limit`; over it, `429` with `Retry-After` and nothing is done."},

	{Name: "operator_tokens", Section: "operators", Env: "URLFLOW_OPERATOR_TOKENS", Type: "list of tokens", Secret: true,
		DefaultNote: "generated in urlflow dev", Example: "<a token of 16 or more characters>", Commands: forServers,
		Summary:     "operator tokens (read and act), comma separated",
		Description: "Comma-separated operator tokens (at least 16 characters each) that may read and act."},
	{Name: "operator_readonly_tokens", Section: "operators", Env: "URLFLOW_OPERATOR_READONLY_TOKENS", Type: "list of tokens", Secret: true,
		DefaultNote: "none", Example: "<a token of 16 or more characters>", Commands: forServers,
		Summary:     "operator tokens that may only read, comma separated",
		Description: "Comma-separated operator tokens (at least 16 characters each) that may only read (list, summary, status, audit export, given-up webhooks; not cancel, retry or webhook redelivery)."},
	{Name: "audit_retention", Section: "operators", Env: "URLFLOW_AUDIT_RETENTION", Type: "duration",
		Default: durationText(audit.DefaultRetention), Example: "2160h", Commands: forServers,
		Summary:     "how long the audit trail keeps events (1h to 87600h)",
		Description: "How long the audit trail keeps events (1h to 87600h, ten years)."},
	{Name: "audit_max_entries", Section: "operators", Env: "URLFLOW_AUDIT_MAX_ENTRIES", Type: "integer",
		Default: strconv.Itoa(audit.DefaultMaxEntries), Example: "500000", Commands: forServers,
		Summary:     "about how many events the audit trail keeps at most",
		Description: "About how many events the audit trail keeps at most (10000 to 1000000000; about 0.5 KB each)."},

	{Name: "oidc_issuer", Section: "identity", Env: "URLFLOW_OIDC_ISSUER", Type: "URL",
		Example: "https://id.example.com", Commands: forServe,
		Required: forServe, RequiredWhy: "the OpenID issuer of your users (MCP access tokens and browser sign-in)",
		Summary:     "your OpenID issuer",
		Description: "Your OpenID issuer: MCP access tokens and the browser sign-in. https, except on loopback."},
	{Name: "oidc_client_id", Section: "identity", Env: "URLFLOW_OIDC_CLIENT_ID", Type: "string",
		Example: "urlflow", Commands: forServe,
		Required: forServe, RequiredWhy: "the client urlflow is registered as at the issuer (redirect URI: public URL + /auth/callback)",
		Summary:     "the client urlflow is registered as at the issuer",
		Description: "The client urlflow is registered as at the issuer (a confidential client with the redirect URI public URL + `/auth/callback`)."},
	{Name: "oidc_client_secret", Section: "identity", Env: "URLFLOW_OIDC_CLIENT_SECRET", Type: "string", Secret: true,
		Example: "<the client's secret>", Commands: forServe, Required: forServe,
		Summary:     "the secret of that client",
		Description: "The secret of the client urlflow is registered as."},
	{Name: "oidc_scopes", Section: "identity", Env: "URLFLOW_OIDC_SCOPES", Type: "list of scopes",
		DefaultNote: "none", Example: "mcp:tools openid", Commands: forServe,
		Summary:     "scopes every user's access token must carry",
		Description: "Scopes every user's access token must carry, space or comma separated (a service's client credentials token carries its `client_scopes` instead)."},
	{Name: "oidc_introspection", Section: "identity", Env: "URLFLOW_OIDC_INTROSPECTION", Type: "boolean",
		Default: "false", Example: "true", Commands: forServe,
		Summary:     "check non-JWT access tokens by RFC 7662 introspection",
		Description: "Check access tokens that are not JWTs by RFC 7662 introspection at the issuer, with urlflow's client credentials (`true` or `false`)."},

	{Name: "dev_demo_resource", Section: "development", Env: "URLFLOW_DEV_DEMO_RESOURCE", Type: "URL",
		Default: defaultDemoResource, Example: "http://127.0.0.1:9000/mcp", Commands: forDev,
		Summary:     "the MCP URL of urlflow dev's demo service",
		Description: "The resource (MCP URL) of `urlflow dev`'s development delegating service `demo`: its users' tokens name it."},

	testSetting("test_push_wait", "the push-style wait without a progress token (50s)"),
	testSetting("test_progress_interval", "the time between progress notifications (15s)"),
	testSetting("test_retry_wait", "the wait of a multi round-trip retry (25s)"),
	testSetting("test_status_wait_limit", "the cap of `elicitation_status`'s `waitSeconds` (60s)"),
	testSetting("test_webhook_retry", "every wait of the webhook schedule after the first attempt (5s, 5m, 30m, 2h, 5h, 10h, 10h)"),
	testSetting("test_elicitation_ttl", "the time from an elicitation's creation to its deadline below the floor of `elicitation_ttl` (2m)"),
	testSetting("test_replica_heartbeat", "the lifetime of a replica's heartbeat, after which its MCP sessions count as ended (10s)"),

	{Name: "server", Section: "operator-commands", Flag: "server", Env: "URLFLOW_SERVER", Type: "URL",
		Default: "http://127.0.0.1:8080", Example: "https://urlflow.example.com", Commands: forOperators,
		Summary:     "urlflow's public URL",
		Description: "The public URL of the urlflow that the commands for operators talk to."},
	{Name: "token", Section: "operator-commands", Flag: "token", Env: "URLFLOW_TOKEN", Type: "string", Secret: true,
		Example: "<an operator token>", Commands: forOperators,
		Summary:     "an operator token; prefer URLFLOW_TOKEN, as a flag shows in the process list",
		Description: "An operator token (read-only tokens may list, show, summarise and export). Prefer the environment or its `_FILE` to the flag: a flag shows in the process list."},

	{Name: "hook_token", Section: "hook", Env: "URLFLOW_HOOK_TOKEN", Type: "string", Secret: true,
		Example: "<16 or more characters>", Commands: []string{cmdHookServe},
		Summary:     "the shared token of urlflow hook serve",
		Description: "The shared token of `urlflow hook serve` (at least 16 characters): Claude Code's http hook sends it as its `Authorization` header."},

	{Name: "no_color", Section: "environment", Env: "NO_COLOR", Type: "any value",
		Example: "1", Commands: []string{cmdFlows},
		Summary:     "no colour in tables",
		Description: "When set (to anything but the empty string), `urlflow flows` prints its tables without colour; they have none anyway unless written to a terminal."},
	{Name: "claude_config_dir", Section: "environment", Env: "CLAUDE_CONFIG_DIR", Type: "path",
		DefaultNote: "`~/.claude/settings.json` and `~/.claude.json`", Example: "/home/you/.config/claude", Commands: []string{cmdHook},
		Summary:     "Claude Code's configuration directory",
		Description: "Claude Code's configuration directory: `urlflow hook install --scope user` edits `settings.json` in it, and the hooks read the MCP servers of `.claude.json` in it."},
}

// testSetting is the row of the test-only setting URLFLOW_<NAME>, which shortens what.
func testSetting(name, what string) setting {
	return setting{Name: name, Section: "testing", Env: "URLFLOW_" + strings.ToUpper(name), Type: "duration",
		Example: "200ms", Commands: forDev, TestOnly: true, RefusedBy: forServe,
		Summary: "test only: shortens " + what, Description: "Shortens " + what + "."}
}

// durationText is d as people write it: 1h, not 1h0m0s.
func durationText(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// lookupSetting returns the row of name; a name that is not in the table is a mistake of
// the code, not of the configuration.
func lookupSetting(name string) *setting {
	i := slices.IndexFunc(settingsTable, func(s setting) bool { return s.Name == name })
	if i < 0 {
		panic(fmt.Sprintf("no setting %q in the settings table", name))
	}
	return &settingsTable[i]
}

// readBy reports whether command reads s: a command named in Commands, or one of its
// subcommands ("hook serve" reads the settings of "hook").
func (s *setting) readBy(command string) bool {
	return slices.ContainsFunc(s.Commands, func(c string) bool { return command == c || strings.HasPrefix(command, c+" ") })
}

// defaultFor returns s's default in command.
func (s *setting) defaultFor(command string) string {
	if d, ok := s.DefaultIn[command]; ok {
		return d
	}
	return s.Default
}

// usage is the help of s's flag: the summary, the variable, and the default.
func (s *setting) usage(command string) string {
	var also []string
	if s.Env != "" {
		also = append(also, s.Env)
	}
	switch d := s.defaultFor(command); {
	case d != "":
		also = append(also, "default "+d)
	case s.DefaultNote != "" && s.DefaultNote != "none":
		also = append(also, "default "+strings.ReplaceAll(s.DefaultNote, "`", ""))
	}
	if len(also) == 0 {
		return s.Summary
	}
	return s.Summary + " (" + strings.Join(also, "; ") + ")"
}

// source is where a setting's value came from.
type source int

const (
	fromNowhere source = iota // not set, and no default
	fromDefault
	fromFile
	fromEnv
	fromEnvFile // the file that a secret's NAME_FILE names
	fromFlag
)

// value is one setting's value as read, and where it came from.
type value struct {
	Raw  string
	From source
	// Line and Column are where the configuration file set it, when From is fromFile.
	Line, Column int
}

// given reports whether a flag, the environment or the configuration file set the value.
func (v value) given() bool { return v.From > fromDefault }

// values are the settings of one command as readSettings read them, by name.
type values map[string]value

// raw returns the value of setting name.
func (v values) raw(name string) string {
	lookupSetting(name) // a misspelt name fails the tests instead of reading ""
	return v[name].Raw
}

// lookupEnv answers for the environment variables of the settings read, as os.LookupEnv
// would, for a package that takes a getenv (hook.ClaudeCodeConfigFromEnv): what it reads
// is then read here, once.
func (v values) lookupEnv(name string) (string, bool) {
	for _, s := range settingsTable {
		if val, ok := v[s.Name]; ok && s.Env == name && val.given() {
			return val.Raw, true
		}
	}
	return "", false
}

// env reads the environment, as os.LookupEnv does; a test replaces it. Only
// readSettings calls it (TestNoSettingIsReadOutsideTheTable).
type env func(string) (string, bool)

// fileSettings are the top-level settings of the configuration file, by YAML key, as
// scalar nodes (which know their line).
type fileSettings map[string]yaml.Node

// readSettings is the one loop that reads settings: every setting of command, each by the
// same rule, flag > environment > configuration file > default. A flag or variable set to
// the empty string counts as not set, except a secret's variable, which counts once it is
// set (so that an empty key ring is an error rather than a generated one). It returns
// every problem: a secret set twice or in a file that cannot be read, a required setting
// missing, a test-only setting set where it is refused.
func readSettings(command string, flags *pflag.FlagSet, getenv env, file fileSettings) (values, []error) {
	out := values{}
	var problems []error
	for i := range settingsTable {
		s := &settingsTable[i]
		if !s.readBy(command) {
			if v, ok := getenv(s.Env); ok && v != "" && slices.Contains(s.RefusedBy, command) {
				problems = append(problems, fmt.Errorf("%s is a test-only setting that only urlflow %s accepts: unset it",
					s.Env, strings.Join(s.Commands, ", ")))
			}
			continue
		}
		v, err := s.read(command, flags, getenv, file)
		switch {
		case err != nil:
			problems = append(problems, err)
		case v.Raw == "" && slices.Contains(s.Required, command):
			problems = append(problems, s.missing())
		}
		out[s.Name] = v
	}
	return out, problems
}

// read reads s for command: its flag, its variable (for a secret, or NAME_FILE), the
// configuration file, its default. Its errors never hold a secret's value.
func (s *setting) read(command string, flags *pflag.FlagSet, getenv env, file fileSettings) (value, error) {
	if s.Flag != "" && flags != nil {
		if f := flags.Lookup(s.Flag); f != nil && f.Value.String() != "" {
			return value{Raw: f.Value.String(), From: fromFlag}, nil
		}
	}
	if v, err := s.fromEnv(getenv); v.From != fromNowhere || err != nil {
		return v, err
	}
	if node, ok := file[s.YAML]; s.YAML != "" && ok && node.Tag != "!!null" && node.Value != "" {
		return value{Raw: node.Value, From: fromFile, Line: node.Line, Column: node.Column}, nil
	}
	if d := s.defaultFor(command); d != "" {
		return value{Raw: d, From: fromDefault}, nil
	}
	return value{}, nil
}

// fromEnv reads s from the environment: its variable, or for a secret the file its
// NAME_FILE names; From is fromNowhere when neither is set.
func (s *setting) fromEnv(getenv env) (value, error) {
	v, ok := getenv(s.Env)
	if !s.Secret {
		if ok && v != "" {
			return value{Raw: v, From: fromEnv}, nil
		}
		return value{}, nil
	}
	path, fileOK := getenv(s.Env + "_FILE")
	switch {
	case ok && fileOK:
		return value{}, fmt.Errorf("%s and %s_FILE are both set; set one", s.Env, s.Env)
	case fileOK:
		b, err := os.ReadFile(path)
		if err != nil {
			return value{}, fmt.Errorf("%s_FILE: %w", s.Env, err)
		}
		return value{Raw: strings.TrimRight(string(b), "\r\n"), From: fromEnvFile}, nil
	case ok:
		return value{Raw: v, From: fromEnv}, nil
	}
	return value{}, nil
}

// missing is the problem of a required setting that is not set.
func (s *setting) missing() error {
	name := s.Env
	if s.Secret && s.RequiredWhy == "" {
		name += " (or " + s.Env + "_FILE)"
	}
	text := name + " is required"
	if s.RequiredWhy != "" {
		text += ": " + s.RequiredWhy
	}
	if !s.Secret {
		text += ", e.g. " + s.Env + "=" + shellWord(s.Example)
	}
	return errors.New(text)
}

// addFlags defines on fs the flags of the settings that command reads, each empty by
// default so that readSettings can tell a flag given from one left alone.
func addFlags(fs *pflag.FlagSet, command string) {
	for i := range settingsTable {
		if s := &settingsTable[i]; s.Flag != "" && s.readBy(command) {
			fs.String(s.Flag, "", s.usage(command))
		}
	}
}

// openTelemetryEnv reads OpenTelemetry's own variables (OTEL_*), which package tracing
// interprets as the OpenTelemetry SDKs do everywhere: the one reading of the environment
// outside the table, and only of those names.
func openTelemetryEnv(getenv env) func(string) string {
	return func(name string) string {
		if !strings.HasPrefix(name, "OTEL_") {
			return ""
		}
		v, _ := getenv(name)
		return v
	}
}
