package hook

import (
	"strings"
	"unicode"

	"github.com/mtibben/confusables"
	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// What a server writes is read the way a person reads it, not as raw code points: before a
// word is matched, characters that render as nothing are removed, compatibility forms
// (full-width letters, ligatures) become their plain letters, case is folded, look-alike
// letters of other scripts become the Latin letters they imitate (Unicode TR39's
// skeleton), digits that stand for letters inside a word read as those letters, and
// letters spelled out one by one (p a s s w o r d, A-P-I) read as one word. The vocabulary
// is folded the same way, so that both sides meet.
//
// The skeletons are those of github.com/mtibben/confusables, whose tables hold Unicode's
// confusables.txt of UTS #39 version 13.0.0 (unicode.org cannot be reached where urlflow
// is built); its maketables.go regenerates them from a newer confusables.txt, and a newer
// version of the module brings them.

// folder folds case the way Unicode's full case folding does.
var folder = cases.Fold()

// invisible reports whether r renders as nothing: a format character (zero-width space
// and joiners, soft hyphen, bidirectional controls), a variation selector, or another
// default-ignorable code point.
func invisible(r rune) bool {
	return unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Variation_Selector, r) || unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r)
}

// readable is text as a person reads it, before it is split into words: invisible
// characters removed, compatibility forms composed (NFKC), and @ or $ between two letters
// read as the letters they stand for (p@ssword, pa$$word).
func readable(text string) string {
	text = strings.Map(func(r rune) rune {
		if invisible(r) {
			return -1
		}
		return r
	}, text)
	text = norm.NFKC.String(text)
	rs := []rune(text)
	for i, r := range rs {
		if (r != '@' && r != '$') || i == 0 {
			continue
		}
		j := i + 1
		for j < len(rs) && rs[j] == r {
			j++ // pa$$word: the whole run
		}
		if j < len(rs) && unicode.IsLetter(rs[i-1]) && unicode.IsLetter(rs[j]) {
			for k := i; k < j; k++ {
				rs[k] = map[rune]rune{'@': 'a', '$': 's'}[r]
			}
		}
	}
	return string(rs)
}

// leet maps digits that stand for letters inside a word of letters.
var leet = map[rune]rune{'0': 'o', '1': 'i', '3': 'e', '4': 'a', '5': 's', '7': 't'}

// foldWord is a word (from words, after readable) as it is matched: case folded, digits
// that stand for letters read as letters when the word has a letter, and then the TR39
// skeleton, folded again.
func foldWord(w string) string {
	w = folder.String(w)
	if strings.IndexFunc(w, unicode.IsLetter) >= 0 && strings.IndexFunc(w, unicode.IsDigit) >= 0 && !keepsDigits(w) {
		w = strings.Map(func(r rune) rune {
			if l, ok := leet[r]; ok {
				return l
			}
			return r
		}, w)
	}
	return folder.String(confusables.Skeleton(w))
}

// keepsDigits reports whether w is a word whose digits are its own: a name with a version
// (oauth2, cvv2, sha256) or one that starts with digits (2fa), which leet must not turn
// into letters. A word with digits between letters (passw0rd, p4ssword) is leet.
func keepsDigits(w string) bool {
	rs := []rune(w)
	last := rs[len(rs)-1]
	first := rs[0]
	if unicode.IsDigit(first) {
		return true
	}
	if !unicode.IsDigit(last) {
		return false
	}
	// Digits at the end only: a version, unless a digit also stands inside the letters.
	trimmed := strings.TrimRightFunc(w, unicode.IsDigit)
	return strings.IndexFunc(trimmed, unicode.IsDigit) < 0
}

// foldedWords is text split into words (words) after readable, each folded (foldWord),
// with runs of three or more one-letter words joined (p a s s w o r d, A-P-I).
func foldedWords(text string) []string {
	raw := words(readable(text))
	out := make([]string, 0, len(raw))
	for i := 0; i < len(raw); {
		j := i
		for j < len(raw) && len([]rune(raw[j])) == 1 {
			j++
		}
		if j-i >= 3 {
			out = append(out, foldWord(strings.Join(raw[i:j], "")))
			i = j
			continue
		}
		out = append(out, foldWord(raw[i]))
		i++
	}
	return out
}
