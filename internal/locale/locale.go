// Package locale gives urlflow's pages the language of their reader: the message catalogs
// (messages/*.yaml, embedded: one file a language, every message of English in each), the
// language a request negotiates from the reader's own choice or Accept-Language, and the
// localizer through which the templates read their messages.
package locale

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/go-playground/locales"
	"github.com/nicksnyder/go-i18n/v2/i18n"
	"go.yaml.in/yaml/v3"
	"golang.org/x/text/language"
	"golang.org/x/text/language/display"
)

//go:embed messages/*.yaml
var embedded embed.FS

// Catalog is every language's messages.
type Catalog struct {
	tags       []language.Tag // English first
	localizers []*Localizer   // one for each of tags, made once
	matcher    language.Matcher
	fallback   int // the index in localizers of the language of readers no other fits
}

// Load reads the embedded catalogs, with an operator's own wording over them (nil: none).
// An override that does not fit (a language or message the catalogs lack, a placeholder
// the message does not have) is refused: the error lists every such problem
// (OverrideProblems).
func Load(overrides Overrides) (*Catalog, error) { return load(embedded, overrides) }

// load reads the catalogs messages/*.yaml of fsys, then overrides.
func load(fsys fs.FS, overrides Overrides) (*Catalog, error) {
	bundle := i18n.NewBundle(language.English)
	bundle.RegisterUnmarshalFunc("yaml", yaml.Unmarshal)
	files, err := fs.Glob(fsys, "messages/*.yaml")
	if err != nil {
		return nil, err
	}
	c := &Catalog{}
	for _, name := range files {
		if _, err := bundle.LoadMessageFileFS(fsys, name); err != nil {
			return nil, fmt.Errorf("message catalog %s: %w", name, err)
		}
		tag := language.Make(strings.TrimSuffix(path.Base(name), ".yaml"))
		c.tags = append(c.tags, tag)
	}
	slices.SortFunc(c.tags, func(a, b language.Tag) int {
		switch {
		case a == language.English:
			return -1
		case b == language.English:
			return 1
		}
		return strings.Compare(a.String(), b.String())
	})
	if err := overrides.apply(bundle, fsys, c.tags); err != nil {
		return nil, err
	}
	c.matcher = language.NewMatcher(c.tags)
	for _, tag := range c.tags {
		base, _ := tag.Base()
		c.localizers = append(c.localizers, &Localizer{catalog: c, tag: tag, localizer: i18n.NewLocalizer(bundle, tag.String()),
			calendar: calendarOf(base.String()), name: display.Self.Name(tag)})
	}
	return c, nil
}

// Localizers are the localizers of the catalog's languages, English first.
func (c *Catalog) Localizers() []*Localizer { return slices.Clone(c.localizers) }

// WithDefault returns the catalog with tag (as Localizer.Lang writes it) as the language
// of readers who ask for none the catalog has: the deployment's default. English is the
// default of Load's catalog.
func (c *Catalog) WithDefault(tag string) (*Catalog, error) {
	i := slices.IndexFunc(c.localizers, func(l *Localizer) bool { return l.Lang() == tag })
	if i < 0 {
		names := make([]string, len(c.localizers))
		for j, l := range c.localizers {
			names[j] = l.Lang()
		}
		return nil, fmt.Errorf("urlflow has no language %q; it has %s", tag, strings.Join(names, ", "))
	}
	d := *c
	d.fallback = i
	return &d, nil
}

// Has reports whether the catalog holds language tag exactly, as Localizer.Lang writes it.
func (c *Catalog) Has(tag string) bool {
	return slices.ContainsFunc(c.localizers, func(l *Localizer) bool { return l.Lang() == tag })
}

// Negotiate returns the localizer of the language that chosen names (the reader's own
// choice, kept by the browser), else the best of acceptLanguage (the header), else the
// catalog's default (WithDefault).
func (c *Catalog) Negotiate(chosen, acceptLanguage string) *Localizer {
	var wanted []language.Tag
	if t, err := language.Parse(chosen); err == nil && chosen != "" {
		wanted = append(wanted, t)
	}
	if tags, _, err := language.ParseAcceptLanguage(acceptLanguage); err == nil {
		wanted = append(wanted, tags...)
	}
	if _, i, confidence := c.matcher.Match(wanted...); confidence > language.No {
		return c.localizers[i]
	}
	return c.localizers[c.fallback]
}

