package hook

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Decision is what the policy decided about one hook input.
type Decision string

// The decisions.
const (
	// Allow lets the request reach the user, or the answer reach the server, unchanged.
	Allow Decision = "allow"
	// Refuse stops an Elicitation before the user sees it.
	Refuse Decision = "refuse"
	// Decline replaces an accepted answer with a decline, without its content.
	Decline Decision = "decline"
)

// Entry is one decision as the audit log keeps it: what was asked, where, and why it was
// decided so; for forms the field names and the lengths of the values, never a value.
type Entry struct {
	Time          time.Time `json:"time"`
	Event         string    `json:"event"`
	Server        string    `json:"server"`
	Mode          string    `json:"mode"`
	Origin        string    `json:"origin,omitempty"`
	ElicitationID string    `json:"elicitation_id,omitempty"`
	// Action is the user's answer, for an ElicitationResult.
	Action   string   `json:"action,omitempty"`
	Decision Decision `json:"decision"`
	Reason   string   `json:"reason"`
	Fields   []Field  `json:"fields,omitempty"`
}

// Refused reports whether the decision stops the request or the answer.
func (e *Entry) Refused() bool { return e.Decision != Allow }

// Field is a form field in an audit entry: its name, and for an answer the type and length
// of its value.
type Field struct {
	Name   string `json:"name"`
	Type   string `json:"type,omitempty"`
	Length *int   `json:"length,omitempty"`
}

// ServerFinder finds the definitions of an MCP server in Claude Code's configuration;
// ClaudeCodeConfig is one.
type ServerFinder interface {
	Definitions(name, dir string) ([]ServerDefinition, error)
}

// Options are what a Judge takes beside the policy file.
type Options struct {
	// AllowedOrigins are allowed beside the policy's (the origins `urlflow hook install
	// --server` writes into the hook's command line).
	AllowedOrigins []string
	// Servers finds where Claude Code defines a server, for TrustedFormServers; no server
	// is trusted without it.
	Servers ServerFinder
	// Now is the clock of the audit entries; time.Now when nil.
	Now func() time.Time
}

// A Judge decides hook inputs by one policy.
type Judge struct {
	allowed    []Origin
	trusted    map[string]string // server name → normalised URL
	stance     Stance            // of servers not in stances
	stances    map[string]ServerStance
	servers    ServerFinder
	vocabulary func() *vocabulary // the default and the policy's own, on first use
	now        func() time.Time
}

// NewJudge returns a Judge for the policy p. An allowed origin or trusted server that does
// not parse is an error, all of them named at once.
func NewJudge(p Policy, opts Options) (*Judge, error) {
	j := &Judge{trusted: map[string]string{}, servers: opts.Servers, now: opts.Now,
		stance: cmp.Or(p.Stance, StanceStandard), stances: map[string]ServerStance{}}
	if j.now == nil {
		j.now = time.Now
	}
	var errs []error
	for _, raw := range append(append([]string(nil), opts.AllowedOrigins...), p.AllowedOrigins...) {
		o, err := allowedOrigin(raw)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		j.allowed = append(j.allowed, o)
	}
	for _, s := range p.TrustedFormServers {
		u := serverURL(s.URL)
		switch {
		case s.Name == "":
			errs = append(errs, errors.New("a trusted form server needs a name"))
		case u == "":
			errs = append(errs, fmt.Errorf("trusted form server %q: url %q is not an http or https URL", s.Name, s.URL))
		default:
			j.trusted[s.Name] = u
		}
	}
	if own, err := ownVocabulary(p.SecretWords, p.InnocentPhrases); err != nil {
		errs = append(errs, err)
	} else {
		j.vocabulary = sync.OnceValue(func() *vocabulary { return defaultVocabulary().with(own) })
	}
	if !p.Stance.valid() || p.Stance == StanceAnswersOnly {
		errs = append(errs, fmt.Errorf("stance %q: the stance of every server is standard or strict (answers-only is for a server named with its URL)", p.Stance))
	}
	for _, s := range p.Servers {
		u := serverURL(s.URL)
		switch {
		case s.Name == "":
			errs = append(errs, errors.New("a server's stance needs the server's name"))
		case !s.Stance.valid() || s.Stance == "":
			errs = append(errs, fmt.Errorf("server %q: stance %q is not answers-only, standard or strict", s.Name, s.Stance))
		case s.Stance == StanceAnswersOnly && u == "":
			errs = append(errs, fmt.Errorf("server %q: answers-only needs the server's http or https url, checked against Claude Code's configuration", s.Name))
		default:
			s.URL = u
			j.stances[s.Name] = s
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("the hook policy: %w", err)
	}
	return j, nil
}

// stanceOf returns the stance of in's server, and why when it is not the one the policy
// gives it: an answers-only server whose definitions do not all have its URL is read with
// the standard stance.
func (j *Judge) stanceOf(in *Input) (Stance, string) {
	s, ok := j.stances[in.MCPServerName]
	if !ok {
		return j.stance, ""
	}
	if s.Stance != StanceAnswersOnly {
		return s.Stance, ""
	}
	if ok, why := j.definedAt(in, s.URL, string(StanceAnswersOnly)); !ok {
		return StanceStandard, why
	}
	return StanceAnswersOnly, ""
}

// maxInput bounds a hook's input: an elicitation is a message and a small flat schema.
const maxInput = 1 << 20

// ReadInput reads one hook input, at most 1 MiB of JSON.
func ReadInput(r io.Reader) (*Input, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxInput+1))
	if err != nil {
		return nil, fmt.Errorf("read the hook's input: %w", err)
	}
	if len(data) > maxInput {
		return nil, errors.New("the hook's input is larger than 1 MiB")
	}
	var in Input
	if err := json.Unmarshal(data, &in); err != nil {
		return nil, fmt.Errorf("the hook's input is not a JSON object: %w", err)
	}
	return &in, nil
}

