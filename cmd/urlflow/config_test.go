package main

import (
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/urlflow/urlflow/mcp"
	"github.com/urlflow/urlflow/oauth/identity"
	"github.com/urlflow/urlflow/services"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/flow"
	"github.com/urlflow/urlflow/state/ratelimit"
	"github.com/urlflow/urlflow/userref"
	"github.com/urlflow/urlflow/webhook"
)

func envOf(m map[string]string) env {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// loadArgs is loadConfig with the flags of the command line args, parsed as the command
// mode parses them.
func loadArgs(mode string, args []string, getenv env) (*config, error) {
	fs := pflag.NewFlagSet("urlflow "+mode, pflag.ContinueOnError)
	addFlags(fs, mode)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	return loadConfig(mode, fs, getenv)
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "urlflow.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestDevDefaultsNeedNoSetup(t *testing.T) {
	cfg, err := loadArgs("dev", nil, envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.PublicURL != nil || cfg.keysGiven || cfg.RedisURL != "" {
		t.Fatalf("nothing but defaults expected: %+v", cfg)
	}
	if cfg.Addr != "127.0.0.1:8080" || cfg.Style != mcp.StylePush || cfg.TTL != 10*time.Minute {
		t.Fatalf("defaults: %+v", cfg)
	}
	if cfg.RateLimits.MCP != (ratelimit.Limit{Events: 1200, Window: time.Minute}) || cfg.RateLimits.Forms != (ratelimit.Limit{Events: 30, Window: time.Minute}) ||
		cfg.RateLimits.BadTokens != (ratelimit.Limit{Events: 20, Window: time.Minute}) ||
		cfg.RateLimits.Services != (ratelimit.Limit{Events: 6000, Window: time.Minute}) {
		t.Fatalf("default rate limits: %+v", cfg.RateLimits)
	}
	if cfg.MCPSessions != (mcpSessions{PerUser: 20, IdleTimeout: time.Hour}) {
		t.Fatalf("default MCP session limits: %+v", cfg.MCPSessions)
	}
	if cfg.BodyReadTimeout != 30*time.Second {
		t.Fatalf("default body read timeout %s, want 30s", cfg.BodyReadTimeout)
	}
	if len(cfg.TrustedProxies) != 0 {
		t.Fatalf("a proxy is trusted by default: %v", cfg.TrustedProxies)
	}
	if err := cfg.resolvePublicURL(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}); err != nil {
		t.Fatal(err)
	}
	demo, ok := cfg.Slots.Lookup("demo_api_key")
	if !ok {
		t.Fatal("the built-in demo has no demo_api_key slot")
	}
	if demo.API == nil || demo.API.Base().String() != "http://127.0.0.1:8080/demo/api" {
		t.Fatalf("the demo slot does not use the demo API at the public URL: %+v", demo.API)
	}

}

func TestAnAPITakesPathsBeyondASCIIOnlyWhenTheFileSaysSo(t *testing.T) {
	file := writeFile(t, `
secrets:
  - name: ascii
    label: ASCII
    api: {base_url: "https://api.example/v1", inject: {header: Authorization}}
  - name: names
    label: Names
    api: {base_url: "https://api.example/v1", inject: {header: Authorization}, allow_non_ascii_path: true}
`)
	cfg, err := loadArgs("dev", []string{"--config", file}, envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.resolvePublicURL(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}); err != nil {
		t.Fatal(err)
	}
	for name, allowed := range map[string]bool{"ascii": false, "names": true} {
		slot, ok := cfg.Slots.Lookup(name)
		if !ok {
			t.Fatalf("no slot %s", name)
		}
		u, err := slot.API.Resolve("users/jos\u00e9")
		if allowed && (err != nil || u.EscapedPath() != "/v1/users/jos%C3%A9") {
			t.Errorf("slot %s: Resolve = %v, %v; want /v1/users/jos%%C3%%A9", name, u, err)
		}
		if !allowed && err == nil {
			t.Errorf("slot %s: Resolve = %v; want a refusal", name, u)
		}
		if _, err := slot.API.Resolve("users/%c0%af"); err == nil {
			t.Errorf("slot %s: an overlong slash is allowed", name)
		}
	}
}

func TestSettingsFollowFlagThenEnvironmentThenFileThenDefault(t *testing.T) {
	file := writeFile(t, `
addr: 127.0.0.1:7001
public_url: http://127.0.0.1:7001
elicitation_style: error
elicitation_ttl: 2m
trusted_proxies: 10.0.0.1
secrets:
  - name: k
    label: K
`)
	tests := []struct {
		name     string
		args     []string
		env      map[string]string
		wantAddr string
		wantURL  string
		style    mcp.Style
		ttl      time.Duration
		proxies  string
	}{
		{"file over default", []string{"--config", file}, nil, "127.0.0.1:7001", "http://127.0.0.1:7001", mcp.StyleError, 2 * time.Minute, "[10.0.0.1/32]"},
		{"environment over file", nil, map[string]string{"URLFLOW_CONFIG": file, "URLFLOW_ADDR": "127.0.0.1:7002",
			"URLFLOW_PUBLIC_URL": "http://localhost:7002/", "URLFLOW_ELICITATION_STYLE": "push", "URLFLOW_ELICITATION_TTL": "3m",
			"URLFLOW_TRUSTED_PROXIES": "10.0.0.2, 192.168.0.0/16"},
			"127.0.0.1:7002", "http://localhost:7002", mcp.StylePush, 3 * time.Minute, "[10.0.0.2/32 192.168.0.0/16]"},
		{"flag over environment", []string{"--addr", "127.0.0.1:7003", "--public-url", "http://127.0.0.1:7003", "--trusted-proxies", "fd00::/8"},
			map[string]string{"URLFLOW_CONFIG": file, "URLFLOW_ADDR": "127.0.0.1:7002", "URLFLOW_TRUSTED_PROXIES": "10.0.0.2"},
			"127.0.0.1:7003", "http://127.0.0.1:7003", mcp.StyleError, 2 * time.Minute, "[fd00::/8]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := loadArgs("dev", tt.args, envOf(tt.env))
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Addr != tt.wantAddr || cfg.PublicURL.String() != tt.wantURL || cfg.Style != tt.style || cfg.TTL != tt.ttl ||
				fmt.Sprint(cfg.TrustedProxies) != tt.proxies {
				t.Fatalf("got addr %s url %s style %s ttl %s trusted proxies %v", cfg.Addr, cfg.PublicURL, cfg.Style, cfg.TTL, cfg.TrustedProxies)
			}
		})
	}
}

