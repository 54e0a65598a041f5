package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
)

var update = flag.Bool("update", false, "write what the tests compare with: docs/configuration.md, docs/urlflow.schema.json, docs/cli/ and testdata/cli/")

const configurationDoc = "../../docs/configuration.md"

// TestConfigurationDocIsCurrent: docs/configuration.md is what the settings table makes.
func TestConfigurationDocIsCurrent(t *testing.T) {
	var want bytes.Buffer
	if err := writeConfigurationDoc(&want); err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(configurationDoc, want.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(configurationDoc)
	if err != nil || !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("docs/configuration.md is not what the settings table makes (%v): regenerate it with\n"+
			"  go test ./cmd/urlflow -run TestConfigurationDocIsCurrent -update", err)
	}
}

// TestTheSettingsTableIsWhole: every row has what the loader and the docs need, and no
// name, variable, flag or YAML key is used twice.
func TestTheSettingsTableIsWhole(t *testing.T) {
	seen := map[string]string{}
	once := func(kind, key, name string) {
		if key == "" {
			return
		}
		if other, ok := seen[kind+" "+key]; ok {
			t.Errorf("%s %s is used by %s and %s", kind, key, other, name)
		}
		seen[kind+" "+key] = name
	}
	for _, s := range settingsTable {
		once("name", s.Name, s.Name)
		once("variable", s.Env, s.Name)
		once("YAML key", s.YAML, s.Name)
		if s.Env == "" || s.Type == "" || s.Summary == "" || s.Description == "" || s.Example == "" || len(s.Commands) == 0 {
			t.Errorf("%s lacks a variable, type, summary, description, example or command: %+v", s.Name, s)
		}
		if !slices.ContainsFunc(sections, func(sec section) bool { return sec.Name == s.Section }) {
			t.Errorf("%s is in section %q, which is not in sections", s.Name, s.Section)
		}
		if strings.HasPrefix(s.Env, "URLFLOW_") && s.Name != strings.ToLower(strings.TrimPrefix(s.Env, "URLFLOW_")) {
			t.Errorf("setting %s has the variable %s: its name is the variable's, lower case, without URLFLOW_", s.Name, s.Env)
		}
		if s.TestOnly != strings.HasPrefix(s.Env, "URLFLOW_TEST_") {
			t.Errorf("%s: the test-only settings, and only they, are URLFLOW_TEST_*", s.Env)
		}
	}
	// A flag is one per command.
	for _, command := range []string{cmdDev, cmdServe, cmdFlows, cmdAudit, cmdHookServe} {
		fs := pflag.NewFlagSet(command, pflag.ContinueOnError)
		addFlags(fs, command) // panics on a flag defined twice
	}
	for _, sec := range sections {
		if !slices.ContainsFunc(settingsTable, func(s setting) bool { return s.Section == sec.Name }) {
			t.Errorf("section %s has no setting", sec.Name)
		}
	}
	for _, ts := range testSettings {
		if !lookupSetting(ts.name).TestOnly {
			t.Errorf("%s shortens a wait but is not a test-only setting", ts.name)
		}
	}
}

// TestNoSettingIsReadOutsideTheTable: the environment is read in one place, the loop of
// settings.go; every other file gets values from it.
func TestNoSettingIsReadOutsideTheTable(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	reads := regexp.MustCompile(`\bgetenv\(|os\.Getenv\(|os\.LookupEnv\(|os\.Environ\(`)
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") || name == "settings.go" {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(src), "\n") {
			if reads.MatchString(line) {
				t.Errorf("%s:%d reads the environment outside the settings table: %s", name, i+1, strings.TrimSpace(line))
			}
		}
	}
}

// TestTheLoopReadsFlagThenEnvironmentThenFileThenDefault, for a setting that has all four.
func TestTheLoopReadsFlagThenEnvironmentThenFileThenDefault(t *testing.T) {
	file := fileSettings{"addr": yaml.Node{Kind: yaml.ScalarNode, Value: "127.0.0.1:3", Line: 4, Column: 7}}
	for _, tt := range []struct {
		name  string
		flag  string
		env   map[string]string
		file  fileSettings
		want  value
		serve bool
	}{
		{"flag", "127.0.0.1:1", map[string]string{"URLFLOW_ADDR": "127.0.0.1:2"}, file, value{"127.0.0.1:1", fromFlag, 0, 0}, false},
		{"environment", "", map[string]string{"URLFLOW_ADDR": "127.0.0.1:2"}, file, value{"127.0.0.1:2", fromEnv, 0, 0}, false},
		{"file", "", nil, file, value{"127.0.0.1:3", fromFile, 4, 7}, false},
		{"empty variable", "", map[string]string{"URLFLOW_ADDR": ""}, file, value{"127.0.0.1:3", fromFile, 4, 7}, false},
		{"null in the file", "", nil, fileSettings{"addr": yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "~"}}, value{"127.0.0.1:8080", fromDefault, 0, 0}, false},
		{"default", "", nil, nil, value{"127.0.0.1:8080", fromDefault, 0, 0}, false},
		{"the command's own default", "", nil, nil, value{":8080", fromDefault, 0, 0}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			command := cmdDev
			if tt.serve {
				command = cmdServe
			}
			fs := pflag.NewFlagSet(command, pflag.ContinueOnError)
			addFlags(fs, command)
			if tt.flag != "" {
				fs.Set("addr", tt.flag)
			}
			v, _ := readSettings(command, fs, envOf(tt.env), tt.file)
			if v["addr"] != tt.want {
				t.Fatalf("addr = %+v, want %+v", v["addr"], tt.want)
			}
		})
	}
}

