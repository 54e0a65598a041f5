package settings

import (
	"bytes"
	"errors"
	"slices"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// A doc is the text of a JSON settings file, changed only by inserting and cutting spans
// of bytes: whatever an edit does not insert or cut stays as it was, byte for byte.
type doc struct {
	data []byte
}

// A node is a JSON object or array in a doc: where its brackets are and where each of its
// items is.
type node struct {
	kind        jsontext.Kind // '{' or '['; another kind when the value is neither
	open, close int           // the offsets of its brackets
	items       []item
}

// An item is a member of an object or an element of an array.
type item struct {
	name  string // the member's name, unquoted
	start int    // where the member's name, or the element, begins
	value int    // where the value begins
	end   int    // just after the value
}

// Settings files are read as JSON.parse reads them: a name given twice is the last one,
// and bytes that are not UTF-8 are no reason to refuse the file.
var readOptions = []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}

// object parses the doc as one JSON object with nothing but whitespace around it.
func (d *doc) object() (node, error) {
	n, err := d.node(0)
	switch {
	case err != nil:
		return node{}, err
	case n.kind != '{':
		return node{}, errors.New("it does not start with {")
	case !blank(d.data[n.close+1:]):
		return node{}, errors.New("more follows the object")
	}
	return n, nil
}

// node parses the value that begins at offset at, after any whitespace: its items when it
// is an object or array, its kind alone otherwise.
func (d *doc) node(at int) (node, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(d.data[at:]), readOptions...)
	offset := func() int { return at + int(dec.InputOffset()) }
	tok, err := dec.ReadToken()
	if err != nil {
		return node{}, err
	}
	n := node{kind: tok.Kind(), open: offset() - 1}
	if n.kind != '{' && n.kind != '[' {
		return n, nil
	}
	for k := dec.PeekKind(); k != '}' && k != ']'; k = dec.PeekKind() {
		var it item
		if n.kind == '{' {
			name, err := dec.ReadValue()
			if err != nil {
				return node{}, err
			}
			it.start = offset() - len(name)
			unquoted, _ := jsontext.AppendUnquote(nil, name) // not UTF-8: no name we look for
			it.name = string(unquoted)
		}
		v, err := dec.ReadValue()
		if err != nil {
			return node{}, err
		}
		it.end = offset()
		it.value = it.end - len(v)
		if n.kind == '[' {
			it.start = it.value
		}
		n.items = append(n.items, it)
	}
	if _, err := dec.ReadToken(); err != nil {
		return node{}, err
	}
	n.close = offset() - 1
	return n, nil
}

// member returns the index of n's member called name, the last one if there are several:
// the one JSON.parse keeps.
func (n node) member(name string) (int, bool) {
	for i := len(n.items) - 1; i >= 0; i-- {
		if n.items[i].name == name {
			return i, true
		}
	}
	return 0, false
}

// holding returns the index of n's item whose value begins at offset value.
func (n node) holding(value int) int {
	return slices.IndexFunc(n.items, func(it item) bool { return it.value == value })
}

func (d *doc) splice(from, to int, text []byte) {
	d.data = slices.Concat(d.data[:from], text, d.data[to:])
}

// insert adds value as the last item of n, a member called name when n is an object,
// written in the doc's layout. After an item it comes after a separator like the one
// before that item, and on one line when that item is; but in the top-level object, whose
// members are settings of every kind, spread over lines unless the file is on one line.
// In an empty n that ends its line, or spans lines, it comes on a line of its own, one
// step in from n's line; in another empty n, on n's line. cut takes out exactly what
// insert put in.
func (d *doc) insert(n node, name string, value []byte) error {
	l, err := d.layout()
	if err != nil {
		return err
	}
	at, lead, tail, expand := n.close, "", "", false
	switch inside := d.data[n.open+1 : n.close]; {
	case len(n.items) > 0:
		last := n.items[len(n.items)-1]
		at, lead = last.end, d.separator(n, l)
		spread := bytes.IndexByte(d.data[last.start:last.end], '\n') >= 0
		expand = !l.oneLine && (spread || blank(d.data[:n.open]))
	case !l.oneLine && (endsLine(d.data[n.close+1:]) || bytes.IndexByte(inside, '\n') >= 0):
		outer := indentation(d.data[:n.open])
		lead, tail, expand = l.newline+outer+l.indent, l.newline+outer, true
	}
	prefix := indentation(d.data[:at])
	if strings.Contains(lead, "\n") {
		prefix = indentation([]byte(lead))
	}
	text, err := l.write(n.kind == '{', name, value, prefix, expand)
	if err != nil {
		return err
	}
	d.splice(at, at, slices.Concat([]byte(lead), text, []byte(tail)))
	return nil
}

