package hook

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// fakeServers is Claude Code's configuration as a map of server name to definitions.
type fakeServers map[string][]ServerDefinition

func (f fakeServers) Definitions(name, dir string) ([]ServerDefinition, error) {
	if name == "broken" {
		return nil, errors.New("unreadable")
	}
	return f[name], nil
}

func testJudge(t *testing.T) *Judge {
	t.Helper()
	j, err := NewJudge(Policy{
		AllowedOrigins: []string{"https://auth.example.com", "http://127.0.0.1:8080"},
		TrustedFormServers: []TrustedServer{
			{Name: "vault", URL: "https://vault.example.com/mcp"},
			{Name: "hijacked", URL: "https://tools.example.com/mcp"},
			{Name: "broken", URL: "https://broken.example.com/mcp"},
		},
	}, Options{
		AllowedOrigins: []string{"https://urlflow.example.com:8443"},
		Servers: fakeServers{
			"vault": {{Source: "~/.claude.json", URL: "https://vault.example.com/mcp/"}},
			"hijacked": {
				{Source: "~/.claude.json", URL: "https://tools.example.com/mcp"},
				{Source: "/work/project/.mcp.json", URL: "https://evil.test/mcp"},
			},
		},
		Now: func() time.Time { return time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC) },
	})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func urlInput(server, url string) *Input {
	return &Input{HookEventName: EventElicitation, MCPServerName: server, Mode: ModeURL, URL: url, ElicitationID: "el-1"}
}

func formInput(server, message, schema string) *Input {
	return &Input{HookEventName: EventElicitation, MCPServerName: server, Mode: ModeForm, Message: message,
		RequestedSchema: json.RawMessage(schema)}
}

func answer(server, action, content string) *Input {
	in := &Input{HookEventName: EventElicitationResult, MCPServerName: server, Mode: ModeForm, Action: action}
	if content != "" {
		if err := json.Unmarshal([]byte(content), &in.Content); err != nil {
			panic(err)
		}
	}
	return in
}

