package locale

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/nicksnyder/go-i18n/v2/i18n"
	"go.yaml.in/yaml/v3"
	"golang.org/x/text/language"
)

// Overrides are an operator's own wording (the configuration file's branding.messages):
// by language ("en", "de"), by message ID, the text that replaces the catalog's. A message
// with plural forms takes its forms (one:, other:, …) or one text for every count.
type Overrides map[string]map[string]any

// OverrideProblem is what is wrong with the overrides of one language.
type OverrideProblem struct {
	Language, Message string
}

func (p OverrideProblem) Error() string { return p.Language + ": " + p.Message }

// OverrideProblems is every problem of the overrides, as Load's error.
type OverrideProblems []OverrideProblem

func (ps OverrideProblems) Error() string {
	var b strings.Builder
	for i, p := range ps {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(p.Error())
	}
	return b.String()
}

// pluralForms are the forms a message with plurals may have (CLDR's categories).
var pluralForms = []string{"zero", "one", "two", "few", "many", "other"}

// placeholder matches a placeholder of a message: {{.Name}}.
var placeholder = regexp.MustCompile(`\{\{\s*\.(\w+)\s*\}\}`)

// apply adds the overrides to bundle, over the catalogs of fsys, or returns every problem
// of them: a language not among tags, a message English lacks, a text that is no
// template or names a placeholder the English message does not have.
func (o Overrides) apply(bundle *i18n.Bundle, fsys fs.FS, tags []language.Tag) error {
	if len(o) == 0 {
		return nil
	}
	english, err := englishMessages(fsys)
	if err != nil {
		return err
	}
	var problems OverrideProblems
	var names []string
	for _, t := range tags {
		names = append(names, t.String())
	}
	for _, lang := range slices.Sorted(maps.Keys(o)) {
		problem := func(format string, a ...any) {
			problems = append(problems, OverrideProblem{lang, fmt.Sprintf(format, a...)})
		}
		if !slices.Contains(names, lang) {
			problem("no catalog of this language; the languages are %s", strings.Join(names, ", "))
			continue
		}
		var messages []*i18n.Message
		for _, id := range slices.Sorted(maps.Keys(o[lang])) {
			orig, ok := english[id]
			if !ok {
				problem("%s: no such message (internal/locale/messages/en.yaml has every ID, with its English text)", id)
				continue
			}
			m, why := overrideMessage(id, o[lang][id], placeholdersOf(orig))
			if why != "" {
				problem("%s: %s", id, why)
				continue
			}
			messages = append(messages, m)
		}
		if err := bundle.AddMessages(language.Make(lang), messages...); err != nil {
			problem("%v", err)
		}
	}
	if problems != nil {
		return problems
	}
	return nil
}

// overrideMessage makes message id of an override's value v, whose placeholders must be
// among allowed, or says why it cannot.
func overrideMessage(id string, v any, allowed []string) (*i18n.Message, string) {
	forms := map[string]string{}
	switch v := v.(type) {
	case string:
		forms["other"], forms["one"] = v, v
	case map[string]any:
		for form, text := range v {
			s, ok := text.(string)
			if !slices.Contains(pluralForms, form) || !ok {
				return nil, fmt.Sprintf("%s: want a plural form (%s) with a text", form, strings.Join(pluralForms, ", "))
			}
			forms[form] = s
		}
		if forms["other"] == "" {
			return nil, "want the form other: at least"
		}
	default:
		return nil, "want a text, or plural forms (one:, other:, …)"
	}
	for _, text := range forms {
		for _, m := range placeholder.FindAllStringSubmatch(text, -1) {
			if !slices.Contains(allowed, m[1]) {
				return nil, fmt.Sprintf("{{.%s}}: the message has no such placeholder; it has %s", m[1], describe(allowed))
			}
		}
		if strings.Count(text, "{{") != len(placeholder.FindAllString(text, -1)) {
			return nil, "want placeholders written as {{.Name}} and nothing else between {{ and }}"
		}
	}
	return &i18n.Message{ID: id, Zero: forms["zero"], One: forms["one"], Two: forms["two"], Few: forms["few"],
		Many: forms["many"], Other: forms["other"]}, ""
}

// describe lists placeholders as a message writes them.
func describe(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	var out []string
	for _, n := range names {
		out = append(out, "{{."+n+"}}")
	}
	return strings.Join(out, ", ")
}

// placeholdersOf returns the placeholders of an English message (a text, or its plural
// forms).
func placeholdersOf(v any) []string {
	var texts []string
	switch v := v.(type) {
	case string:
		texts = []string{v}
	case map[string]any:
		for _, t := range v {
			texts = append(texts, fmt.Sprint(t))
		}
	}
	var names []string
	for _, t := range texts {
		for _, m := range placeholder.FindAllStringSubmatch(t, -1) {
			if !slices.Contains(names, m[1]) {
				names = append(names, m[1])
			}
		}
	}
	slices.Sort(names)
	return names
}

// englishMessages returns the English catalog of fsys: by ID, a text or plural forms.
func englishMessages(fsys fs.FS) (map[string]any, error) {
	src, err := fs.ReadFile(fsys, "messages/en.yaml")
	if err != nil {
		return nil, err
	}
	var english map[string]any
	if err := yaml.Unmarshal(src, &english); err != nil {
		return nil, fmt.Errorf("message catalog en.yaml: %w", err)
	}
	if len(english) == 0 {
		return nil, errors.New("message catalog en.yaml: no messages")
	}
	return english, nil
}