// separator returns what goes before an item added after n's last: what stands between
// its last two items, or a comma and the whitespace before its only one (a space when
// there is none and the layout is spaced).
func (d *doc) separator(n node, l layout) string {
	if k := len(n.items); k >= 2 {
		return string(d.data[n.items[k-2].end:n.items[k-1].start])
	}
	before := string(d.data[n.open+1 : n.items[0].start])
	if before == "" && l.spaced {
		before = " "
	}
	return "," + before
}

// endsLine reports whether nothing but blanks and a comma come before the end of the line
// that b begins.
func endsLine(b []byte) bool {
	rest := bytes.TrimLeft(b, " \t,")
	return len(rest) == 0 || rest[0] == '\r' || rest[0] == '\n'
}

// cut removes n's item i. An item after another goes with the separator before it, the
// first of several with the separator after it, and an only item with what lies between
// it and n's closing bracket, and the line break before it when insert put one there: the
// whitespace that was in the empty n stays.
func (d *doc) cut(n node, i int) error {
	it := n.items[i]
	switch {
	case i > 0:
		d.splice(n.items[i-1].end, it.end, nil)
	case len(n.items) > 1:
		d.splice(it.start, n.items[1].start, nil)
	default:
		l, err := d.layout()
		if err != nil {
			return err
		}
		from := it.start
		if nl := bytes.LastIndex(d.data[n.open+1:it.start], []byte(l.newline)); nl >= 0 {
			from = n.open + 1 + nl
		}
		d.splice(from, n.close, nil)
	}
	return nil
}

// blank reports whether b is nothing but JSON whitespace.
func blank(b []byte) bool { return len(bytes.Trim(b, " \t\r\n")) == 0 }

// indentation returns the spaces and tabs that begin the last line of b.
func indentation(b []byte) string {
	line := b[bytes.LastIndexByte(b, '\n')+1:]
	return string(line[:len(line)-len(bytes.TrimLeft(line, " \t"))])
}

// A layout is how a settings file is written, as far as what is added to it follows.
type layout struct {
	newline string // "\r\n" when the file's first line ends so (or it has none, and a "\r"), else "\n"
	indent  string // one step: the indentation of the first indented line, else two spaces
	spaced  bool   // a space after the colon of the object's first member (and after commas)
	oneLine bool   // the object has members and no line break: what is added stays on its line
}

// layout returns the doc's layout. The first line break stays where it is whatever insert
// adds, and so does the newline.
func (d *doc) layout() (layout, error) {
	top, err := d.object()
	if err != nil {
		return layout{}, err
	}
	l := layout{newline: "\n", indent: "  ", spaced: true}
	switch i := bytes.IndexByte(d.data, '\n'); {
	case i > 0 && d.data[i-1] == '\r':
		l.newline = "\r\n"
	case i < 0 && bytes.IndexByte(d.data, '\r') >= 0:
		// No line break yet but a carriage return, which what insert adds may follow: its
		// lines end in "\r\n", so that the file's first line break reads the same after.
		l.newline = "\r\n"
	}
	for _, line := range bytes.Split(d.data, []byte("\n"))[1:] {
		if ind := indentation(line); ind != "" && len(bytes.TrimSpace(line)) > 0 {
			l.indent = ind
			break
		}
	}
	if len(top.items) > 0 {
		first := top.items[0]
		between := d.data[first.start:first.value]
		l.spaced = bytes.LastIndexByte(between, ':') < len(between)-1
		l.oneLine = bytes.IndexByte(d.data[top.open:top.close], '\n') < 0
	}
	return l, nil
}

// write returns an item's text: the name and a colon for an object's member, and the
// value, on lines of its own indented from prefix when expand, else on one line.
func (l layout) write(member bool, name string, value []byte, prefix string, expand bool) ([]byte, error) {
	var b []byte
	if member {
		b, _ = jsontext.AppendQuote(b, name)
		b = append(b, ':')
		if l.spaced {
			b = append(b, ' ')
		}
	}
	opts := []jsontext.Options{jsontext.SpaceAfterColon(l.spaced)}
	if expand {
		opts = append(opts, jsontext.WithIndentPrefix(prefix), jsontext.WithIndent(l.indent))
	} else {
		opts = append(opts, jsontext.Multiline(false), jsontext.SpaceAfterComma(l.spaced))
	}
	// Strings come out in their shortest form: & < > as they are, not as \u0026.
	b, err := jsontext.AppendFormat(b, value, opts...)
	if err != nil {
		return nil, err
	}
	return bytes.ReplaceAll(b, []byte("\n"), []byte(l.newline)), nil
}