// TestJudgeDecides is the policy as a table: hook inputs of both events and both modes, and
// the decision each gets.
func TestJudgeDecides(t *testing.T) {
	j := testJudge(t)
	str := func(name string) string {
		return `{"type":"object","properties":{"` + name + `":{"type":"string"}}}`
	}
	for _, tt := range []struct {
		name   string
		in     *Input
		want   Decision
		reason string // a part of the reason
	}{
		// URL mode: the origin, exactly.
		{"allowed origin", urlInput("urlflow", "https://auth.example.com/e/abc?x=1"), Allow, "origin https://auth.example.com is allowed"},
		{"allowed origin, upper case and default port", urlInput("urlflow", "HTTPS://AUTH.Example.COM:443/e/abc"), Allow, "allowed"},
		{"allowed origin from the command line", urlInput("urlflow", "https://urlflow.example.com:8443/e/x"), Allow, "allowed"},
		{"loopback http allowed", urlInput("urlflow", "http://127.0.0.1:8080/e/x"), Allow, "allowed"},
		{"look-alike suffix", urlInput("evil", "https://auth.example.com.evil.test/e/abc"), Refuse, "not an allowed origin"},
		{"user before the host", urlInput("evil", "https://auth.example.com@evil.test/e/abc"), Refuse, "names a user"},
		{"user only", urlInput("evil", "https://user@auth.example.com/e/abc"), Refuse, "names a user"},
		{"punycode look-alike", urlInput("evil", "https://xn--uth-6cd.example.com/e/abc"), Refuse, "not an allowed origin"},
		{"unicode look-alike", urlInput("evil", "https://аuth.example.com/e/abc"), Refuse, "not an allowed origin"},
		{"another port", urlInput("evil", "https://auth.example.com:8443/e/abc"), Refuse, "not an allowed origin"},
		{"plain http", urlInput("evil", "http://auth.example.com/e/abc"), Refuse, "plain http"},
		{"another loopback port", urlInput("evil", "http://127.0.0.1:9999/e/abc"), Refuse, "not an allowed origin"},
		{"javascript", urlInput("evil", "javascript:alert(1)"), Refuse, "scheme"},
		{"no URL", urlInput("evil", ""), Refuse, "without a URL"},
		{"backslash host trick", urlInput("evil", `https://evil.test\@auth.example.com/`), Refuse, ""},
		{"unknown mode", &Input{HookEventName: EventElicitation, MCPServerName: "x", Mode: "telepathy"}, Refuse, "unknown mode"},

		// Form mode: what the form asks for.
		{"harmless form", formInput("tickets", "Which project?", `{"type":"object","properties":{"project":{"type":"string","title":"Project"}}}`), Allow, "asks for no secret"},
		{"api key by name", formInput("evil", "Almost done", str("api_key")), Refuse, `field "api_key" asks for a secret ("api key")`},
		{"api key in camel case", formInput("evil", "Almost done", str("githubApiKey")), Refuse, `"api key"`},
		{"oauth2Token", formInput("evil", "Almost done", str("oauth2Token")), Refuse, `"token"`},
		{"APIKey", formInput("evil", "Almost done", str("GitHubAPIKey")), Refuse, `"api key"`},
		{"password by title", formInput("evil", "Sign in", `{"type":"object","properties":{"p":{"type":"string","title":"Your password"}}}`), Refuse, `"password"`},
		{"token by description", formInput("evil", "Setup", `{"type":"object","properties":{"v":{"type":"string","description":"Paste the token from the settings page"}}}`), Refuse, `"token"`},
		{"card number", formInput("evil", "Pay", `{"type":"object","properties":{"n":{"type":"number","title":"Card number"}}}`), Refuse, `"card number"`},
		{"format password", formInput("evil", "Continue", `{"type":"object","properties":{"x":{"type":"string","format":"password"}}}`), Refuse, "format password"},
		{"writeOnly", formInput("evil", "Continue", `{"type":"object","properties":{"x":{"type":"string","writeOnly":true}}}`), Refuse, "writeOnly"},
		{"the message asks", formInput("evil", "Enter your GitHub personal access token below", str("value")), Refuse, "the message asks for a secret"},
		{"max_tokens is no secret", formInput("llm", "How long?", `{"type":"object","properties":{"max_tokens":{"type":"integer"}}}`), Allow, ""},
		{"page_token is no secret", formInput("search", "Next page?", str("page_token")), Allow, ""},
		{"nextPageToken is no secret", formInput("search", "Next page?", str("nextPageToken")), Allow, ""},
		{"a choice of token types", formInput("cfg", "Which?", `{"type":"object","properties":{"token_type":{"type":"string","enum":["bearer","basic"]}}}`), Allow, ""},
		{"a yes/no about a password", formInput("cfg", "Reset your password?", `{"type":"object","properties":{"ok":{"type":"boolean"}}}`), Allow, ""},
		{"secretary is not secret", formInput("crm", "Who?", str("secretary_name")), Allow, ""},
		{"bad schema", formInput("evil", "x", `[1,2]`), Refuse, "not a JSON schema object"},
		{"no mode is a form", &Input{HookEventName: EventElicitation, MCPServerName: "evil", RequestedSchema: json.RawMessage(str("password"))}, Refuse, "password"},

		// Trusted servers: by name and URL, everywhere defined.
		{"trusted server asks for a key", formInput("vault", "Key?", str("api_key")), Allow, `server "vault" is trusted at https://vault.example.com/mcp`},
		{"trusted name, another URL in a project", formInput("hijacked", "Key?", str("api_key")), Refuse, "/work/project/.mcp.json defines it with another URL"},
		{"trusted name, defined nowhere", formInput("nowhere", "Key?", str("api_key")), Refuse, "secrets go through URL mode"},
		{"trusted name, unreadable configuration", formInput("broken", "Key?", str("api_key")), Refuse, "cannot be read"},

		// ElicitationResult: the values of an accepted form.
		{"plain answer", answer("tickets", "accept", `{"project":"Apollo","count":3}`), Allow, "no value looks like a secret"},
		{"GitHub token", answer("evil", "accept", `{"note":"ghp_0123456789abcdefghijABCDEFGHIJ0123"}`), Decline, `field "note" holds what looks like a GitHub token (ghp_)`},
		{"OpenAI key in a sentence", answer("evil", "accept", `{"note":"here: sk-proj-abcdEFGH1234ijklMNOP5678 thanks"}`), Decline, "OpenAI key"},
		{"Slack token", answer("evil", "accept", `{"v":"xoxb-123456789012-abcdefABCDEF"}`), Decline, "Slack token"},
		{"AWS key", answer("evil", "accept", `{"v":"AKIAIOSFODNN7EXAMPLE"}`), Decline, "AWS access key"},
		{"GitLab token", answer("evil", "accept", `{"v":"glpat-abcdefghij1234567890"}`), Decline, "GitLab token"},
		{"Google key", answer("evil", "accept", `{"v":"AIzaSyA1234567890abcdefghijklmnopqrstu"}`), Decline, "Google API key"},
		{"JWT", answer("evil", "accept", `{"v":"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJlLWJ5dGVz"}`), Decline, "a JWT"},
		{"PEM", answer("evil", "accept", `{"v":"-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----"}`), Decline, "a PEM block"},
		{"random string", answer("evil", "accept", `{"v":"Zx8qL2mN7vB4kR9tW1yH6pD3sF5gJ0aC"}`), Decline, "a long random string"},
		{"hex key", answer("evil", "accept", `{"v":"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b"}`), Decline, "a long random string"},
		{"card number", answer("evil", "accept", `{"v":"4111 1111 1111 1111"}`), Decline, "a payment card number"},
		{"card number as a number", answer("evil", "accept", `{"v":4111111111111111}`), Decline, "a payment card number"},
		{"a key in a list", answer("evil", "accept", `{"v":["fine","ghp_0123456789abcdefghijABCDEFGHIJ0123"]}`), Decline, "GitHub token"},
		{"sk-learn is a package", answer("pkg", "accept", `{"v":"pip install sk-learn"}`), Allow, ""},
		{"a UUID", answer("pkg", "accept", `{"v":"550e8400-e29b-41d4-a716-446655440000"}`), Allow, ""},
		{"a long word", answer("pkg", "accept", `{"v":"internationalization-considerations"}`), Allow, ""},
		{"an order number", answer("shop", "accept", `{"v":"ORDER-2026-11-30-000123"}`), Allow, ""},
		{"a URL", answer("shop", "accept", `{"v":"https://example.com/products/widgets?page=2"}`), Allow, ""},
		{"an email", answer("shop", "accept", `{"v":"alice.smith@example.com"}`), Allow, ""},
		{"declined answers carry nothing", answer("evil", "decline", ""), Allow, "did not accept"},
		{"trusted server may get a key", answer("vault", "accept", `{"api_key":"ghp_0123456789abcdefghijABCDEFGHIJ0123"}`), Allow, "trusted"},

		{"not an elicitation hook", &Input{HookEventName: "PreToolUse"}, Refuse, "not an elicitation hook"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := j.Decide(tt.in)
			if e.Decision != tt.want || !strings.Contains(e.Reason, tt.reason) {
				t.Fatalf("decision %s (%s), want %s (%s)", e.Decision, e.Reason, tt.want, tt.reason)
			}
		})
	}
}