// TestSecretsAlsoComeFromFiles: a secret's NAME_FILE is read (without its newline), NAME
// and NAME_FILE together are refused, a file that cannot be read is named, and no problem
// shows a value. A secret set to the empty string counts as set.
func TestSecretsAlsoComeFromFiles(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "keys")
	os.WriteFile(keyFile, []byte("k1:from-the-file\r\n"), 0o600)
	for _, tt := range []struct {
		name    string
		env     map[string]string
		want    value
		problem string
	}{
		{"file", map[string]string{"URLFLOW_KEYS_FILE": keyFile}, value{Raw: "k1:from-the-file", From: fromEnvFile}, ""},
		{"variable", map[string]string{"URLFLOW_KEYS": "k1:in-the-variable"}, value{Raw: "k1:in-the-variable", From: fromEnv}, ""},
		{"empty variable", map[string]string{"URLFLOW_KEYS": ""}, value{From: fromEnv}, ""},
		{"both", map[string]string{"URLFLOW_KEYS": "k1:in-the-variable", "URLFLOW_KEYS_FILE": keyFile}, value{},
			"URLFLOW_KEYS and URLFLOW_KEYS_FILE are both set; set one"},
		{"missing file", map[string]string{"URLFLOW_KEYS_FILE": filepath.Join(dir, "nope")}, value{}, "URLFLOW_KEYS_FILE: open"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v, problems := readSettings(cmdDev, nil, envOf(tt.env), nil)
			err := errors.Join(problems...)
			if v["keys"] != tt.want || (tt.problem == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.problem)) {
				t.Fatalf("keys = %+v, %v; want %+v and a problem with %q", v["keys"], err, tt.want, tt.problem)
			}
			if err != nil && strings.Contains(err.Error(), "in-the-variable") {
				t.Fatalf("a problem shows the secret: %v", err)
			}
		})
	}
}

// TestTheLoopNamesEveryProblemAtOnce: secrets set twice, a secret's file missing, every
// required setting of serve, and test-only settings where they are refused, in one go.
func TestTheLoopNamesEveryProblemAtOnce(t *testing.T) {
	_, problems := readSettings(cmdServe, nil, envOf(map[string]string{
		"URLFLOW_REDIS_URL": "redis://x", "URLFLOW_REDIS_URL_FILE": "/dev/null",
		"URLFLOW_OPERATOR_TOKENS_FILE": filepath.Join(t.TempDir(), "missing"),
		"URLFLOW_TEST_PUSH_WAIT":       "1s", "URLFLOW_TEST_RETRY_WAIT": "1s",
	}), nil)
	err := errors.Join(problems...)
	for _, want := range []string{
		"URLFLOW_REDIS_URL and URLFLOW_REDIS_URL_FILE are both set", "URLFLOW_OPERATOR_TOKENS_FILE: open",
		"URLFLOW_PUBLIC_URL is required", "URLFLOW_KEYS is required", "URLFLOW_OIDC_ISSUER is required",
		"URLFLOW_OIDC_CLIENT_ID is required", "URLFLOW_OIDC_CLIENT_SECRET (or URLFLOW_OIDC_CLIENT_SECRET_FILE) is required",
		"URLFLOW_TEST_PUSH_WAIT is a test-only setting that only urlflow dev accepts", "URLFLOW_TEST_RETRY_WAIT is a test-only",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("the problems do not say %q:\n%v", want, err)
		}
	}
	if _, problems := readSettings(cmdDev, nil, envOf(map[string]string{"URLFLOW_TEST_PUSH_WAIT": "1s"}), nil); len(problems) > 0 {
		t.Errorf("dev refuses a test-only setting: %v", problems)
	}
}