func TestEveryProblemIsNamedAtOnce(t *testing.T) {
	file := writeFile(t, `
secrets:
  - name: Bad-Name
    label: ""
  - name: ok
    label: OK
    validation: {min_length: 10, max_length: 5, pattern: "("}
unknown_key: 1
`)
	_, err := loadArgs("dev", []string{"--addr", "0.0.0.0:80"}, envOf(map[string]string{
		"URLFLOW_CONFIG":                   file,
		"URLFLOW_ELICITATION_STYLE":        "shout",
		"URLFLOW_ELICITATION_TTL":          "forever",
		"URLFLOW_KEYS":                     "k1:notbase64!!",
		"URLFLOW_PUBLIC_URL":               "ftp://example.com",
		"URLFLOW_OPERATOR_TOKENS":          "short",
		"URLFLOW_REDIS_TOPOLOGY":           "ring",
		"URLFLOW_RATE_LIMIT_MCP":           "lots",
		"URLFLOW_RATE_LIMIT_FORMS":         "5/0s",
		"URLFLOW_MCP_SESSIONS_PER_USER":    "0",
		"URLFLOW_MCP_SESSION_IDLE_TIMEOUT": "1s",
		"URLFLOW_BODY_READ_TIMEOUT":        "1h",
		"URLFLOW_RATE_LIMIT_BAD_TOKENS":    "many",
		"URLFLOW_RATE_LIMIT_SERVICES":      "1/1",
		"URLFLOW_TRUSTED_PROXIES":          "10.0.0.1, proxy.internal",
		"URLFLOW_DEBUG_ADDR":               "0.0.0.0:6060",
	}))
	if err == nil {
		t.Fatal("bad settings accepted")
	}
	for _, want := range []string{"URLFLOW_ELICITATION_STYLE", "URLFLOW_ELICITATION_TTL", "URLFLOW_KEYS",
		"URLFLOW_PUBLIC_URL", "URLFLOW_OPERATOR_TOKENS", "loopback only", "unknown_key",
		`URLFLOW_REDIS_TOPOLOGY: unknown Redis topology "ring"`, `URLFLOW_RATE_LIMIT_MCP: want EVENTS/WINDOW`,
		`URLFLOW_RATE_LIMIT_FORMS: want a window`, `URLFLOW_MCP_SESSIONS_PER_USER: want a number from 1 to 10000, e.g. URLFLOW_MCP_SESSIONS_PER_USER=50, got "0"`,
		`URLFLOW_MCP_SESSION_IDLE_TIMEOUT: want a duration from 1m to 24h, e.g. URLFLOW_MCP_SESSION_IDLE_TIMEOUT=30m, got "1s"`,
		`URLFLOW_BODY_READ_TIMEOUT: want a duration from 1s to 10m, e.g. URLFLOW_BODY_READ_TIMEOUT=45s, got "1h"`,
		`URLFLOW_RATE_LIMIT_BAD_TOKENS: want EVENTS/WINDOW`, `URLFLOW_RATE_LIMIT_SERVICES: `,
		`URLFLOW_TRUSTED_PROXIES: want IP addresses or CIDR prefixes, comma separated; got "proxy.internal"`,
		`URLFLOW_DEBUG_ADDR: the profiling listener listens on loopback only`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not name %s:\n%v", want, err)
		}
	}
	// The YAML decoder stops at the unknown key, so the slot problems come in a second pass.
	_, err = loadArgs("dev", nil, envOf(map[string]string{"URLFLOW_CONFIG": writeFile(t, `
secrets:
  - name: Bad-Name
    label: ""
  - name: ok
    label: OK
    validation: {min_length: 10, max_length: 5, pattern: "("}
  - name: ok
    label: Twice
`)}))
	for _, want := range []string{"Bad-Name: name must match", "label is required", "min_length 10 exceeds max_length 5",
		"pattern does not compile", "defined twice"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q:\n%v", want, err)
		}
	}
}

