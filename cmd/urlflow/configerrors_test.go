package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigurationMistakesSayWhereAndWhat: each mistake in the configuration file or the
// environment is named where the user wrote it (the file's line and column and the key's
// path, or the variable), with what was probably meant or the form wanted, and once.
func TestConfigurationMistakesSayWhereAndWhat(t *testing.T) {
	for _, tt := range []struct {
		name, file string
		args       []string
		env        map[string]string
		// want are the problems, once each; URLFILE stands for the file's path and
		// KEYFILE for a file holding a key ring that is not one.
		want []string
	}{
		{name: "a misspelt key of a slot", file: "secrets:\n  - name: k\n    lable: K\n",
			want: []string{`urlflow.yaml:3:5: secrets[0].lable: unknown key; did you mean "label"?`}},
		{name: "a misspelt key deeper down", file: "secrets:\n  - name: k\n    label: K\n    api:\n      base_url: https://api.example\n      methds: [GET]\n",
			want: []string{`urlflow.yaml:6:7: secrets[0].api.methds: unknown key; did you mean "methods"?`}},
		{name: "a misspelt setting", file: "log_levl: debug\n",
			want: []string{`urlflow.yaml:1:1: log_levl: unknown key; did you mean "log_level"?`}},
		{name: "a misspelt section", file: "secrets2: []\n",
			want: []string{`urlflow.yaml:1:1: secrets2: unknown key; did you mean "secrets"?`}},
		{name: "a key of nothing", file: "frobnicate: 1\n",
			want: []string{`urlflow.yaml:1:1: frobnicate: unknown key`}},
		{name: "a list where one value goes", file: "addr: [a, b]\n",
			want: []string{`urlflow.yaml:1:7: addr: want a single value`}},
		{name: "a value of the wrong type", file: "secrets:\n  - name: [k]\n",
			want: []string{`urlflow.yaml:2:11: secrets[0].name: want text, got a list`}},
		{name: "a Redis address without redis://", env: map[string]string{"URLFLOW_REDIS_URL": "127.0.0.1:6379"},
			want: []string{"URLFLOW_REDIS_URL: want redis://HOST:PORT (rediss:// for TLS, unix:///PATH for a socket), as in redis://127.0.0.1:6379"}},
		{name: "a link too short for a person to use", env: map[string]string{"URLFLOW_ELICITATION_TTL": "5s"},
			want: []string{`URLFLOW_ELICITATION_TTL: want a duration from 2m to 24h, e.g. URLFLOW_ELICITATION_TTL=30m, got "5s"`}},
		{name: "a theme too pale to read", file: "branding:\n  colors:\n    accent: \"#ffcc00\"\n",
			want: []string{`urlflow.yaml:3:5: branding.colors.accent: #ffcc00 in the light colour scheme: #ffcc00 on #ffffff has a contrast of 1.5:1 (links on the page); text needs 4.5:1 (WCAG 1.4.3); #806600 would do`}},
		{name: "a logo that is not there", file: "branding:\n  logo: missing.svg\n",
			want: []string{`urlflow.yaml:2:3: branding.logo: read the logo: open URLDIR/missing.svg: no such file or directory`}},
		{name: "a message override that names a placeholder its message lacks", file: "messages:\n  en:\n    layout.footer: \"{{.Company}} keeps it\"\n",
			want: []string{`urlflow.yaml:2:3: messages.en: layout.footer: {{.Company}}: the message has no such placeholder; it has {{.Product}}`}},
		{name: "a message override of a language urlflow lacks", file: "messages:\n  pt:\n    layout.footer: Segredos\n",
			want: []string{`urlflow.yaml:2:3: messages.pt: no catalog of this language; the languages are en, ar, de, es, fr, ja`}},
		{name: "a default language urlflow lacks", file: "default_language: pt\n",
			want: []string{`urlflow.yaml:1:19: default_language: urlflow has no language "pt"; it has en, ar, de, es, fr, ja`}},
		{name: "a log level", env: map[string]string{"URLFLOW_LOG_LEVEL": "verbose"},
			want: []string{`URLFLOW_LOG_LEVEL: want debug, info, warn or error, got "verbose"`}},
		{name: "a log format", env: map[string]string{"URLFLOW_LOG_FORMAT": "xml"},
			want: []string{`URLFLOW_LOG_FORMAT: want text or json, got "xml"`}},
		{name: "a public URL with a password (never repeated)", env: map[string]string{"URLFLOW_PUBLIC_URL": "http://u:hunter2@127.0.0.1:8080"},
			want: []string{`URLFLOW_PUBLIC_URL: no query, fragment or user info, e.g. URLFLOW_PUBLIC_URL=http://127.0.0.1:8080, got "http://u:xxxxx@127.0.0.1:8080"`}},
		{name: "a trace exporter urlflow lacks", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"},
			want: []string{`OTEL_TRACES_EXPORTER: urlflow exports traces with otlp only (or none): got "zipkin"`}},
		{name: "an OTLP protocol urlflow lacks", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
			want: []string{`OTEL_EXPORTER_OTLP_PROTOCOL: want http/protobuf or grpc, as in OTEL_EXPORTER_OTLP_PROTOCOL=grpc: got "http/json"`}},

		// YAML that does not parse, named at the line to fix, with the fix.
		{name: "a tab that indents", file: "addr: 127.0.0.1:0\nsecrets:\n  - name: k\n\tlabel: K\n",
			want: []string{`urlflow.yaml:4:1: not YAML: found a tab character that violates indentation; indent with spaces, not tabs`}},
		{name: "a tab before a list item", file: "secrets:\n\t- name: k\n",
			want: []string{`urlflow.yaml:2:1: not YAML: found character that cannot start any token; indent with spaces, not tabs`}},
		{name: "a key mis-indented on line 4", file: "secrets:\n  - name: k\n    label: K\n   description: d\n",
			want: []string{`urlflow.yaml:4:4: not YAML: did not find expected '-' indicator; indent this line like the other items`}},
		{name: "a list item mis-indented", file: "secrets:\n  - name: k\n    label: K\n - name: j\n",
			want: []string{`urlflow.yaml:4:2: not YAML: did not find expected key; indent this line like the other keys of its mapping`}},
		{name: "a key indented too deep", file: "addr: 127.0.0.1:0\nlog_level: debug\n  log_format: json\n",
			want: []string{`urlflow.yaml:3:13: not YAML: mapping values are not allowed in this context; this line is indented deeper`}},
		{name: "no space after a colon", file: "addr: 127.0.0.1:0\nlog_level:debug\nlog_format: json\n",
			want: []string{`urlflow.yaml:2:10: not YAML: could not find expected ':'; put a space after the colon, as in key: value`}},
		{name: "no space after a colon in a list", file: "secrets:\n  - name:k\n    label: K\n",
			want: []string{`urlflow.yaml:2:9: not YAML: mapping values are not allowed in this context; put a space after the colon`}},
		{name: "a quote left open", file: "addr: 127.0.0.1:0\npublic_url: \"http://127.0.0.1:8080\nlog_level: debug\n",
			want: []string{`urlflow.yaml:2:13: not YAML: found unexpected end of stream; the quoted value that starts here is not closed`}},
		{name: "a bracket left open", file: "secrets:\n  - name: k\n    api: {base_url: https://x.example, methods: [GET, POST\n    label: K\n",
			want: []string{`urlflow.yaml:3:49: not YAML: did not find expected ',' or ']'; the [ or { that starts here is not closed`}},
		{name: "a list left open at the end of the file", file: "addr: 127.0.0.1:0\nsecrets: [",
			want: []string{`urlflow.yaml:2:10: not YAML: did not find expected node content; the [ or { that starts here is not closed`}},

		// Each setting named as it was written, with the form wanted and an example.
		{name: "a setting of the file", file: "log_level: verbose\n",
			want: []string{`configuration file URLFILE:1:12: log_level: want debug, info, warn or error, got "verbose"`}},
		{name: "a duration in the file", file: "elicitation_ttl: forever\n",
			want: []string{`URLFILE:1:18: elicitation_ttl: want a duration (a number and a unit: ms, s, m or h), e.g. elicitation_ttl: 30m, got "forever"`}},
		{name: "a flag", args: []string{"--addr", "0.0.0.0:8080"},
			want: []string{`--addr: urlflow dev listens on loopback only (127.0.0.1, [::1] or localhost), e.g. --addr 127.0.0.1:0, got "0.0.0.0:8080"`}},
		{name: "a variable", env: map[string]string{"URLFLOW_MCP_SESSIONS_PER_USER": "lots"},
			want: []string{`URLFLOW_MCP_SESSIONS_PER_USER: want a number from 1 to 10000, e.g. URLFLOW_MCP_SESSIONS_PER_USER=50, got "lots"`}},
		{name: "a list of proxies", env: map[string]string{"URLFLOW_TRUSTED_PROXIES": "proxy.internal"},
			want: []string{`URLFLOW_TRUSTED_PROXIES: want IP addresses or CIDR prefixes, comma separated; got "proxy.internal"; e.g. URLFLOW_TRUSTED_PROXIES='10.0.0.0/8, 192.0.2.7'`}},
		{name: "a rate limit", env: map[string]string{"URLFLOW_RATE_LIMIT_MCP": "lots"},
			want: []string{`URLFLOW_RATE_LIMIT_MCP: want EVENTS/WINDOW like 600/1m, or off; got "lots" (e.g. URLFLOW_RATE_LIMIT_MCP=600/1m)`}},
		{name: "a key ring in a file", env: map[string]string{"URLFLOW_KEYS_FILE": "KEYFILE"},
			want: []string{`URLFLOW_KEYS (from URLFLOW_KEYS_FILE): key 1: want kid:base64-of-32-bytes`, `e.g. one made by: echo k1:$(openssl rand -base64 32)`}},
		{name: "a short operator token", env: map[string]string{"URLFLOW_OPERATOR_TOKENS": "short"},
			want: []string{`URLFLOW_OPERATOR_TOKENS: every token needs at least 16 characters, e.g. one made by: openssl rand -hex 16`}},
		{name: "a cluster without nodes", env: map[string]string{"URLFLOW_REDIS_TOPOLOGY": "cluster"},
			want: []string{`URLFLOW_REDIS_TOPOLOGY: cluster needs URLFLOW_REDIS_URL, the nodes to start from, e.g. URLFLOW_REDIS_URL=redis://host1:6379?addr=host2:6379`}},
		{name: "half a claim", file: "operators:\n  claim: {name: groups}\n",
			want: []string{`URLFILE:2:3: operators.claim: set both name and value, e.g. claim: {name: groups, value: urlflow-operators}`}},
		{name: "a stuck threshold", file: "operators:\n  stuck_after:\n    pending: soon\n",
			want: []string{`URLFILE:3:5: operators.stuck_after.pending: want a duration such as 5m or 1h30m, got "soon"`}},
		{name: "a slot's problem at its entry", file: "secrets:\n  - name: ok\n    label: OK\n  - name: Bad-Name\n    label: Bad\n",
			want: []string{`URLFILE:4:5: secret slot Bad-Name: name must match [a-z0-9_]+`}},
		{name: "a slot's problem at its key", file: "secrets:\n  - name: k\n    label: K\n    validation: {min_length: 10, max_length: 5}\n",
			want: []string{`URLFILE:4:18: secret slot k: min_length 10 exceeds max_length 5`}},
		{name: "a slot defined twice, at the second", file: "secrets:\n  - name: k\n    label: K\n  - name: k\n    label: K\n",
			want: []string{`URLFILE:4:5: secret slot k: defined twice`}},
		{name: "a service's problem at its key", file: "services:\n  - name: weather\n    resource: https://weather.example/mcp\n    slots: [nope]\n    keys_file: /nonexistent\n",
			want: []string{`URLFILE:2:5: service weather: label is required`, `URLFILE:4:5: service weather: slots: "nope" is not a configured secret slot`}},
		{name: "a number where text goes", file: "secrets:\n  - name: k\n    label: K\n    validation: {min_length: short}\n",
			want: []string{`URLFILE:4:30: secrets[0].validation.min_length: want a whole number, got text (short)`}},
		{name: "a number for a duration", file: "secrets:\n  - name: k\n    label: K\n    api: {base_url: https://x.example, timeout: 10}\n",
			want: []string{`URLFILE:4:49: secrets[0].api.timeout: want a duration such as 10s or 1m30s, got a number (10)`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range tt.env {
				env[k] = v
			}
			if tt.file != "" {
				env["URLFLOW_CONFIG"] = writeFile(t, tt.file)
			}
			if env["URLFLOW_KEYS_FILE"] == "KEYFILE" {
				env["URLFLOW_KEYS_FILE"] = filepath.Join(t.TempDir(), "keys")
				os.WriteFile(env["URLFLOW_KEYS_FILE"], []byte("k1\n"), 0o600)
			}
			_, err := loadArgs("dev", tt.args, envOf(env))
			if err == nil {
				t.Fatal("the configuration was accepted")
			}
			for _, want := range tt.want {
				want = strings.ReplaceAll(want, "URLFILE", env["URLFLOW_CONFIG"])
				want = strings.ReplaceAll(want, "URLDIR", filepath.Dir(env["URLFLOW_CONFIG"]))
				if n := strings.Count(err.Error(), want); n != 1 {
					t.Errorf("the error says %q %d times, want once:\n%v", want, n, err)
				}
			}
			if strings.Contains(err.Error(), "not found in type") {
				t.Errorf("the error names a Go type:\n%v", err)
			}
		})
	}
}

// TestTheLogSettingsAreRead: URLFLOW_LOG_LEVEL and URLFLOW_LOG_FORMAT, and their defaults
// in each command.
func TestTheLogSettingsAreRead(t *testing.T) {
	cfg, err := loadArgs("dev", []string{"--log-level", "debug", "--log-format", "json"}, envOf(nil))
	if err != nil || cfg.LogLevel.String() != "DEBUG" || cfg.LogFormat != "json" {
		t.Fatalf("dev with --log-level debug --log-format json: %+v, %v", cfg, err)
	}
	cfg, err = loadArgs("dev", nil, envOf(nil))
	if err != nil || cfg.LogLevel.String() != "INFO" || cfg.LogFormat != "text" {
		t.Fatalf("dev's defaults: level %v format %q, %v", cfg.LogLevel, cfg.LogFormat, err)
	}
}