// Decide decides in as the event its hook_event_name says.
func (j *Judge) Decide(in *Input) Entry {
	e := Entry{Time: j.now().UTC(), Event: in.HookEventName, Server: in.MCPServerName, Mode: in.mode(),
		ElicitationID: in.ElicitationID}
	if in.URL != "" {
		if o, err := ParseOrigin(in.URL); err == nil {
			e.Origin = o.String()
		}
	}
	switch in.HookEventName {
	case EventElicitation:
		j.decideRequest(in, &e)
	case EventElicitationResult:
		e.Action = in.Action
		j.decideAnswer(in, &e)
	default:
		e.Decision, e.Reason = Refuse, fmt.Sprintf("not an elicitation hook's input (hook_event_name %q)", in.HookEventName)
	}
	return e
}

// decideRequest decides an Elicitation: the origin of a URL, the questions of a form.
func (j *Judge) decideRequest(in *Input, e *Entry) {
	switch e.Mode {
	case ModeURL:
		e.Decision, e.Reason = j.judgeURL(in.URL)
	case ModeForm:
		reason, fields, err := formAsksForSecret(j.vocabulary(), in.Message, in.RequestedSchema)
		for _, f := range fields {
			e.Fields = append(e.Fields, Field{Name: f.path})
		}
		stance, why := j.stanceOf(in)
		switch {
		case err != nil:
			e.Decision, e.Reason = Refuse, err.Error()
		case stance == StanceAnswersOnly:
			e.Decision, e.Reason = Allow, fmt.Sprintf("server %q is answers-only: its forms go through, their answers are judged", in.MCPServerName)
		case reason != "":
			j.refuseUnlessTrusted(in, e, reason+suffix(why), Refuse)
		case stance == StanceStrict:
			if f := firstUnclearField(fields); f != "" {
				j.refuseUnlessTrusted(in, e, fmt.Sprintf("server %q is strict: field %q takes free text the hook cannot tell is innocent", in.MCPServerName, f), Refuse)
				return
			}
			e.Decision, e.Reason = Allow, "the form asks for no secret, and its free text is of innocent kinds"
		default:
			e.Decision, e.Reason = Allow, "the form asks for no secret"+suffix(why)
		}
	default:
		e.Decision, e.Reason = Refuse, fmt.Sprintf("unknown mode %q", e.Mode)
	}
}

func suffix(why string) string {
	if why == "" {
		return ""
	}
	return " (" + why + ")"
}

// judgeURL decides a URL-mode request by its URL's origin.
func (j *Judge) judgeURL(raw string) (Decision, string) {
	if raw == "" {
		return Refuse, "a URL-mode request without a URL"
	}
	o, err := ParseOrigin(raw)
	if err != nil {
		return Refuse, "the URL is " + err.Error()
	}
	if o.Scheme != "https" && !o.Loopback() {
		return Refuse, fmt.Sprintf("%s is plain http: only https, or http on loopback", o)
	}
	for _, a := range j.allowed {
		if a == o {
			return Allow, fmt.Sprintf("origin %s is allowed", o)
		}
	}
	return Refuse, fmt.Sprintf("origin %s is not an allowed origin", o)
}

// trustedServer reports whether the policy trusts in's server to ask for secrets: its name
// is trusted, and every definition of that name in Claude Code's configuration has the
// trusted URL. why says which, or why not when the name is trusted but a definition differs.
func (j *Judge) trustedServer(in *Input) (trusted bool, why string) {
	want, ok := j.trusted[in.MCPServerName]
	if !ok {
		return false, ""
	}
	return j.definedAt(in, want, "trusted")
}