func TestARedisTopologyNeedsARedisURL(t *testing.T) {
	_, err := loadArgs("dev", nil, envOf(map[string]string{"URLFLOW_REDIS_TOPOLOGY": "cluster"}))
	if err == nil || !strings.Contains(err.Error(), "URLFLOW_REDIS_TOPOLOGY: cluster needs URLFLOW_REDIS_URL, the nodes to start from, e.g. URLFLOW_REDIS_URL=redis://") {
		t.Fatalf("a cluster without a URL: %v", err)
	}
	cfg, err := loadArgs("dev", nil, envOf(map[string]string{"URLFLOW_REDIS_TOPOLOGY": "sentinel",
		"URLFLOW_REDIS_URL": "redis://127.0.0.1:26379?master_name=urlflow"}))
	if err != nil || cfg.RedisTopology != state.Sentinel {
		t.Fatalf("sentinel: %v, %+v", err, cfg)
	}
}

func TestSecretSettingsReadFilesAndNeverEchoValues(t *testing.T) {
	keyFile := writeFile(t, "k1:"+strings.Repeat("A", 43)+"=\n")
	cfg, err := loadArgs("dev", nil, envOf(map[string]string{"URLFLOW_KEYS_FILE": keyFile}))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.keysGiven || cfg.Keys.ActiveID() != "k1" {
		t.Fatalf("keys from file: %+v", cfg)
	}
	_, err = loadArgs("dev", nil, envOf(map[string]string{"URLFLOW_KEYS": "k1:x", "URLFLOW_KEYS_FILE": keyFile}))
	if err == nil || !strings.Contains(err.Error(), "both set") {
		t.Fatalf("both NAME and NAME_FILE: %v", err)
	}
	secret := "k1:c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LTMy" // 32 bytes? no: 31, so it fails
	_, err = loadArgs("dev", nil, envOf(map[string]string{"URLFLOW_KEYS": secret}))
	if err == nil || strings.Contains(err.Error(), "c2VjcmV0") {
		t.Fatalf("a bad key is refused without echoing it: %v", err)
	}
	_, err = loadArgs("dev", nil, envOf(map[string]string{"URLFLOW_REDIS_URL": "redis://:hunter2@127.0.0.1:notaport"}))
	if err != nil {
		t.Fatalf("the Redis URL is checked when connecting, not here: %v", err)
	}
}

