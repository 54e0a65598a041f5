package upstream

import (
	"slices"
	"strings"
)

// Finding forms in a text, as written and as a URL decoder reads it.

// formSet replaces a set of forms in a text, as written and as a URL decoder reads it.
type formSet struct {
	forms    []form
	replacer *strings.Replacer
	// byFirst lists, for each byte, the forms that may show from it on in a decoded text
	// (see showsAt), longest first, by index; starts has the pairs of bytes they may show
	// from, so that most bytes are passed over at the cost of one look-up.
	byFirst [][]int
	starts  *pairSet
	// spaced says whether a form has a space, which a query may write as "+".
	spaced bool
}

// newFormSet returns the set of forms, which are longest first: where several start at
// one place, the longest is replaced.
func newFormSet(forms []form) formSet {
	fs := formSet{forms: forms, byFirst: make([][]int, 256), starts: new(pairSet)}
	pairs := make([]string, 0, 2*len(forms))
	for i, f := range forms {
		pairs = append(pairs, f.old, f.new)
		fs.spaced = fs.spaced || strings.Contains(f.old, " ")
		for _, first := range shownAs(f.old[0]) {
			fs.byFirst[first] = append(fs.byFirst[first], i)
			if len(f.old) == 1 {
				for second := range 256 {
					fs.starts.add(first, byte(second))
				}
				continue
			}
			for _, second := range shownAs(f.old[1]) {
				fs.starts.add(first, second)
			}
		}
	}
	fs.replacer = strings.NewReplacer(pairs...)
	return fs
}

// shownAs returns the bytes that c of a form may show as in a decoded text: c, and "+"
// for a space.
func shownAs(c byte) []byte {
	if c == ' ' {
		return []byte{' ', '+'}
	}
	return []byte{c}
}

// pairSet is a set of pairs of bytes, a bit for each.
type pairSet [1 << 16 / 64]uint64

func (p *pairSet) add(a, b byte) {
	k := uint16(a)<<8 | uint16(b)
	p[k/64] |= 1 << (k % 64)
}

func (p *pairSet) has(a, b byte) bool {
	k := uint16(a)<<8 | uint16(b)
	return p[k/64]&(1<<(k%64)) != 0
}

// replace returns s with every form in it replaced: where it shows once s is URL-decoded
// (see decodedSpans), then where it is written as it is. The second pass is the one a text
// without escapes needs, and it finds a form with an escape of its own ("%41" in the
// secret), which decoding would change. A form that overlaps one replaced before it,
// further left, is cut by that replacement, so that none is left whole.
func (fs formSet) replace(s string) string {
	if len(fs.forms) == 0 {
		return s
	}
	return fs.replacer.Replace(fs.replaceDecoded(s))
}

// in reports whether s has a form of the set, as written or URL-decoded.
func (fs formSet) in(s string) bool {
	return slices.ContainsFunc(fs.forms, func(f form) bool { return strings.Contains(s, f.old) }) ||
		len(fs.decodedSpans(s)) > 0
}

// span is where a form shows in a text, text[start:end], and what replaces it there.
type span struct {
	start, end int
	new        string
}

// replaceDecoded returns s with the spans that decodedSpans finds replaced.
func (fs formSet) replaceDecoded(s string) string {
	spans := fs.decodedSpans(s)
	if len(spans) == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	done := 0
	for _, sp := range spans {
		b.WriteString(s[done:sp.start])
		b.WriteString(sp.new)
		done = sp.end
	}
	b.WriteString(s[done:])
	return b.String()
}

// decodedSpans returns the spans of s that show a form once s is read as a URL decoder
// reads it (see percentView and showsAt), in order and apart, or nil when s has nothing to
// decode. Matching the decoded text, rather than listing encodings, is what finds every
// mix of escapes (either case) and bytes as they are, over any form: an API may escape
// each byte (%64%65%6d%6f), the reserved ones only, or whatever its encoder chose. A span
// covers the bytes as written, escapes whole; spans that overlap become one, so that no
// byte of any occurrence is left. It is one pass, trying forms only where one may start.
func (fs formSet) decodedSpans(s string) []span {
	if len(fs.forms) == 0 {
		return nil
	}
	v, ok := newPercentView(s, fs.spaced)
	if !ok {
		return nil
	}
	var spans []span
	for i := range len(v.text) {
		if !fs.mayStart(v.text, i) {
			continue
		}
		f, ok := fs.longestAt(v.text, i)
		if !ok {
			continue
		}
		start, end := v.offset(i), v.offset(i+len(f.old))
		if n := len(spans); n > 0 && start < spans[n-1].end {
			spans[n-1].end = max(spans[n-1].end, end)
		} else {
			spans = append(spans, span{start, end, f.new})
		}
	}
	return spans
}