// definedAt reports whether every definition of in's server in Claude Code's configuration
// has the URL want, and says so, or why not, of a server that the policy calls role.
func (j *Judge) definedAt(in *Input, want, role string) (bool, string) {
	name := in.MCPServerName
	if j.servers == nil {
		return false, fmt.Sprintf("server %q is %s by name, but its URL cannot be checked", name, role)
	}
	defs, err := j.servers.Definitions(name, in.CWD)
	if err != nil {
		return false, fmt.Sprintf("server %q is %s by name, but its definition cannot be read: %v", name, role, err)
	}
	if len(defs) == 0 {
		return false, fmt.Sprintf("server %q is %s by name, but Claude Code's configuration files do not define it", name, role)
	}
	for _, d := range defs {
		if serverURL(d.URL) != want {
			return false, fmt.Sprintf("server %q is %s by name, but %s defines it with another URL", name, role, d.Source)
		}
	}
	return true, fmt.Sprintf("server %q is %s at %s", name, role, want)
}

// decideAnswer decides an ElicitationResult: an accepted answer whose values look like a
// secret is declined.
func (j *Judge) decideAnswer(in *Input, e *Entry) {
	names := slices.Sorted(maps.Keys(in.Content))
	var reason string
	values := make([]any, len(names)) // decoded once, for judgeValue and splitSecret
	for i, name := range names {
		var f Field
		f, values[i] = judgeValue(name, in.Content[name])
		e.Fields = append(e.Fields, f)
		if kind := firstSecretShaped(leaves(values[i])); reason == "" && kind != "" {
			reason = fmt.Sprintf("field %q holds what looks like %s", name, kind)
		}
	}
	if reason == "" && in.Action == "accept" {
		reason = splitSecret(names, values)
	}
	switch {
	case in.Action != "accept":
		e.Decision, e.Reason = Allow, "the user did not accept: no answer leaves"
	case reason == "":
		e.Decision, e.Reason = Allow, "no value looks like a secret"
	default:
		j.refuseUnlessTrusted(in, e, reason, Decline)
	}
}

// refuseUnlessTrusted decides with refusal, because of reason, unless the policy trusts
// in's server to deal in secrets.
func (j *Judge) refuseUnlessTrusted(in *Input, e *Entry, reason string, refusal Decision) {
	trusted, why := j.trustedServer(in)
	if trusted {
		e.Decision, e.Reason = Allow, reason+"; "+why
		return
	}
	e.Decision, e.Reason = refusal, reason+"; secrets go through URL mode"+suffix(why)
}

// judgeValue describes a field of an answer for the audit log, and returns its value
// decoded (nil when it is not JSON).
func judgeValue(name string, raw json.RawMessage) (Field, any) {
	f := Field{Name: name}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // a number as written: a card number of 19 digits is more than a float holds
	if dec.Decode(&v) != nil {
		f.Type = "invalid"
		return f, nil
	}
	switch v := v.(type) {
	case string:
		n := utf8.RuneCountInString(v)
		f.Type, f.Length = "string", &n
	case json.Number:
		f.Type = "number"
	case bool:
		f.Type = "boolean"
	case []any:
		n := len(v)
		f.Type, f.Length = "array", &n
	default:
		f.Type = "object"
	}
	return f, v
}

// leaves returns the strings (and numbers, as written) inside v, depth first, object
// members in name order.
func leaves(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case json.Number:
		return []string{v.String()}
	case []any:
		var out []string
		for _, item := range v {
			out = append(out, leaves(item)...)
		}
		return out
	case map[string]any:
		var out []string
		for _, name := range slices.Sorted(maps.Keys(v)) {
			out = append(out, leaves(v[name])...)
		}
		return out
	}
	return nil
}

// firstSecretShaped is what the first of values that looks like a secret looks like.
func firstSecretShaped(values []string) string {
	for _, s := range values {
		if kind := secretShaped(s); kind != "" {
			return kind
		}
	}
	return ""
}

// maxSplitFields bounds the fields whose values are judged two by two for a key split
// between them: a form has a few.
const maxSplitFields = 16

// splitSecret returns why the decoded values of the fields names, none of which looks
// like a secret alone, do together: one key split over two fields (in either order), or
// over all of them in name order. "" when they do not.
func splitSecret(names []string, decoded []any) string {
	if len(names) < 2 || len(names) > maxSplitFields {
		return ""
	}
	values := make([]string, len(names))
	for i := range decoded {
		values[i] = strings.Join(leaves(decoded[i]), "")
	}
	for i := range names {
		for j := range names {
			if i == j || values[i] == "" || values[j] == "" {
				continue
			}
			if kind := secretShaped(values[i] + values[j]); kind != "" {
				return fmt.Sprintf("fields %q and %q together hold what looks like %s", names[i], names[j], kind)
			}
		}
	}
	if kind := secretShaped(strings.Join(values, "")); kind != "" && len(names) > 2 {
		return fmt.Sprintf("the fields together hold what looks like %s", kind)
	}
	return ""
}
