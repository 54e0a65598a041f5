package upstream

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// Parameters of a base URL: an API whose base_url holds {name} in its host or its path
// (https://{subdomain}.zendesk.com/api/v2) is a template, which the values a user enters
// when they store the secret make into the base URL of their calls (Bind). Confinement is
// then to that URL. A value is one DNS label in the host, one path segment in the path,
// and must match its parameter's pattern as well; in the host, a parameter can never be
// one of the last two labels, so that a value cannot name a host outside the domain the
// configuration names.

// ErrParameters: the values of an API's parameters are missing or do not match.
var ErrParameters = errors.New("the API's parameters are not all given, or do not match")

// errUnbound: a call was about to be made to a template, before Bind.
var errUnbound = errors.New("the API's base URL is a template whose parameters were not given")

// Parameter is one part of a base URL that the user enters with the secret.
type Parameter struct {
	// Name is the parameter's name in the base URL ({name}): [a-z][a-z0-9_]*.
	Name string `yaml:"name"`
	// Label is how people call it ("Zendesk subdomain").
	Label string `yaml:"label"`
	// Description tells the user where to find it.
	Description string `yaml:"description"`
	// Pattern is a regular expression (Go syntax, RE2) the whole value must match: required.
	Pattern string `yaml:"pattern"`
	// PatternHint describes the pattern in words for the form.
	PatternHint string `yaml:"pattern_hint"`

	pattern *regexp.Regexp
	inHost  bool
}