func TestDevRefusesNonLoopbackAddresses(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:8080", ":8080", "192.0.2.1:8080", "example.com:8080"} {
		if _, err := loadArgs("dev", []string{"--addr", addr}, envOf(nil)); err == nil {
			t.Errorf("dev accepted %s", addr)
		}
	}
	for _, addr := range []string{"127.0.0.1:0", "[::1]:8080", "localhost:8080"} {
		if _, err := loadArgs("dev", []string{"--addr", addr}, envOf(nil)); err != nil {
			t.Errorf("dev refused %s: %v", addr, err)
		}
	}
}

func TestProvidersAreCheckedAtStartWithEveryProblemNamed(t *testing.T) {
	bad := writeFile(t, `
secrets:
  - name: shared
    label: Shared
providers:
  - name: acme
  - name: shared
    preset: github
    client_id: x
    client_secret: in-clear-s3cret
`)
	_, err := loadArgs("dev", []string{"--config", bad}, envOf(nil))
	if err == nil {
		t.Fatal("bad providers accepted")
	}
	for _, want := range []string{"provider acme: give exactly one of preset, issuer", "provider acme: client_id is required",
		"provider shared: client_secret may not be written", `"shared" is both a secret slot and a provider`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "in-clear-s3cret") {
		t.Fatal("the error repeats a client secret")
	}
	good := writeFile(t, `
providers:
  - name: github
    preset: github
    client_id: urlflow
    client_secret_env: GITHUB_SECRET
`)
	if _, err := loadArgs("dev", []string{"--config", good}, envOf(map[string]string{"GITHUB_SECRET": "s"})); err != nil {
		t.Fatalf("a valid provider refused: %v", err)
	}
}

func TestServicesAreCheckedAtStartWithEveryProblemNamed(t *testing.T) {
	key, digest := services.NewKey()
	keys := writeFile(t, "# weather, rotated 2026-12\n"+digest+"\n")
	leaked := writeFile(t, key+"\n")
	bad := writeFile(t, `
secrets:
  - name: demo_api_key
    label: Demo
services:
  - name: urlflow
    label: Mine
    resource: https://x.example/mcp
    slots: [demo_api_key]
    keys_file: `+keys+`
  - name: weather
    resource: not a url
    slots: [nope]
    keys_file: `+leaked+`
  - name: calendar
    label: Calendar
    resource: https://calendar.example/mcp
`)
	_, err := loadArgs("dev", []string{"--config", bad}, envOf(nil))
	if err == nil {
		t.Fatal("bad services accepted")
	}
	for _, want := range []string{`service urlflow: name: "urlflow" is urlflow's own tools`, "service weather: label is required",
		"service weather: resource: want the service's MCP URL", `service weather: slots: "nope" is not a configured secret slot`,
		"this is a key, not its digest", "service calendar: name at least one of slots and providers", "service calendar: keys_file or client_id is required"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), key) {
		t.Fatal("the error repeats a service key")
	}
	good := writeFile(t, `
secrets:
  - name: demo_api_key
    label: Demo
services:
  - name: weather
    label: Weather
    resource: https://weather.example/mcp
    slots: [demo_api_key]
    keys_file: `+keys+`
`)
	cfg, err := loadArgs("dev", []string{"--config", good}, envOf(nil))
	if err != nil {
		t.Fatalf("a valid service refused: %v", err)
	}
	if svc, ok := cfg.Services.Authenticate(key); !ok || svc.Name != "weather" {
		t.Errorf("the key from the keys file authenticates as %v, %v; want weather", svc, ok)
	}
}

