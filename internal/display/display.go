// Package display cleans text that another party chose before urlflow keeps it and shows
// it to people, to the model and in logs: the name, title and version an MCP client reports
// about itself, the account name a third-party provider returns.
//
// The one idea to hold: text is cleaned once, where it enters urlflow, so that every reader
// of a stored value sees the same clean value; nothing downstream cleans again.
// Capitalized, beside it, starts a sentence with a phrase of urlflow's own.
package display

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// ellipsis ends a text that Clean shortened.
const ellipsis = '…'

// Clean returns s as one line of visible text of at most limit runes (nothing if limit is
// less than one):
//
//   - every kind of whitespace (spaces of any width, tabs, line and paragraph breaks) becomes
//     one space, runs of it collapse to one, and none is left at either end;
//   - what is not visible is removed: control characters, format characters (Unicode's Cf:
//     the bidirectional controls U+202A–U+202E, U+2066–U+2069, U+200E, U+200F and U+061C,
//     zero-width spaces and joiners, the tag characters that can smuggle text to a model),
//     the other default-ignorable code points (Hangul fillers, variation selectors),
//     private-use code points and code points that Go's Unicode tables do not assign;
//   - invalid UTF-8 becomes U+FFFD;
//   - a text longer than limit is cut to limit-1 runes and ends with an ellipsis (…).
//
// The zero-width joiner goes too, although emoji sequences use it: a family or a profession
// emoji then shows as its parts, and two names that look the same cannot differ by a joiner.
// Without variation selectors an emoji may show in its text style.
//
// Clean is idempotent: a cleaned text comes back unchanged. It reads at most as far into s
// as it needs to fill limit.
func Clean(s string, limit int) string {
	if limit < 1 {
		return ""
	}
	out := make([]rune, 0, min(limit+1, len(s)))
	space := false // a space is owed before the next visible rune
	for _, r := range s {
		switch {
		case unicode.IsSpace(r):
			space = len(out) > 0
			continue
		case !visible(r):
			continue
		}
		if space {
			out = append(out, ' ')
			space = false
		}
		out = append(out, r)
		if len(out) > limit {
			break
		}
	}
	if len(out) <= limit {
		return string(out)
	}
	out = out[:limit-1]
	for len(out) > 0 && out[len(out)-1] == ' ' {
		out = out[:len(out)-1]
	}
	return string(append(out, ellipsis))
}

// visible reports whether Clean keeps r as it is: a letter, mark, number, punctuation or
// symbol that is assigned and not default-ignorable. Whitespace is not visible; Clean turns
// it into single spaces.
func visible(r rune) bool {
	return unicode.IsGraphic(r) && !unicode.IsSpace(r) &&
		!unicode.In(r, unicode.Variation_Selector, unicode.Other_Default_Ignorable_Code_Point)
}

// Capitalized returns s with its first letter in upper case: a phrase of urlflow's own
// ("call set_secret again", "this request has already ended") at the start of a sentence.
func Capitalized(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 {
		return s
	}
	return strings.ToUpper(string(r)) + s[n:]
}
