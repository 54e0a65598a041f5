package hook

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Policy is what a policy file says; every part is optional. Without a file, and for what a
// file leaves out, the defaults of the package comment apply.
type Policy struct {
	// AllowedOrigins are the origins a URL-mode request may send the user to, such as
	// urlflow's own (https://urlflow.example.com). http is allowed on loopback only.
	AllowedOrigins []string `yaml:"allowed_origins"`
	// TrustedFormServers may ask for a secret in a form anyway. A server is trusted when
	// Claude Code's configuration defines its name with this URL, and only that URL, in
	// every place that defines it.
	TrustedFormServers []TrustedServer `yaml:"trusted_form_servers"`
	// AuditLog is the JSON Lines file every decision is appended to: a path relative to
	// the policy file's directory, or starting with ~/; DefaultAuditLog when empty.
	AuditLog string `yaml:"audit_log"`
	// Stance is how forms of servers not named in Servers are read (StanceStandard when
	// empty); Servers names a stance per server.
	Stance  Stance         `yaml:"stance"`
	Servers []ServerStance `yaml:"servers"`
	// SecretWords are phrases of your own that mark a form that asks for a secret, beside
	// the vocabulary's (matched the same way); InnocentPhrases hold a secret word but name
	// something else (as the vocabulary's not_secret).
	SecretWords     []string `yaml:"secret_words"`
	InnocentPhrases []string `yaml:"innocent_phrases"`
}

// Stance is how much of a server's forms the hook lets through.
type Stance string

// The stances, from the most open.
const (
	// StanceAnswersOnly lets every form request through and judges the answers only: for
	// a server you trust with your questions, named by name and URL (as a trusted form
	// server is checked).
	StanceAnswersOnly Stance = "answers-only"
	// StanceStandard refuses a form whose text asks for a secret, and judges answers.
	StanceStandard Stance = "standard"
	// StanceStrict also refuses a form with a free-text field whose purpose the hook cannot
	// tell is innocent: a string without a format of email, date, date-time, time or uri, a
	// number without a range of at most 10,000 values.
	StanceStrict Stance = "strict"
)

// ServerStance is a stance for the MCP server of that name; answers-only needs its URL,
// checked as a trusted form server's is.
type ServerStance struct {
	Name   string `yaml:"name"`
	URL    string `yaml:"url"`
	Stance Stance `yaml:"stance"`
}

// valid reports whether s is a stance, or empty (the default).
func (s Stance) valid() bool {
	switch s {
	case "", StanceAnswersOnly, StanceStandard, StanceStrict:
		return true
	}
	return false
}

// TrustedServer is an MCP server trusted to ask for secrets in form mode.
type TrustedServer struct {
	Name string `yaml:"name"`
	URL  string `yaml:"url"`
}

// configDir returns urlflow's directory in the user's configuration directory.
func configDir() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("find the user's configuration directory: %w", err)
	}
	return filepath.Join(dir, "urlflow"), nil
}

// DefaultPolicyPath returns where the policy file is read from when none is named:
// hook.yaml in urlflow's directory of the user's configuration directory
// (~/.config/urlflow/hook.yaml on Linux).
func DefaultPolicyPath() (string, error) {
	dir, err := configDir()
	return filepath.Join(dir, "hook.yaml"), err
}

// DefaultAuditLog returns where decisions are logged when the policy names no file:
// hook-audit.jsonl next to the default policy file.
func DefaultAuditLog() (string, error) {
	dir, err := configDir()
	return filepath.Join(dir, "hook-audit.jsonl"), err
}

// LoadPolicy reads the policy file at path. A file that does not exist is an empty policy
// when optional is true (the default file) and an error otherwise. Unknown keys are errors:
// a misspelt rule must not be silently ignored.
func LoadPolicy(path string, optional bool) (Policy, error) {
	var p Policy
	data, err := os.ReadFile(path)
	if optional && errors.Is(err, fs.ErrNotExist) {
		return p, nil
	}
	if err != nil {
		return p, fmt.Errorf("read the hook policy: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&p); err != nil && !errors.Is(err, io.EOF) {
		return p, fmt.Errorf("read the hook policy %s: %w", path, err)
	}
	return p, nil
}

// expandHome replaces a leading ~/ with the user's home directory.
func expandHome(path string) (string, error) {
	rest, ok := strings.CutPrefix(path, "~/")
	if !ok {
		return path, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("expand %s: %w", path, err)
	}
	return filepath.Join(home, rest), nil
}

// allowedOrigin parses an origin a policy allows: an http or https URL with nothing after
// its host and port but an optional /, https unless on loopback.
func allowedOrigin(raw string) (Origin, error) {
	o, err := ParseOrigin(raw)
	if err != nil {
		return o, fmt.Errorf("allowed origin %q: %w", raw, err)
	}
	if u, _ := url.Parse(strings.TrimSpace(raw)); u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.Fragment != "" {
		return o, fmt.Errorf("allowed origin %q: an origin is a scheme, a host and a port; not a path", raw)
	}
	if o.Scheme != "https" && !o.Loopback() {
		return o, fmt.Errorf("allowed origin %q: only https, or http on loopback", raw)
	}
	return o, nil
}

// serverURL normalises an MCP server's URL for comparison: its origin and its path without a
// trailing slash. It returns "" for what is not an http or https URL.
func serverURL(raw string) string {
	o, err := ParseOrigin(raw)
	if err != nil {
		return ""
	}
	u, _ := url.Parse(strings.TrimSpace(raw))
	return o.String() + strings.TrimSuffix(u.EscapedPath(), "/")
}