var (
	parameterName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	placeholder   = regexp.MustCompile(`\{([^{}]*)\}`)
	// hostValue is one DNS label; pathValue one path segment of unreserved characters.
	hostValue = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$`)
	pathValue = regexp.MustCompile(`^[A-Za-z0-9._~-]{1,128}$`)
)

// marker stands for parameter i in the URL Prepare parses to check a template.
func marker(i int) string { return fmt.Sprintf("urlflowparam%dx", i) }

// Templated reports whether a's base URL holds parameters.
func (a *API) Templated() bool { return len(a.Parameters) > 0 }

// Template returns the base URL as configured, {public_url} resolved: what the pages show
// the user next to the parameters' fields.
func (a *API) Template() string { return a.template }

// prepareTemplate checks the parameters of raw, the base URL with {public_url} resolved,
// and returns raw with each one replaced by its marker, to be parsed as the base URL.
func (a *API) prepareTemplate(raw string) (string, []string) {
	var problems []string
	a.template = raw
	used := map[string]bool{}
	sample := placeholder.ReplaceAllStringFunc(raw, func(m string) string {
		name := m[1 : len(m)-1]
		i := slices.IndexFunc(a.Parameters, func(p Parameter) bool { return p.Name == name })
		if i < 0 {
			problems = append(problems, fmt.Sprintf("api.base_url: {%s} is not one of api.parameters", name))
			return m
		}
		used[name] = true
		return marker(i)
	})
	if strings.ContainsAny(sample, "{}") {
		problems = append(problems, "api.base_url: a { or } that is not a parameter's")
	}
	for i := range a.Parameters {
		p := &a.Parameters[i]
		at := fmt.Sprintf("api.parameters[%d]", i)
		if !parameterName.MatchString(p.Name) {
			problems = append(problems, fmt.Sprintf("%s.name must match [a-z][a-z0-9_]*", at))
		}
		if slices.IndexFunc(a.Parameters[:i], func(q Parameter) bool { return q.Name == p.Name }) >= 0 {
			problems = append(problems, fmt.Sprintf("%s: %s is defined twice", at, p.Name))
		}
		if !used[p.Name] {
			problems = append(problems, fmt.Sprintf("%s: {%s} is not in api.base_url", at, p.Name))
		}
		if p.Label == "" {
			problems = append(problems, fmt.Sprintf("%s.label is required", at))
		}
		re, err := regexp.Compile(`^(?:` + p.Pattern + `)$`)
		switch {
		case p.Pattern == "":
			problems = append(problems, fmt.Sprintf("%s.pattern is required: the values a user may enter", at))
		case err != nil:
			problems = append(problems, fmt.Sprintf("%s.pattern does not compile: %v", at, err))
		default:
			p.pattern = re
		}
	}
	return sample, problems
}

// checkTemplate checks where the parameters are in u, the base URL parsed with markers.
func (a *API) checkTemplate(u *url.URL) []string {
	var problems []string
	host := u.Hostname()
	labels := strings.Split(host, ".")
	for i := range a.Parameters {
		p := &a.Parameters[i]
		m := marker(i)
		p.inHost = strings.Contains(host, m)
		// Elsewhere (the scheme, the port, user info, a query) the URL is refused as such.
		switch {
		case p.inHost && strings.Contains(u.EscapedPath(), m):
			problems = append(problems, fmt.Sprintf("api.base_url: {%s} is in the host and the path; use two parameters", p.Name))
		case p.inHost && (len(labels) < 3 || strings.Contains(strings.Join(labels[len(labels)-2:], "."), m)):
			problems = append(problems, fmt.Sprintf("api.base_url: {%s} cannot be in the last two labels of the host, which name the domain its values stay in", p.Name))
		}
	}
	return problems
}

// InvalidParameterError is the error of Parameter.Check: Rule says, in an English
// sentence for the user (and the flow's history), which rule the value of the parameter
// Name broke, never quoting it; Kind says which for a page that speaks the user's
// language. It is ErrParameters.
type InvalidParameterError struct {
	Name, Rule string
	Kind       BrokenParameter
}

// BrokenParameter names the rule a parameter's value broke.
type BrokenParameter string

// The rules of Parameter.Check.
const (
	ParameterEmpty   BrokenParameter = "empty"
	NotPathSegment   BrokenParameter = "not_path_segment" // one part of a path
	NotHostLabel     BrokenParameter = "not_host_label"   // one part of a host name
	ParameterNoMatch BrokenParameter = "no_match"         // the parameter's PatternHint says what it wants
)

func (e *InvalidParameterError) Error() string { return e.Rule }

// Is makes the error ErrParameters.
func (e *InvalidParameterError) Is(target error) bool { return target == ErrParameters }

// Check reports whether value is one p accepts, or returns an *InvalidParameterError.
func (p *Parameter) Check(value string) error {
	shape, kind := pathValue, NotPathSegment
	what := "one part of a path: letters, digits, and . _ ~ -, at most 128"
	if p.inHost {
		shape, kind, what = hostValue, NotHostLabel, "one part of a host name: letters, digits and inner hyphens, at most 63"
	}
	invalid := func(kind BrokenParameter, format string, args ...any) error {
		return &InvalidParameterError{Name: p.Name, Rule: fmt.Sprintf(format, args...), Kind: kind}
	}
	switch {
	case value == "":
		return invalid(ParameterEmpty, "Enter your %s.", p.Label)
	case !shape.MatchString(value) || value == "." || value == "..":
		return invalid(kind, "Your %s must be %s.", p.Label, what)
	case !p.pattern.MatchString(value):
		if p.PatternHint != "" {
			return invalid(ParameterNoMatch, "That is not a valid %s. %s", p.Label, p.PatternHint)
		}
		return invalid(ParameterNoMatch, "That is not a valid %s.", p.Label)
	}
	return nil
}

// Bind returns a with its base URL made from values, one per parameter, each checked
// (Parameter.Check); an API without parameters is returned as it is, whatever values
// holds. Values of no parameter are ErrParameters too.
func (a *API) Bind(values map[string]string) (*API, error) {
	if !a.Templated() {
		return a, nil
	}
	for name := range values {
		if !slices.ContainsFunc(a.Parameters, func(p Parameter) bool { return p.Name == name }) {
			return nil, fmt.Errorf("%w: a value of no parameter of the API's", ErrParameters)
		}
	}
	for i := range a.Parameters {
		p := &a.Parameters[i]
		v, ok := values[p.Name]
		if !ok {
			return nil, &InvalidParameterError{Name: p.Name, Rule: fmt.Sprintf("no %s was entered with the secret (the API's configuration now asks for one)", p.Label)}
		}
		if err := p.Check(v); err != nil {
			return nil, err
		}
	}
	raw := placeholder.ReplaceAllStringFunc(a.template, func(m string) string { return values[m[1:len(m)-1]] })
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("%w: the base URL does not parse with them", ErrParameters)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	bound := *a
	bound.base, bound.bound = u, true
	return &bound, nil
}

// unbound reports whether a is a template that Bind has not made into a base URL.
func (a *API) unbound() bool { return a.Templated() && !a.bound }