// mayStart reports whether a form may show from text[i] on: one may start with the two
// bytes there, or with the last byte of text.
func (fs formSet) mayStart(text string, i int) bool {
	if i+1 < len(text) {
		return fs.starts.has(text[i], text[i+1])
	}
	return len(fs.byFirst[text[i]]) > 0
}

// longestAt returns the longest form that shows from text[i] on, if any.
func (fs formSet) longestAt(text string, i int) (form, bool) {
	for _, k := range fs.byFirst[text[i]] {
		if showsAt(text, i, fs.forms[k].old) {
			return fs.forms[k], true
		}
	}
	return form{}, false
}

// showsAt reports whether the form old shows from text[i] on, each space in it as a space
// or as "+". A query writes a space as "+" and a "+" as %2B; an encoder may mix that with
// %20, or leave a "+" as it is; so a "+" may stand for a space whatever its neighbours.
func showsAt(text string, i int, old string) bool {
	if strings.HasPrefix(text[i:], old) {
		return true
	}
	if len(text)-i < len(old) || !strings.Contains(old, " ") {
		return false
	}
	for j := range len(old) {
		if c := text[i+j]; c != old[j] && (c != '+' || old[j] != ' ') {
			return false
		}
	}
	return true
}

// percentView is a text as a URL decoder reads it, and the way back to the text.
type percentView struct {
	// text has every escape %hh decoded, whatever the case of its digits. A "%" that does
	// not start one ("%", "%4", "%zz") stays as it is, as WHATWG's URL parser and Go's
	// lenient decoders leave it; a "+" stays too (showsAt reads it as a space where that
	// matters). Decoding is done once, as a server does it.
	text string
	// escapes are the offsets in text of the bytes that were escapes, in order.
	escapes []int
}

// newPercentView returns the view of s, and false when there is nothing to decode: s has
// no escape, and no "+" or (spaced false) no form a space that a "+" could stand for.
func newPercentView(s string, spaced bool) (percentView, bool) {
	if !hasEscape(s) {
		return percentView{text: s}, spaced && strings.IndexByte(s, '+') >= 0
	}
	v := percentView{escapes: make([]int, 0, strings.Count(s, "%"))}
	var decoded strings.Builder
	decoded.Grow(len(s))
	for rest := s; rest != ""; {
		i := strings.IndexByte(rest, '%')
		if i < 0 {
			decoded.WriteString(rest)
			break
		}
		decoded.WriteString(rest[:i])
		rest = rest[i:]
		if b, ok := escapeAt(rest, 0); ok {
			v.escapes = append(v.escapes, decoded.Len())
			decoded.WriteByte(b)
			rest = rest[3:]
		} else {
			decoded.WriteByte('%')
			rest = rest[1:]
		}
	}
	v.text = decoded.String()
	return v, true
}

// offset returns where byte i of v.text starts in the text as written: i, and two more
// bytes for each escape before it. It returns the written text's length for len(v.text).
func (v percentView) offset(i int) int {
	before, _ := slices.BinarySearch(v.escapes, i)
	return i + 2*before
}

// hasEscape reports whether s has an escape %hh.
func hasEscape(s string) bool {
	for i := strings.IndexByte(s, '%'); i >= 0; {
		if _, ok := escapeAt(s, i); ok {
			return true
		}
		j := strings.IndexByte(s[i+1:], '%')
		if j < 0 {
			return false
		}
		i += 1 + j
	}
	return false
}

// escapeAt returns the byte that the escape %hh at s[i] stands for, and false when s[i]
// does not start one.
func escapeAt(s string, i int) (byte, bool) {
	if s[i] != '%' || i+2 >= len(s) {
		return 0, false
	}
	hi, okHi := hexValue(s[i+1])
	lo, okLo := hexValue(s[i+2])
	return hi<<4 | lo, okHi && okLo
}

// hexValue returns the value of the hex digit c, in either case, and false when c is not
// one.
func hexValue(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