// TestServeWithServicesNeedsTheUserReferenceKey: serve refuses to start with services and
// no key of their user references, naming it; a key too short or not base64 is refused
// without being repeated; a good one is used, and serve without services needs none.
func TestServeWithServicesNeedsTheUserReferenceKey(t *testing.T) {
	_, digest := services.NewKey()
	file := writeFile(t, `
secrets:
  - name: demo_api_key
    label: Demo
services:
  - name: weather
    label: Weather
    resource: https://weather.example/mcp
    slots: [demo_api_key]
    keys_file: `+writeFile(t, digest+"\n")+`
`)
	env := map[string]string{
		"URLFLOW_REDIS_URL":          "redis://127.0.0.1:6379",
		"URLFLOW_KEYS":               "k1:" + strings.Repeat("A", 43) + "=",
		"URLFLOW_PUBLIC_URL":         "https://urlflow.example.com",
		"URLFLOW_OIDC_ISSUER":        "https://id.example.com",
		"URLFLOW_OIDC_CLIENT_ID":     "urlflow",
		"URLFLOW_OIDC_CLIENT_SECRET": "s3cret-value",
	}
	if cfg, err := loadArgs("serve", nil, envOf(env)); err != nil || cfg.UserRefs != nil {
		t.Fatalf("serve without services: %v (references %v), want no key needed", err, cfg.UserRefs)
	}
	env["URLFLOW_CONFIG"] = file
	_, err := loadArgs("serve", nil, envOf(env))
	if err == nil || !strings.Contains(err.Error(), "URLFLOW_USER_REFERENCE_KEY is required: the configuration file has services") {
		t.Fatalf("serve with services and no user reference key: %v", err)
	}
	for value, want := range map[string]string{
		base64.StdEncoding.EncodeToString([]byte("thirty-one bytes of key material")[:31]): "at least 32 bytes",
		"not base64, and a secret": "is base64",
	} {
		env["URLFLOW_USER_REFERENCE_KEY"] = value
		_, err := loadArgs("serve", nil, envOf(env))
		if err == nil || !strings.Contains(err.Error(), "URLFLOW_USER_REFERENCE_KEY: ") || !strings.Contains(err.Error(), want) {
			t.Errorf("the key %q: %v, want a problem that says %q", value, err, want)
		}
		if err != nil && strings.Contains(err.Error(), value) {
			t.Errorf("the error repeats the key: %v", err)
		}
	}
	key := base64.StdEncoding.EncodeToString([]byte("thirty-two bytes of key material"))
	env["URLFLOW_USER_REFERENCE_KEY"] = key
	cfg, err := loadArgs("serve", nil, envOf(env))
	if err != nil {
		t.Fatal(err)
	}
	refs, _ := userref.Parse(key)
	alice := state.User{Issuer: "https://id.example.com", Subject: "alice"}
	if got := cfg.UserRefs.Of("weather", alice); got == "" || got != refs.Of("weather", alice) {
		t.Errorf("serve makes the reference %q, want %q", got, refs.Of("weather", alice))
	}
}

func TestDevStateSurvivesARestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "urlflow", "dev.json")
	first, err := loadDevState(path)
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(path)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("dev state file mode: %v %v", info, err)
	}
	second, err := loadDevState(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(first.SigningKey) != string(second.SigningKey) || first.Keys != second.Keys || first.OperatorToken != second.OperatorToken ||
		first.DemoServiceKey != second.DemoServiceKey || !strings.HasPrefix(first.DemoServiceKey, services.KeyPrefix) {
		t.Fatal("a second start made new keys")
	}
	if _, err := userref.Parse(first.UserReferenceKey); err != nil {
		t.Fatalf("the user reference key %v", err)
	}
	// A file written before the demo service and the user references existed gets their
	// keys, once.
	old := *first
	old.DemoServiceKey, old.UserReferenceKey = "", ""
	if err := saveDevState(path, &old); err != nil {
		t.Fatal(err)
	}
	upgraded, err := loadDevState(path)
	if err != nil || upgraded.DemoServiceKey == "" || upgraded.OperatorToken != first.OperatorToken {
		t.Fatalf("an older state file: %+v, %v; want the same keys and a demo service key", upgraded, err)
	}
	if again, err := loadDevState(path); err != nil || again.DemoServiceKey != upgraded.DemoServiceKey ||
		upgraded.UserReferenceKey == "" || again.UserReferenceKey != upgraded.UserReferenceKey {
		t.Fatal("the keys added to an older file were not kept")
	}
	os.WriteFile(path, []byte("{"), 0o600)
	if _, err := loadDevState(path); err == nil || !strings.Contains(err.Error(), "delete it") {
		t.Fatalf("a damaged state file: %v", err)
	}
}

func TestServeRefusesToStartNamingEveryMissingSetting(t *testing.T) {
	err := run(t.Context(), []string{"serve"}, envOf(nil), nil, io.Discard, io.Discard)
	if err == nil {
		t.Fatal("serve started without any setting")
	}
	for _, want := range []string{"URLFLOW_REDIS_URL is required", "URLFLOW_KEYS is required", "URLFLOW_PUBLIC_URL is required",
		"URLFLOW_OIDC_ISSUER is required", "URLFLOW_OIDC_CLIENT_ID is required", "URLFLOW_OIDC_CLIENT_SECRET"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q:\n%v", want, err)
		}
	}
}

// TestAnEmptyKeyRingIsOneProblem: URLFLOW_KEYS set to nothing is reported once, as missing.
func TestAnEmptyKeyRingIsOneProblem(t *testing.T) {
	err := run(t.Context(), []string{"serve"}, envOf(map[string]string{"URLFLOW_KEYS": ""}), nil, io.Discard, io.Discard)
	if err == nil {
		t.Fatal("serve started without any setting")
	}
	if n := strings.Count(err.Error(), "URLFLOW_KEYS"); n != 1 {
		t.Errorf("URLFLOW_KEYS is named %d times, want once:\n%v", n, err)
	}
}

