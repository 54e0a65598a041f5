// Package slots describes the secrets urlflow collects. A Slot names one secret a user can
// store (for example an API key), says how to present it to people, and holds the rules a
// value must meet before urlflow accepts it. Slots come from the configuration file and
// are checked once, at start, with every problem named.
package slots

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/upstream"
)

// DefaultMaxLength bounds a secret whose slot sets no max_length.
const DefaultMaxLength = 4096

var namePattern = regexp.MustCompile(`^[a-z0-9_]+$`)

// Slot is one kind of secret a user can store.
type Slot struct {
	// Name identifies the slot in tools and configuration: [a-z0-9_]+.
	Name string `yaml:"name"`
	// Label is how people call the secret ("Demo API key").
	Label string `yaml:"label"`
	// Description tells the user where to find the secret or what it unlocks.
	Description string `yaml:"description"`
	// Validation holds the rules a value must meet.
	Validation Validation `yaml:"validation"`
	// API is where and how tools use the secret (call_api); a slot without it only stores.
	API *upstream.API `yaml:"api"`
	// Verify is the check a new secret must pass before it is stored.
	Verify *upstream.Verify `yaml:"verify"`
}

// Validation is what a value must look like. A value that breaks a rule is refused with a
// message naming the rule, never the value.
type Validation struct {
	// MinLength and MaxLength bound the length in characters; MaxLength defaults to
	// DefaultMaxLength. A slot with an api needs at least APIMinLength, and a smaller
	// MinLength is raised to it.
	MinLength int `yaml:"min_length"`
	MaxLength int `yaml:"max_length"`
	// MinEntropyBits is the least estimated randomness of a value (EntropyBits). A slot with
	// an api needs at least APIMinEntropyBits, its default there; elsewhere it defaults to 0.
	MinEntropyBits int `yaml:"min_entropy_bits"`
	// Pattern is a regular expression (Go syntax, RE2) the whole value must match.
	Pattern string `yaml:"pattern"`
	// PatternHint describes the pattern in words for the form ("starts with demo_").
	PatternHint string `yaml:"pattern_hint"`

	pattern *regexp.Regexp
}

// prepare checks the slot's definition, compiles its pattern and resolves its API against
// urlflow's public URL. It returns every problem.
func (s *Slot) prepare(publicURL string) []error {
	var errs []error
	name := s.Name
	if name == "" {
		name = "(no name)"
	}
	problem := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("secret slot %s: "+format, append([]any{name}, args...)...))
	}
	if !namePattern.MatchString(s.Name) {
		problem("name must match [a-z0-9_]+")
	}
	if s.Label == "" {
		problem("label is required")
	}
	v := &s.Validation
	if v.MaxLength == 0 {
		v.MaxLength = DefaultMaxLength
	}
	if v.MinLength < 0 || v.MaxLength < 0 || v.MinEntropyBits < 0 {
		problem("min_length, max_length and min_entropy_bits cannot be negative")
	}
	if s.API != nil {
		v.MinLength = max(v.MinLength, APIMinLength)
		if v.MaxLength < APIMinLength {
			problem("max_length %d is below %d, the least length of a secret used with an api", v.MaxLength, APIMinLength)
		}
		switch {
		case v.MinEntropyBits == 0:
			v.MinEntropyBits = APIMinEntropyBits
		case v.MinEntropyBits < APIMinEntropyBits:
			problem("min_entropy_bits %d is below %d, the least for a secret used with an api", v.MinEntropyBits, APIMinEntropyBits)
		}
	}
	if v.MaxLength > DefaultMaxLength {
		problem("max_length cannot exceed %d", DefaultMaxLength)
	}
	if v.MinLength > v.MaxLength {
		problem("min_length %d exceeds max_length %d", v.MinLength, v.MaxLength)
	}
	if v.Pattern != "" {
		re, err := regexp.Compile(`^(?:` + v.Pattern + `)$`)
		if err != nil {
			problem("pattern does not compile: %v", err)
		}
		v.pattern = re
	}
	for _, p := range s.prepareAPI(publicURL) {
		problem("%s", p)
	}
	return errs
}

// InvalidValueError is the error of Slot.Validate. Rule says, in an English sentence for
// the user (and the flow's history), which rule the value broke; it never contains the
// value. Kind and Limit say the same for a page that speaks the user's language.
type InvalidValueError struct {
	Rule string
	Kind Broken
	// Limit is the number the rule sets: the length for TooShort and TooLong, the bits of
	// randomness for TooWeak.
	Limit int
}

// Broken names the rule a value broke.
type Broken string

// The rules of Validate.
const (
	Empty    Broken = "empty"
	NotText  Broken = "not_text"
	TooShort Broken = "too_short"
	TooLong  Broken = "too_long"
	NoMatch  Broken = "no_match" // the pattern; the slot's PatternHint says what it wants
	TooWeak  Broken = "too_weak"
)

func (e *InvalidValueError) Error() string { return "invalid value: " + e.Rule }

