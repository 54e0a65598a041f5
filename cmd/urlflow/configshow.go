package main

import (
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"

	"github.com/urlflow/urlflow/oauth/providers"
	"github.com/urlflow/urlflow/services"
	"github.com/urlflow/urlflow/slots"
)

// masked stands for a password inside a URL that is shown.
const masked = "xxxxx"

// writeEffectiveConfig writes the configuration that l read for urlflow config check: one
// line per setting of its mode with the value and where it came from, secrets masked, then
// what the sections of the file name (no secret is in them).
func writeEffectiveConfig(w io.Writer, cfg *config, l *loading) error {
	from := "from " + describeFile(cfg.ConfigFile) + ", the environment and the command line"
	if cfg.ConfigFile == "" && l.mode == cmdServe {
		from = "from the environment and the command line (no configuration file)"
	}
	fmt.Fprintf(w, "The configuration of urlflow %s, %s:\n\n", l.mode, from)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SETTING\tVALUE\tFROM")
	for i := range settingsTable {
		s := &settingsTable[i]
		v, read := l.v[s.Name]
		if !read || (s.TestOnly && !v.given()) {
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Env, shownValue(s, v), l.sourceOf(s, v))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "secret slots (%d): %s\n", len(cfg.secrets), names(cfg.secrets, func(s slots.Slot) string { return s.Name }))
	fmt.Fprintf(w, "providers (%d): %s\n", len(cfg.providers), names(cfg.providers, providerName))
	fmt.Fprintf(w, "services (%d): %s\n", len(cfg.services), names(cfg.services, func(s services.Config) string { return s.Name }))
	operators := fmt.Sprintf("operators in the browser (%d): %s", len(cfg.OperatorSubjects), names(cfg.OperatorSubjects, func(s string) string { return s }))
	if cfg.OperatorClaim != "" {
		operators += fmt.Sprintf("; and whoever's ID token has %s %s", cfg.OperatorClaim, cfg.OperatorClaimValue)
	}
	if _, err := fmt.Fprintln(w, operators); err != nil {
		return err
	}
	traces := "traces: off (no OTEL_* variable turns them on)"
	if cfg.Tracing.On {
		traces = "traces: on, exported over OTLP " + cfg.Tracing.Protocol + " as the OTEL_* variables say"
	}
	_, err := fmt.Fprintln(w, traces)
	return err
}

// providerName is a provider as config check names it: its name, and its preset.
func providerName(p providers.Config) string {
	if p.Preset != "" {
		return p.Name + " (" + p.Preset + ")"
	}
	return p.Name
}

// names joins the name of each of list, or says there is none.
func names[T any](list []T, name func(T) string) string {
	if len(list) == 0 {
		return "none"
	}
	out := make([]string, len(list))
	for i, item := range list {
		out[i] = name(item)
	}
	return strings.Join(out, ", ")
}

// sourceOf says where v, the value of s, came from.
func (l *loading) sourceOf(s *setting, v value) string {
	switch v.From {
	case fromFlag:
		return "flag --" + s.Flag
	case fromEnv:
		return "environment " + s.Env
	case fromEnvFile:
		return "the file of " + s.Env + "_FILE"
	case fromFile:
		return fmt.Sprintf("%s:%d", l.file, v.Line)
	case fromDefault:
		return "default"
	}
	return "–"
}

// shownValue is v, the value of s, as config check shows it: a secret as its length only,
// except a URL, shown with its password masked; no password of a URL; what an unset
// setting means.
func shownValue(s *setting, v value) string {
	switch {
	case v.From == fromNowhere && s.DefaultNote != "":
		return "(not set: " + strings.ReplaceAll(s.DefaultNote, "`", "") + ")"
	case v.From == fromNowhere:
		return "(not set)"
	case v.Raw == "":
		return "(set, empty)"
	}
	if u, ok := maskedURL(v.Raw); ok && (!s.Secret || s.Type == "URL") {
		return u
	}
	if s.Secret {
		return fmt.Sprintf("(set, %d bytes)", len(v.Raw))
	}
	return v.Raw
}

// maskedURL returns raw, a URL, with the password of its user info and the values of its
// query parameters that name a password masked. A URL that does not parse as one, or
// whose @ is not where a user info would end (a password with a / in it), is not a URL
// that can be shown.
func maskedURL(raw string) (string, bool) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Opaque != "" || (u.Host == "" && u.Path == "") {
		return "", false
	}
	if strings.Contains(u.Host+u.Path+u.RawQuery+u.Fragment, "@") || (strings.Contains(raw, "@") && u.User == nil) {
		return "", false
	}
	// A query that does not parse whole is not shown: url.Values would drop what it cannot
	// read (a ; or a bad escape), password and all, and leave the raw query as it was.
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return "", false
	}
	for key := range q {
		if strings.Contains(strings.ToLower(key), "password") || strings.Contains(strings.ToLower(key), "secret") {
			q.Set(key, masked)
		}
	}
	u.RawQuery = q.Encode()
	return u.Redacted(), true
}
