package main

import (
	"strings"
	"testing"
)

// TestConfigurationMistakesSayWhereAndWhat: each mistake in the configuration file or the
// environment is named where the user wrote it (the file's line and column and the key's
// path, or the variable), with what was probably meant or the form wanted, and once.
func TestConfigurationMistakesSayWhereAndWhat(t *testing.T) {
	for _, tt := range []struct {
		name, file string
		env        map[string]string
		want       []string
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
			want: []string{`urlflow.yaml: 2: cannot unmarshal !!seq into string`}},
		{name: "a Redis address without redis://", env: map[string]string{"URLFLOW_REDIS_URL": "127.0.0.1:6379"},
			want: []string{"URLFLOW_REDIS_URL: want redis://HOST:PORT (rediss:// for TLS, unix:///PATH for a socket), as in redis://127.0.0.1:6379"}},
		{name: "a log level", env: map[string]string{"URLFLOW_LOG_LEVEL": "verbose"},
			want: []string{`URLFLOW_LOG_LEVEL: want debug, info, warn or error, got "verbose"`}},
		{name: "a log format", env: map[string]string{"URLFLOW_LOG_FORMAT": "xml"},
			want: []string{`URLFLOW_LOG_FORMAT: want text or json, got "xml"`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range tt.env {
				env[k] = v
			}
			if tt.file != "" {
				env["URLFLOW_CONFIG"] = writeFile(t, tt.file)
			}
			_, err := loadArgs("dev", nil, envOf(env))
			if err == nil {
				t.Fatal("the configuration was accepted")
			}
			for _, want := range tt.want {
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