// TestTheFileNamesUnknownKeysWithTheirLines: a top-level key that is no setting, or a
// setting with more than one value, is a problem that names its line; the sections are
// still checked.
func TestTheFileNamesUnknownKeysWithTheirLines(t *testing.T) {
	file := writeFile(t, "addr: 127.0.0.1:9\npublic_urls: http://127.0.0.1:9\ntrusted_proxies: [10.0.0.1]\nsecrets:\n  - name: Bad-Name\n    label: x\n")
	_, err := loadArgs(cmdDev, []string{"--config", file}, envOf(nil))
	for _, want := range []string{`urlflow.yaml:2:1: public_urls: unknown key; did you mean "public_url"?`,
		"urlflow.yaml:3:18: trusted_proxies: want a single value", "Bad-Name: name must match"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q:\n%v", want, err)
		}
	}
}

// TestFlagsWithOneDashStillWork: the command lines of Go's flag package, one dash before a
// long flag, mean what they meant.
func TestFlagsWithOneDashStillWork(t *testing.T) {
	root := newRootCommand(envOf(nil), strings.NewReader(""), io.Discard, io.Discard)
	for _, tt := range []struct{ args, want []string }{
		{[]string{"dev", "-addr", "127.0.0.1:0", "-public-url=http://127.0.0.1:1"}, []string{"dev", "--addr", "127.0.0.1:0", "--public-url=http://127.0.0.1:1"}},
		{[]string{"flows", "list", "-json", "-state", "pending", "-server", "http://x"}, []string{"flows", "list", "--json", "--state", "pending", "--server", "http://x"}},
		{[]string{"flows", "cancel", "ID", "--reason", "-new", "-new"}, []string{"flows", "cancel", "ID", "--reason", "-new", "-new"}},
		{[]string{"flows", "retry", "ID", "-reason", "-json", "-new"}, []string{"flows", "retry", "ID", "--reason", "-json", "--new"}},
		{[]string{"hook", "elicitation", "-policy", "/p", "-allow-origin", "https://x"}, []string{"hook", "elicitation", "--policy", "/p", "--allow-origin", "https://x"}},
		{[]string{"hook", "test", "-", "-policy", "/p"}, []string{"hook", "test", "-", "--policy", "/p"}},
		{[]string{"-version"}, []string{"--version"}},
		{[]string{"dev", "-h", "--", "-addr"}, []string{"dev", "-h", "--", "-addr"}},
	} {
		if got := twoDashes(root, tt.args); !slices.Equal(got, tt.want) {
			t.Errorf("%q: %q, want %q", tt.args, got, tt.want)
		}
	}
}

// TestCommandsAnswer: what a command line without a command, with an unknown one, or asking
// for help prints, and the error it returns (testdata/cli holds what a user sees).
func TestCommandsAnswer(t *testing.T) {
	for _, tt := range []struct {
		args           []string
		err            error
		stdout, stderr string
	}{
		{nil, usageStatus, "", "Available Commands:"},
		{[]string{"help"}, nil, "Available Commands:", ""},
		{[]string{"-help"}, nil, "Available Commands:", ""},
		{[]string{"--version"}, nil, "urlflow ", ""},
		{[]string{"version"}, nil, "urlflow ", ""},
		{[]string{"frobnicate"}, errors.New(`urlflow: unknown command "frobnicate"`), "", ""},
		{[]string{"flows"}, usageStatus, "", "summary"},
		{[]string{"flows", "help"}, nil, "summary", ""},
		{[]string{"flows", "frobnicate"}, errors.New(`urlflow flows: unknown command "frobnicate"`), "", ""},
		{[]string{"audit"}, usageStatus, "", "export"},
		{[]string{"audit", "import"}, errors.New(`urlflow audit: unknown command "import"`), "", ""},
		{[]string{"hook"}, usageStatus, "", "elicitation-result"},
		{[]string{"hook", "frobnicate"}, errors.New(`urlflow hook: unknown command "frobnicate"`), "", ""},
		{[]string{"dev", "extra"}, errors.New("urlflow dev: unexpected arguments: extra"), "", ""},
		{[]string{"service-key", "extra"}, errors.New("urlflow service-key: unexpected arguments: extra"), "", ""},
		{[]string{"dev", "--help"}, nil, "--public-url", ""},
		// A hook that Claude Code runs refuses what it cannot read, --help too.
		{[]string{"hook", "elicitation", "--nope"}, refusedStatus, "", "unknown flag"},
		{[]string{"hook", "elicitation-result", "--help"}, refusedStatus, "", "--allow-origin"},
	} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), tt.args, envOf(nil), strings.NewReader(""), &stdout, &stderr)
		if (err == nil) != (tt.err == nil) || (err != nil && err.Error() != tt.err.Error()) ||
			!strings.Contains(stdout.String(), tt.stdout) || !strings.Contains(stderr.String(), tt.stderr) {
			t.Errorf("urlflow %q: %v, stdout %q, stderr %q; want %v, stdout with %q, stderr with %q",
				tt.args, err, stdout.String(), stderr.String(), tt.err, tt.stdout, tt.stderr)
		}
	}
}