func TestServeRefusesInsecureAndInvalidSettings(t *testing.T) {
	_, err := loadArgs("serve", nil, envOf(map[string]string{
		"URLFLOW_REDIS_URL":          "redis://127.0.0.1:6379",
		"URLFLOW_KEYS":               "k1:" + strings.Repeat("A", 43) + "=",
		"URLFLOW_PUBLIC_URL":         "http://urlflow.example.com",
		"URLFLOW_OIDC_ISSUER":        "http://id.example.com",
		"URLFLOW_OIDC_CLIENT_ID":     "urlflow",
		"URLFLOW_OIDC_CLIENT_SECRET": "s3cret-value",
		"URLFLOW_OIDC_INTROSPECTION": "maybe",
	}))
	for _, want := range []string{"URLFLOW_PUBLIC_URL: must be https", "URLFLOW_OIDC_ISSUER: want an https URL", "URLFLOW_OIDC_INTROSPECTION"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q:\n%v", want, err)
		}
	}
	if err != nil && strings.Contains(err.Error(), "s3cret-value") {
		t.Fatal("the error shows the client secret")
	}
	cfg, err := loadArgs("serve", nil, envOf(map[string]string{
		"URLFLOW_REDIS_URL":               "redis://127.0.0.1:6379",
		"URLFLOW_KEYS":                    "k1:" + strings.Repeat("A", 43) + "=",
		"URLFLOW_PUBLIC_URL":              "https://urlflow.example.com/",
		"URLFLOW_OIDC_ISSUER":             "https://id.example.com",
		"URLFLOW_OIDC_CLIENT_ID":          "urlflow",
		"URLFLOW_OIDC_CLIENT_SECRET_FILE": writeFile(t, "from-a-file\n"),
		"URLFLOW_OIDC_SCOPES":             "mcp:tools, openid",
		"URLFLOW_BODY_READ_TIMEOUT":       "45s",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Addr != ":8080" || cfg.OIDC.ClientSecret != "from-a-file" || len(cfg.OIDC.Scopes) != 2 || cfg.PublicURL.String() != "https://urlflow.example.com" ||
		cfg.BodyReadTimeout != 45*time.Second {
		t.Fatalf("serve settings: %+v", cfg)
	}
}

func TestTestOnlyWaitsAreAcceptedByDevAndRefusedByServe(t *testing.T) {
	short := map[string]string{
		"URLFLOW_TEST_PUSH_WAIT":         "2s",
		"URLFLOW_TEST_PROGRESS_INTERVAL": "500ms",
		"URLFLOW_TEST_RETRY_WAIT":        "1s",
		"URLFLOW_TEST_STATUS_WAIT_LIMIT": "3s",
		"URLFLOW_TEST_WEBHOOK_RETRY":     "200ms",
	}
	cfg, err := loadArgs("dev", nil, envOf(short))
	if err != nil {
		t.Fatal(err)
	}
	want := waits{Push: 2 * time.Second, Progress: 500 * time.Millisecond, Retry: time.Second, StatusLimit: 3 * time.Second,
		WebhookRetry: 200 * time.Millisecond}
	if cfg.Waits != want {
		t.Fatalf("dev waits: %+v, want %+v", cfg.Waits, want)
	}
	if got := webhookSchedule(cfg.Waits.WebhookRetry); len(got) != len(webhook.DefaultSchedule) || got[0] != 0 || got[1] != 200*time.Millisecond || got[7] != 200*time.Millisecond {
		t.Errorf("the shortened webhook schedule: %v", got)
	}
	if got := webhookSchedule(0); !slices.Equal(got, webhook.DefaultSchedule) {
		t.Errorf("the webhook schedule: %v, want the default", got)
	}
	if cfg, err := loadArgs("dev", nil, envOf(nil)); err != nil || cfg.Waits != (waits{}) {
		t.Fatalf("without test settings the waits must be the product's defaults (zero): %+v %v", cfg, err)
	}

	_, err = loadArgs("dev", nil, envOf(map[string]string{"URLFLOW_TEST_PUSH_WAIT": "soon", "URLFLOW_TEST_RETRY_WAIT": "2h"}))
	for _, want := range []string{`URLFLOW_TEST_PUSH_WAIT: want a duration (a number and a unit: ms, s, m or h), e.g. URLFLOW_TEST_PUSH_WAIT=200ms, got "soon"`, "URLFLOW_TEST_RETRY_WAIT: want a duration"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q:\n%v", want, err)
		}
	}

	serve := map[string]string{
		"URLFLOW_REDIS_URL":          "redis://127.0.0.1:6379",
		"URLFLOW_KEYS":               "k1:" + strings.Repeat("A", 43) + "=",
		"URLFLOW_PUBLIC_URL":         "https://urlflow.example.com",
		"URLFLOW_OIDC_ISSUER":        "https://id.example.com",
		"URLFLOW_OIDC_CLIENT_ID":     "urlflow",
		"URLFLOW_OIDC_CLIENT_SECRET": "s3cret-value",
	}
	for k, v := range short {
		serve[k] = v
	}
	_, err = loadArgs("serve", nil, envOf(serve))
	for name := range short {
		if want := name + " is a test-only setting that only urlflow dev accepts"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("serve does not refuse %s:\n%v", name, err)
		}
	}
}

func TestServiceKeyPrintsAKeyAndTheDigestUrlflowKeeps(t *testing.T) {
	for _, args := range [][]string{{"keys", "service-key"}, {"service-key"}} { // the old name still works
		t.Run(strings.Join(args, " "), func(t *testing.T) { testServiceKey(t, args) })
	}
}