// Localizer reads messages in one language.
type Localizer struct {
	catalog   *Catalog // the localizer's, for the reader's choice of another language
	tag       language.Tag
	localizer *i18n.Localizer
	calendar  locales.Translator // how the language writes dates and times (Clock)
	name      string             // the language's name in itself (Name), looked up once
	// plain and plainHTML keep each message without placeholders as T and HTML made it
	// the first time (message ID → string): a page reads dozens, and go-i18n executes a
	// template for each every time.
	plain, plainHTML sync.Map
}

// Lang is the language's BCP 47 tag, for lang and Content-Language.
func (l *Localizer) Lang() string { return l.tag.String() }

// Dir is the language's direction: "rtl" or "ltr".
func (l *Localizer) Dir() string {
	base, _ := l.tag.Base()
	switch base.String() {
	case "ar", "fa", "he", "ur":
		return "rtl"
	}
	return "ltr"
}

// Reviewed reports whether a native speaker has reviewed the language's catalog
// (meta.reviewed); the pages say when not.
func (l *Localizer) Reviewed() bool { return l.T("meta.reviewed", nil) == "true" }

// Choices are the localizers of every language of the catalog, this one's included, in
// the catalog's order: what a reader can choose from.
func (l *Localizer) Choices() []*Localizer { return l.catalog.Localizers() }

// Name is the language's name in itself ("Deutsch"), for the language switcher.
func (l *Localizer) Name() string { return l.name }

// T returns message id with data in the localizer's language, in English where that
// language lacks it. A message missing from every catalog is returned as its ID, which
// the tests do not let happen.
func (l *Localizer) T(id string, data map[string]any) string {
	if len(data) == 0 {
		return cached(&l.plain, id, func() string { return l.localize(id, nil) })
	}
	return l.localize(id, data)
}

func (l *Localizer) localize(id string, data map[string]any) string {
	return orID(id)(l.localizer.Localize(&i18n.LocalizeConfig{MessageID: id, TemplateData: data}))
}

// cached returns the string of id in m, made by build and kept there the first time.
func cached(m *sync.Map, id string, build func() string) string {
	if s, ok := m.Load(id); ok {
		return s.(string)
	}
	s := build()
	m.Store(id, s)
	return s
}

// N returns message id for count (its plural form in the language) with data, which
// also holds Count.
func (l *Localizer) N(id string, count int, data map[string]any) string {
	all := map[string]any{"Count": count}
	for k, v := range data {
		all[k] = v
	}
	return orID(id)(l.localizer.Localize(&i18n.LocalizeConfig{MessageID: id, PluralCount: count, TemplateData: all}))
}

// orID returns the message go-i18n localized, also when it says the message came from
// English for want of a translation (an error beside the English text), or id when there
// is none.
func orID(id string) func(string, error) string {
	return func(s string, _ error) string {
		if s == "" {
			return id
		}
		return s
	}
}

type localizerKey struct{}

// With returns ctx rendering pages with l.
func With(ctx context.Context, l *Localizer) context.Context {
	return context.WithValue(ctx, localizerKey{}, l)
}

// Default is the embedded catalogs, read once.
var Default = sync.OnceValue(func() *Catalog {
	c, err := Load(nil)
	if err != nil {
		panic(err) // the embedded catalogs are tested (TestEveryCatalogHasEveryMessageOfEnglishAndNoOther)
	}
	return c
})

// T returns message id in the language of ctx (From), with the placeholders of pairs
// (name, value, name, value…).
func T(ctx context.Context, id string, pairs ...any) string {
	return From(ctx).T(id, Placeholders(pairs...))
}

// N returns message id in the language of ctx for count (its plural form), with the
// placeholders of pairs.
func N(ctx context.Context, id string, count int, pairs ...any) string {
	return From(ctx).N(id, count, Placeholders(pairs...))
}

// Placeholders makes the data of a message from pairs (name, value, name, value…).
func Placeholders(pairs ...any) map[string]any {
	if len(pairs) == 0 {
		return nil
	}
	data := make(map[string]any, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		data[pairs[i].(string)] = pairs[i+1]
	}
	return data
}

// From returns the localizer of ctx, English when it carries none.
func From(ctx context.Context) *Localizer {
	if l, ok := ctx.Value(localizerKey{}).(*Localizer); ok {
		return l
	}
	return Default().localizers[0]
}
