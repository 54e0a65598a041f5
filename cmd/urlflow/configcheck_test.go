package main

import (
	"bytes"
	"context"
	"net"
	"regexp"
	"strings"
	"testing"

	"github.com/urlflow/urlflow/internal/embedded"
	"github.com/urlflow/urlflow/internal/issuertest"
	"github.com/urlflow/urlflow/state/vault"
)

// checkConfig runs urlflow config check with args in the environment env, and returns its
// exit status and what it printed.
func checkConfig(t *testing.T, env map[string]string, args ...string) (status int, stdout, stderr string) {
	t.Helper()
	var out, errs bytes.Buffer
	status = report(run(context.Background(), append([]string{"config", "check"}, args...), envOf(env), strings.NewReader(""), &out, &errs), &errs)
	return status, out.String(), errs.String()
}

// serveEnvironment is a whole configuration of urlflow serve, with secrets that must not
// be shown: the Redis password, the key ring, the tokens and the client secret.
func serveEnvironment(t *testing.T, redisURL, issuer string) map[string]string {
	return map[string]string{
		"URLFLOW_CONFIG": writeFile(t, "log_level: debug\npublic_url: https://urlflow.example.com\n"+
			"secrets:\n  - name: acme_key\n    label: Acme key\nproviders:\n  - name: gh\n    preset: github\n"+
			"    client_id: gh-client\n    client_secret_env: GH_SECRET\noperators:\n  subjects: [alice]\n"),
		"GH_SECRET":                  "gh-secret-value-never-shown",
		"URLFLOW_REDIS_URL":          redisURL,
		"URLFLOW_KEYS":               vault.GenerateKeyRing("k1"),
		"URLFLOW_OPERATOR_TOKENS":    "operator-token-never-shown",
		"URLFLOW_OIDC_ISSUER":        issuer,
		"URLFLOW_OIDC_CLIENT_ID":     "urlflow",
		"URLFLOW_OIDC_CLIENT_SECRET": "client-secret-never-shown",
	}
}

// TestConfigCheckShowsEachSettingWithItsSource: a valid configuration of serve is checked
// without connecting anywhere (its Redis and issuer do not exist), and each setting is
// printed with where it came from, secrets masked.
func TestConfigCheckShowsEachSettingWithItsSource(t *testing.T) {
	env := serveEnvironment(t, "redis://:redis-password-never-shown@127.0.0.1:1/0", "https://id.invalid")
	status, stdout, stderr := checkConfig(t, env, "--addr", "127.0.0.1:9999")
	if status != 0 || stderr != "" {
		t.Fatalf("status %d, stderr %q, want 0 and nothing", status, stderr)
	}
	for _, want := range []string{
		`URLFLOW_ADDR +127\.0\.0\.1:9999 +flag --addr\n`,
		`URLFLOW_PUBLIC_URL +https://urlflow\.example\.com +\S+urlflow\.yaml:2\n`,
		`URLFLOW_LOG_LEVEL +debug +\S+urlflow\.yaml:1\n`,
		`URLFLOW_LOG_FORMAT +json +default\n`,
		`URLFLOW_REDIS_URL +redis://:xxxxx@127\.0\.0\.1:1/0 +environment URLFLOW_REDIS_URL\n`,
		`URLFLOW_KEYS +\(set, \d+ bytes\) +environment URLFLOW_KEYS\n`,
		`URLFLOW_OIDC_CLIENT_SECRET +\(set, 25 bytes\) +environment URLFLOW_OIDC_CLIENT_SECRET\n`,
		`URLFLOW_OPERATOR_READONLY_TOKENS +\(not set: none\) +–\n`,
		`secret slots \(1\): acme_key\n`, `providers \(1\): gh \(github\)\n`, `services \(0\): none\n`,
		`operators in the browser \(1\): alice\n`, `The configuration of urlflow serve has no problem\.\n$`,
	} {
		if !regexp.MustCompile(want).MatchString(stdout) {
			t.Errorf("stdout does not match %s:\n%s", want, stdout)
		}
	}
	for _, secret := range []string{"never-shown", env["URLFLOW_KEYS"][3:], "URLFLOW_TEST_"} {
		if strings.Contains(stdout, secret) {
			t.Errorf("stdout shows %q:\n%s", secret, stdout)
		}
	}
}

// TestConfigCheckNamesEveryProblemOnce: a configuration with problems prints every one, once,
// on stderr and exits 1; the configuration as read is still printed.
func TestConfigCheckNamesEveryProblemOnce(t *testing.T) {
	env := serveEnvironment(t, "10.9.8.7:6379", "https://id.example.com")
	env["URLFLOW_CONFIG"] = writeFile(t, "log_levl: debug\nsecrets:\n  - name: k\n    label: K\n  - name: k\n    label: K\n")
	env["URLFLOW_TEST_PUSH_WAIT"] = "1s"
	status, stdout, stderr := checkConfig(t, env)
	if status != 1 || !strings.Contains(stdout, "URLFLOW_ADDR") {
		t.Fatalf("status %d, stdout %q: want 1 and the configuration", status, stdout)
	}
	for _, want := range []string{
		`urlflow.yaml:1:1: log_levl: unknown key; did you mean "log_level"?`,
		"URLFLOW_REDIS_URL: want redis://HOST:PORT",
		"URLFLOW_PUBLIC_URL is required",
		"URLFLOW_TEST_PUSH_WAIT is a test-only setting",
		"urlflow.yaml:5:5: secret slot k: defined twice",
	} {
		if n := strings.Count(stderr, want); n != 1 {
			t.Errorf("stderr says %q %d times, want once:\n%s", want, n, stderr)
		}
	}
	if !strings.HasPrefix(stderr, "urlflow: ") || strings.Contains(stderr, "10.9.8.7") {
		t.Errorf("stderr is not as urlflow serve says it, or shows the Redis URL:\n%s", stderr)
	}
}

