package hook

import (
	"strings"
	"unicode"
)

func hasAt(ws []string, i int, phrase []string) bool {
	if i+len(phrase) > len(ws) {
		return false
	}
	for j, w := range phrase {
		if ws[i+j] != w {
			return false
		}
	}
	return true
}

// words splits text into lower-case words: at anything that is not a letter or a digit,
// and inside camelCase and ACRONYMWords (apiKey, APIKey: "api", "key").
func words(text string) []string {
	var out []string
	rs := []rune(text)
	start := -1
	flush := func(end int) {
		if start >= 0 && end > start {
			out = append(out, strings.ToLower(string(rs[start:end])))
		}
		start = -1
	}
	for i, r := range rs {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			flush(i)
			continue
		}
		if start < 0 {
			start = i
			continue
		}
		prev := rs[i-1]
		switch {
		case unicode.IsLower(prev) && unicode.IsUpper(r),
			unicode.IsDigit(prev) && unicode.IsUpper(r) && i+1 < len(rs) && unicode.IsLower(rs[i+1]):
			// apiKey, oauth2Token: a word starts at K, at T; 2FA is one word.
			flush(i)
			start = i
		case unicode.IsUpper(prev) && unicode.IsUpper(r) && i+1 < len(rs) && unicode.IsLower(rs[i+1]):
			// APIKey: a word starts at K, the last capital before a lower-case letter.
			flush(i)
			start = i
		}
	}
	flush(len(rs))
	return out
}
