package locale

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/nicksnyder/go-i18n/v2/i18n"
	"golang.org/x/text/language"
	"golang.org/x/text/language/display"
)

// PseudoTag is the language of the pseudo-locale (Pseudo): English, accented (BCP 47's
// private-use region XA, as Android and Windows name theirs).
var PseudoTag = language.MustParse("en-XA")

// Pseudo returns the localizer of the pseudo-locale: every English message with each
// letter accented and the whole between ⟦ and ⟧, its placeholders and tags kept. A page
// rendered with it shows at a glance, and to a test, any text that does not come from the
// catalog: text written into a template, or assembled from fragments.
func Pseudo() (*Localizer, error) {
	english, err := englishMessages(embedded)
	if err != nil {
		return nil, err
	}
	bundle := i18n.NewBundle(PseudoTag)
	var messages []*i18n.Message
	for id, v := range english {
		m := &i18n.Message{ID: id}
		switch v := v.(type) {
		case string:
			m.Other = pseudo(v)
		case map[string]any:
			m.One, m.Other = pseudo(fmt.Sprint(v["one"])), pseudo(fmt.Sprint(v["other"]))
		}
		if id == "meta.reviewed" {
			m.Other = "true" // read, never shown
		}
		messages = append(messages, m)
	}
	if err := bundle.AddMessages(PseudoTag, messages...); err != nil {
		return nil, err
	}
	c := &Catalog{tags: []language.Tag{PseudoTag}, matcher: language.NewMatcher([]language.Tag{PseudoTag})}
	c.localizers = []*Localizer{{catalog: c, tag: PseudoTag, localizer: i18n.NewLocalizer(bundle, PseudoTag.String()), calendar: calendarOf("en"),
		name: display.Self.Name(PseudoTag)}}
	return c.localizers[0], nil
}

// kept are the parts of a message that the pseudo-locale leaves as they are: placeholders
// and tags.
var kept = regexp.MustCompile(`\{\{[^}]*\}\}|<[^>]*>`)

// accented maps each ASCII letter to an accented one.
var accented = strings.NewReplacer(
	"a", "á", "e", "é", "i", "í", "o", "ó", "u", "ú", "y", "ý", "c", "ç", "n", "ñ", "s", "š", "z", "ž",
	"A", "Á", "E", "É", "I", "Í", "O", "Ó", "U", "Ú", "Y", "Ý", "C", "Ç", "N", "Ñ", "S", "Š", "Z", "Ž")

// pseudo accents the letters of message s outside its placeholders and tags, and puts it
// between ⟦ and ⟧.
func pseudo(s string) string {
	var b strings.Builder
	b.WriteString("⟦")
	last := 0
	for _, span := range kept.FindAllStringIndex(s, -1) {
		b.WriteString(accented.Replace(s[last:span[0]]))
		b.WriteString(s[span[0]:span[1]])
		last = span[1]
	}
	b.WriteString(accented.Replace(s[last:]))
	b.WriteString("⟧")
	return b.String()
}