// TestConfigCheckConnectsOnlyWhenAsked: --connect pings Redis and reads the issuer's
// discovery document; one that does not answer is a problem.
func TestConfigCheckConnectsOnlyWhenAsked(t *testing.T) {
	redis, err := embedded.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer redis.Close()
	issuer := issuertest.Start(t)
	status, stdout, stderr := checkConfig(t, serveEnvironment(t, redis.URL(), issuer.URL), "--connect")
	if status != 0 || !strings.Contains(stdout, "Redis at "+strings.TrimPrefix(redis.URL(), "redis://")+": answers") ||
		!strings.Contains(stdout, "OpenID issuer "+issuer.URL+": discovery document read") {
		t.Fatalf("status %d\nstdout:\n%s\nstderr:\n%s", status, stdout, stderr)
	}

	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nowhere := "http://" + closed.Addr().String()
	closed.Close()
	status, _, stderr = checkConfig(t, serveEnvironment(t, "redis://:redis-password@"+closed.Addr().String(), nowhere), "--connect")
	for _, want := range []string{"urlflow: URLFLOW_REDIS_URL: connect to Redis (standalone) at " + closed.Addr().String(),
		"URLFLOW_OIDC_ISSUER: discover issuer " + nowhere} {
		if status != 1 || !strings.Contains(stderr, want) {
			t.Errorf("status %d, want 1 and %q in stderr:\n%s", status, want, stderr)
		}
	}
	if strings.Contains(stderr, "redis-password") {
		t.Errorf("stderr shows the Redis password:\n%s", stderr)
	}
}

// TestConfigCheckChecksAsDevToo: --mode dev reads dev's settings and defaults (the
// built-in demo, loopback only).
func TestConfigCheckChecksAsDevToo(t *testing.T) {
	status, stdout, _ := checkConfig(t, nil, "--mode", "dev")
	if status != 0 || !strings.Contains(stdout, "secret slots (1): demo_api_key") || !strings.Contains(stdout, "URLFLOW_DEV_DEMO_RESOURCE") {
		t.Fatalf("dev: status %d:\n%s", status, stdout)
	}
	if status, _, stderr := checkConfig(t, nil, "--mode", "dev", "--addr", "0.0.0.0:80"); status != 1 || !strings.Contains(stderr, "--addr: urlflow dev listens on loopback only") {
		t.Errorf("dev on 0.0.0.0: status %d, stderr %q", status, stderr)
	}
	if status, _, stderr := checkConfig(t, nil, "--mode", "prod"); status != 2 || !strings.Contains(stderr, `--mode: want serve or dev, got "prod"`) {
		t.Errorf("--mode prod: status %d, stderr %q", status, stderr)
	}
}

// TestMaskedURLsShowNoPassword, for the shapes of URL a password hides in.
func TestMaskedURLsShowNoPassword(t *testing.T) {
	for raw, want := range map[string]string{
		"redis://:hunter2@redis:6379/1":                           "redis://:xxxxx@redis:6379/1",
		"rediss://user:hunter2@redis:6380":                        "rediss://user:xxxxx@redis:6380",
		"redis://redis:26379?master_name=m&password=hunter2":      "redis://redis:26379?master_name=m&password=xxxxx",
		"redis://:hunter2/with-slash@redis:6379":                  "",
		"redis://:hunter2@with@at@redis:6379":                     "redis://:xxxxx@redis:6379",
		"unix:///run/redis.sock?password=hunter2":                 "unix:///run/redis.sock?password=xxxxx",
		"redis://redis:6379?sentinel_password=hunter2&addr=r2:63": "redis://redis:6379?addr=r2%3A63&sentinel_password=xxxxx",
		// A query url.Values cannot read whole (found by review: shown as given before).
		"redis://h:6379?password=hun;ter2":         "",
		"redis://h:6379?sentinel_password=hun%zz2": "",
	} {
		got, ok := maskedURL(raw)
		if got != want || ok != (want != "") {
			t.Errorf("maskedURL(%q) = %q, %v; want %q", raw, got, ok, want)
		}
		if strings.Contains(got, "hunter2") {
			t.Errorf("maskedURL(%q) shows the password: %q", raw, got)
		}
	}
	if got := shownValue(lookupSetting("redis_url"), value{Raw: "redis://:hunter2/x@h:1", From: fromEnv}); got != "(set, 22 bytes)" {
		t.Errorf("an unparsable Redis URL is shown as %q", got)
	}
}