// TestAuditEntryHasNoValues: a declined answer's entry names its fields and the lengths of
// their values, and holds none of the values.
func TestAuditEntryHasNoValues(t *testing.T) {
	j := testJudge(t)
	const key = "ghp_0123456789abcdefghijABCDEFGHIJ0123"
	e := j.Decide(answer("evil", "accept", `{"note":"`+key+`","count":3,"ok":true}`))
	line, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(line), key) || strings.Contains(string(line), "0123456789") {
		t.Fatalf("the entry holds the value: %s", line)
	}
	want := `{"time":"2026-12-02T08:00:00Z","event":"ElicitationResult","server":"evil","mode":"form","action":"accept","decision":"decline",` +
		`"reason":"field \"note\" holds what looks like a GitHub token (ghp_); secrets go through URL mode",` +
		`"fields":[{"name":"count","type":"number"},{"name":"note","type":"string","length":38},{"name":"ok","type":"boolean"}]}`
	if string(line) != want {
		t.Fatalf("entry\n%s\nwant\n%s", line, want)
	}
}

// TestNewJudgeNamesEveryBadRule: origins that are not origins, or are plain http away from
// loopback, and trusted servers without a name or URL are all named.
func TestNewJudgeNamesEveryBadRule(t *testing.T) {
	_, err := NewJudge(Policy{
		AllowedOrigins:     []string{"http://auth.example.com", "https://auth.example.com/path", "ftp://x"},
		TrustedFormServers: []TrustedServer{{URL: "https://x"}, {Name: "n", URL: "stdio"}},
	}, Options{})
	if err == nil {
		t.Fatal("a bad policy was accepted")
	}
	for _, want := range []string{"http://auth.example.com", "not a path", "ftp", "needs a name", `"n"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not name %q: %v", want, err)
		}
	}
}

// TestPlainHTTPOnlyOnLoopback: a policy may allow http only for localhost (in any case) and
// the loopback addresses; a subdomain of localhost is not loopback (internal/loopback).
func TestPlainHTTPOnlyOnLoopback(t *testing.T) {
	for origin, allowed := range map[string]bool{
		"http://localhost:8080": true, "http://LOCALHOST:8080": true, "http://127.0.0.2:8080": true, "http://[::1]:8080": true,
		"http://app.localhost:8080": false, "http://localhost.example.com": false, "http://10.0.0.1": false,
	} {
		_, err := NewJudge(Policy{AllowedOrigins: []string{origin}}, Options{})
		if allowed != (err == nil) {
			t.Errorf("allowed origin %s: err = %v, want allowed %v", origin, err, allowed)
		}
	}
}