// Validate checks value against the slot's rules and returns an *InvalidValueError if it
// breaks one.
func (s *Slot) Validate(value state.Secret) error {
	v := value.Reveal()
	n := utf8.RuneCountInString(v)
	invalid := func(kind Broken, limit int, format string, args ...any) error {
		return &InvalidValueError{Rule: fmt.Sprintf(format, args...), Kind: kind, Limit: limit}
	}
	switch {
	case n == 0:
		return invalid(Empty, 0, "Enter your %s.", s.Label)
	case !utf8.ValidString(v):
		return invalid(NotText, 0, "The value is not valid text.")
	case n < s.Validation.MinLength:
		return invalid(TooShort, s.Validation.MinLength, "That is too short: it needs at least %d characters.", s.Validation.MinLength)
	case n > s.Validation.MaxLength:
		return invalid(TooLong, s.Validation.MaxLength, "That is too long: it can have at most %d characters.", s.Validation.MaxLength)
	case s.Validation.pattern != nil && !s.Validation.pattern.MatchString(v):
		if s.Validation.PatternHint != "" {
			return invalid(NoMatch, 0, "That does not look like a %s. %s", s.Label, s.Validation.PatternHint)
		}
		return invalid(NoMatch, 0, "That does not look like a %s.", s.Label)
	case EntropyBits(v) < float64(s.Validation.MinEntropyBits):
		return invalid(TooWeak, s.Validation.MinEntropyBits, "That is too easy to guess: it needs an estimated %d bits of randomness, "+
			"which a short, repetitive or single-kind value (only digits, say) does not have.", s.Validation.MinEntropyBits)
	}
	return nil
}

// Rules describes the slot's rules for people, one sentence each.
func (s *Slot) Rules() []string {
	var rules []string
	v := s.Validation
	switch {
	case v.MinLength > 0 && v.MaxLength > 0:
		rules = append(rules, fmt.Sprintf("Between %d and %d characters.", v.MinLength, v.MaxLength))
	case v.MaxLength > 0:
		rules = append(rules, fmt.Sprintf("At most %d characters.", v.MaxLength))
	}
	if v.PatternHint != "" {
		rules = append(rules, v.PatternHint)
	}
	if v.MinEntropyBits > 0 {
		rules = append(rules, fmt.Sprintf("Hard to guess: at least an estimated %d bits of randomness, "+
			"as in 20 random letters and digits.", v.MinEntropyBits))
	}
	return rules
}

// Catalog is the set of configured slots.
type Catalog struct {
	slots []*Slot
}

// NewCatalog checks every slot and returns the catalog, or an error naming every problem.
// publicURL replaces {public_url} in API base URLs.
func NewCatalog(list []Slot, publicURL string) (*Catalog, error) {
	c := &Catalog{}
	var errs []error
	seen := map[string]bool{}
	for i := range list {
		s := list[i].clone()
		errs = append(errs, s.prepare(publicURL)...)
		if seen[s.Name] {
			errs = append(errs, fmt.Errorf("secret slot %s: defined twice", s.Name))
		}
		seen[s.Name] = true
		c.slots = append(c.slots, s)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return c, nil
}

// clone returns a copy of s that shares nothing with it, so that preparing it leaves the
// configuration as it was read.
func (s Slot) clone() *Slot {
	if s.API != nil {
		s.API = s.API.Clone()
	}
	if s.Verify != nil {
		v := *s.Verify
		v.Status = slices.Clone(v.Status)
		s.Verify = &v
	}
	return &s
}

// Lookup returns the slot named name.
func (c *Catalog) Lookup(name string) (*Slot, bool) {
	i := slices.IndexFunc(c.slots, func(s *Slot) bool { return s.Name == name })
	if i < 0 {
		return nil, false
	}
	return c.slots[i], true
}

// Names returns the slot names in configuration order.
func (c *Catalog) Names() []string {
	names := make([]string, len(c.slots))
	for i, s := range c.slots {
		names[i] = s.Name
	}
	return names
}

// prepareAPI checks a slot's API and verification, fills in defaults, and returns every
// problem.
func (s *Slot) prepareAPI(publicURL string) []string {
	var problems []string
	if s.Verify != nil && s.API == nil {
		problems = append(problems, "verify needs an api section (the check is a call to the API)")
	}
	if s.API != nil {
		problems = append(problems, s.API.Prepare(publicURL)...)
	}
	if s.Verify != nil {
		problems = append(problems, s.Verify.Prepare()...)
	}
	return problems
}

// Lacks returns why values, stored with a secret of the slot named target, are not what
// its API's base URL takes now (wrapping upstream.ErrParameters), or nil: nil too for a
// slot whose base URL takes none, or that is not configured.
func (c *Catalog) Lacks(target string, values map[string]string) error {
	slot, ok := c.Lookup(target)
	if !ok || slot.API == nil {
		return nil
	}
	_, err := slot.API.Bind(values)
	return err
}

// BindEntered returns the slot's API made of values, the parts of its address the user
// entered with secret (upstream.API.Bind), and values as they may be shown again. A value
// that is, or could be, the secret (8 or more characters of it, or one the secret's own
// rules accept) is refused and blanked: a value is no secret, and services see it. A
// refusal is an *upstream.InvalidParameterError naming the first parameter at fault.
func (s *Slot) BindEntered(values map[string]string, secret state.Secret) (map[string]string, *upstream.API, error) {
	if s.API == nil || !s.API.Templated() {
		return nil, s.API, nil
	}
	var lookalike error
	for _, param := range s.API.Parameters {
		v := values[param.Name]
		if v == "" || !(len(v) >= 8 && strings.Contains(secret.Reveal(), v) || s.Validate(state.NewSecret(v)) == nil) {
			continue
		}
		values[param.Name] = "" // never shown again
		if lookalike == nil {
			lookalike = &upstream.InvalidParameterError{Name: param.Name,
				Rule: "That looks like your " + s.Label + ", which goes in its own field below, not your " + param.Label + "."}
		}
	}
	if lookalike != nil {
		return values, nil, lookalike
	}
	api, err := s.API.Bind(values)
	return values, api, err
}
