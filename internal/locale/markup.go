package locale

import (
	"fmt"
	"html"
	"slices"
	"strings"
)

// inlineTags are the only markup a message may hold: emphasis, code, and isolation of
// text whose direction is its own (a name in a right-to-left script inside a left-to-right
// sentence, or the other way round). Any other markup in a message is shown as text.
var inlineTags = []string{"strong", "em", "code", "bdi", "q"}

// markupTags are inlineTags as they appear in a message, after escaping, and as they are
// written to the page.
var markupTags = func() *strings.Replacer {
	var pairs []string
	for _, tag := range inlineTags {
		for _, t := range []string{"<" + tag + ">", "</" + tag + ">"} {
			pairs = append(pairs, html.EscapeString(t), t)
		}
	}
	return strings.NewReplacer(pairs...)
}()

// Markup is a placeholder's value that is HTML already, made by urlflow's own code (a
// <time> element), which HTML puts in as it is.
type Markup string

// HTML returns message id with data as HTML: the message's own text escaped but for its
// inline tags (inlineTags), every placeholder's value escaped whole unless it is Markup,
// so that neither a catalog nor a value (a client's name, a reason) can add markup of its
// own.
func (l *Localizer) HTML(id string, data map[string]any) string {
	localize := func(marked map[string]any) string { return l.T(id, marked) }
	if len(data) == 0 {
		return cached(&l.plainHTML, id, func() string { return l.html(id, nil, localize) })
	}
	return l.html(id, data, localize)
}

// NHTML is HTML for the plural form of count (N).
func (l *Localizer) NHTML(id string, count int, data map[string]any) string {
	return l.html(id, data, func(marked map[string]any) string { return l.N(id, count, marked) })
}

// html localizes a message with each value of data replaced by a marker no message holds,
// escapes the result, lets its inline tags through, and puts the escaped values in place
// of the markers.
func (l *Localizer) html(id string, data map[string]any, localize func(map[string]any) string) string {
	marked := make(map[string]any, len(data))
	var values []string
	for name, v := range data {
		marker := fmt.Sprintf("\x00%d\x00", len(values)/2)
		marked[name] = marker
		safe, ok := v.(Markup)
		if !ok {
			safe = Markup(html.EscapeString(fmt.Sprint(v)))
		}
		values = append(values, marker, string(safe))
	}
	out := markupTags.Replace(html.EscapeString(localize(marked)))
	if len(values) == 0 {
		return out
	}
	return putValues(out, values)
}

// putValues replaces each marker of values (marker, value, marker, value…) in out with its
// value, in one pass: a value is never read again, so one cannot stand for another. (A
// strings.Replacer did the same, but building one for each message took a sixth of a
// page's rendering.)
func putValues(out string, values []string) string {
	var b strings.Builder
	b.Grow(len(out))
	for {
		start := strings.IndexByte(out, 0)
		if start < 0 {
			b.WriteString(out)
			return b.String()
		}
		end := strings.IndexByte(out[start+1:], 0)
		if end < 0 {
			b.WriteString(out)
			return b.String()
		}
		marker := out[start : start+end+2]
		b.WriteString(out[:start])
		if i := slices.Index(values, marker); i >= 0 && i%2 == 0 {
			b.WriteString(values[i+1])
		} else {
			b.WriteString(marker)
		}
		out = out[start+end+2:]
	}
}
