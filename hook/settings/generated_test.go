package settings

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestInstallUninstallOnGeneratedFiles checks FuzzInstallUninstall's promises on valid
// settings files of every layout, which random bytes seldom are: settings in any order,
// other hooks, empty objects and lists with blanks inside, one line or many, any
// indentation, LF or CRLF, a final newline or none, and now and then an older
// urlflow's entry.
func TestInstallUninstallOnGeneratedFiles(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 6))
	for range 500 {
		content := generate(r)
		t.Run("", func(t *testing.T) { checkInstallUninstall(t, content) })
		if t.Failed() {
			t.Fatalf("on\n%q", content)
		}
	}
}

// A value is a JSON value to write: an object or list with its items, or a literal.
type value struct {
	object  bool
	names   []string
	items   []value
	literal string
}

func obj(pairs ...any) value {
	v := value{object: true}
	for i := 0; i < len(pairs); i += 2 {
		v.names = append(v.names, pairs[i].(string))
		v.items = append(v.items, pairs[i+1].(value))
	}
	return v
}

func list(items ...value) value { return value{items: items} }

func lit(s string) value { return value{literal: s} }

// generate returns a random settings file.
func generate(r *rand.Rand) string {
	group := func() value {
		command := []string{`"jq . >> log && exit 0"`, `"echo \u00e9 <b>"`, `"notify ✓"`, `"urlflow hook elicitation"`}[r.IntN(4)]
		g := obj("hooks", list(obj("type", lit(`"command"`), "command", lit(command))))
		if r.IntN(2) == 0 {
			g = obj("matcher", lit(`"github"`), "hooks", g.items[0])
		}
		return g
	}
	hooks := obj()
	for _, event := range []string{"PreToolUse", "Elicitation", "ElicitationResult", "Stop"} {
		if r.IntN(2) == 0 {
			l := list()
			for range r.IntN(3) {
				l.items = append(l.items, group())
			}
			hooks.names, hooks.items = append(hooks.names, event), append(hooks.items, l)
		}
	}
	top := obj("model", lit(`"opus"`), "env", obj(), "permissions", obj("allow", list(), "deny", list(lit(`"Read(.env)"`))), "hooks", hooks, "cleanupPeriodDays", lit("30"))
	r.Shuffle(len(top.items), func(i, j int) {
		top.names[i], top.names[j] = top.names[j], top.names[i]
		top.items[i], top.items[j] = top.items[j], top.items[i]
	})
	keep := r.IntN(len(top.items) + 1)
	top.names, top.items = top.names[:keep], top.items[:keep]
	w := writer{r: r, indent: []string{"  ", "    ", "\t"}[r.IntN(3)], oneLine: r.IntN(4) == 0, spaced: r.IntN(2) == 0}
	text := w.write(top, "")
	if r.IntN(2) == 0 {
		text += "\n"
	}
	if r.IntN(3) == 0 {
		text = strings.ReplaceAll(text, "\n", "\r\n")
	}
	return text
}

// A writer writes values in one of many layouts, choosing at random where a file may differ.
type writer struct {
	r       *rand.Rand
	indent  string
	oneLine bool
	spaced  bool
}

func (w writer) write(v value, prefix string) string {
	if v.literal != "" {
		return v.literal
	}
	open, close := "[", "]"
	if v.object {
		open, close = "{", "}"
	}
	if len(v.items) == 0 {
		inside := []string{"", "", " ", "\n" + prefix}[w.r.IntN(4)]
		if w.oneLine {
			inside = ""
		}
		return open + inside + close
	}
	spread := !w.oneLine && w.r.IntN(3) > 0
	colon, comma, first, last := ":", ",", "", ""
	if w.spaced {
		colon, comma = ": ", ", "
	}
	if spread {
		comma, first, last = ",\n"+prefix+w.indent, "\n"+prefix+w.indent, "\n"+prefix
	}
	var b strings.Builder
	b.WriteString(open + first)
	for i, item := range v.items {
		if i > 0 {
			b.WriteString(comma)
		}
		if v.object {
			b.WriteString(`"` + v.names[i] + `"` + colon)
		}
		b.WriteString(w.write(item, prefix+w.indent))
	}
	b.WriteString(last + close)
	return b.String()
}