func testServiceKey(t *testing.T, args []string) {
	var out strings.Builder
	if err := run(t.Context(), args, envOf(nil), nil, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	var key, digest string
	for _, line := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			switch last := f[len(f)-1]; {
			case strings.HasPrefix(last, services.KeyPrefix):
				key = last
			case strings.HasPrefix(last, "sha256:"):
				digest = last
			}
		}
	}
	if key == "" || digest != services.Digest(key) {
		t.Fatalf("service-key printed %q, want a key and its digest", out.String())
	}
}

func TestOperatorsSettingsSetStuckThresholdsAndReadOnlyTokens(t *testing.T) {
	cfg, err := loadArgs("dev", nil, envOf(map[string]string{
		"URLFLOW_CONFIG": writeFile(t, `
operators:
  subjects: [ops-oncall]
  stuck_after: {pending: 30s, notification: 5m}
`),
		"URLFLOW_OPERATOR_READONLY_TOKENS": "reader-one-0123456789, reader-two-0123456789",
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := flow.DefaultStuckAfter
	want.Pending, want.Notification = 30*time.Second, 5*time.Minute
	if cfg.StuckAfter != want {
		t.Errorf("stuck thresholds %+v, want %+v", cfg.StuckAfter, want)
	}
	if !slices.Equal(cfg.OperatorSubjects, []string{"ops-oncall", identity.DevOperator}) {
		t.Errorf("operators in the browser %q, want the configured one and the development operator", cfg.OperatorSubjects)
	}
	if !slices.Equal(cfg.OperatorReadOnlyTokens, []string{"reader-one-0123456789", "reader-two-0123456789"}) {
		t.Errorf("read-only tokens %q", cfg.OperatorReadOnlyTokens)
	}

	_, err = loadArgs("dev", nil, envOf(map[string]string{
		"URLFLOW_CONFIG": writeFile(t, `
operators:
  stuck_after: {pendng: 30s, consented: soon, failed: -1m}
`),
		"URLFLOW_OPERATOR_READONLY_TOKENS": "short-reader",
	}))
	for _, want := range []string{`urlflow.yaml:3:17: operators.stuck_after.pendng: not a running state`, "operators.stuck_after.consented",
		"operators.stuck_after.failed", "URLFLOW_OPERATOR_READONLY_TOKENS: every token needs at least 16 characters"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not name %s:\n%v", want, err)
		}
	}
	if err != nil && strings.Contains(err.Error(), "short-reader") {
		t.Errorf("the error shows the token: %v", err)
	}
}

// The retention of ended flows is a setting: 7 days by default, from the file or the
// environment, and refused outside 1h to a year.
func TestFlowRetentionIsASetting(t *testing.T) {
	cfg, err := loadArgs("dev", nil, envOf(nil))
	if err != nil || cfg.FlowRetention != flow.DefaultRetention {
		t.Fatalf("default: %v, %v; want %v", cfg.FlowRetention, err, flow.DefaultRetention)
	}
	file := writeFile(t, "flow_retention: 48h\n")
	if cfg, err = loadArgs("dev", []string{"--config", file}, envOf(nil)); err != nil || cfg.FlowRetention != 48*time.Hour {
		t.Fatalf("from the file: %v, %v", cfg.FlowRetention, err)
	}
	if cfg, err = loadArgs("dev", nil, envOf(map[string]string{"URLFLOW_FLOW_RETENTION": "36h"})); err != nil || cfg.FlowRetention != 36*time.Hour {
		t.Fatalf("from the environment: %v, %v", cfg.FlowRetention, err)
	}
	if _, err = loadArgs("dev", nil, envOf(map[string]string{"URLFLOW_FLOW_RETENTION": "30m"})); err == nil || !strings.Contains(err.Error(), "URLFLOW_FLOW_RETENTION") {
		t.Fatalf("30m accepted, or the error does not name the setting: %v", err)
	}
}
