package upstream

import (
	"encoding/json"
	"fmt"
	"iter"
	"strings"
	"unicode/utf8"
)

// tokenKind says what a JSON token is.
type tokenKind byte

// The kinds of JSON tokens.
const (
	jsonString  tokenKind = '"'
	jsonNumber  tokenKind = '0'
	jsonLiteral tokenKind = 't' // true, false or null
	jsonDelim   tokenKind = '{' // one of { } [ ] : ,
)

// jsonToken is one token of a JSON text, text[start:end].
type jsonToken struct {
	kind       tokenKind
	start, end int
}

// scanJSON returns the tokens of text in order, leaving out the whitespace between them.
// It checks each token (a string's escapes, a number's digits) but not how the tokens are
// put together: one JSON text scans, and so do several (NDJSON), or "] 1 {". A byte that
// cannot start or continue a token ends the sequence with an error.
func scanJSON(text string) iter.Seq2[jsonToken, error] {
	return func(yield func(jsonToken, error) bool) {
		for i := 0; i < len(text); {
			if strings.IndexByte(" \t\n\r", text[i]) >= 0 {
				i++
				continue
			}
			tok := scanToken(text, i)
			if tok.end <= i {
				yield(tok, fmt.Errorf("not JSON at byte %d", i))
				return
			}
			if !yield(tok, nil) {
				return
			}
			i = tok.end
		}
	}
}

// scanToken returns the token that starts at text[i], with an end of -1 when there is
// none.
func scanToken(text string, i int) jsonToken {
	switch c := text[i]; {
	case strings.IndexByte("{}[]:,", c) >= 0:
		return jsonToken{jsonDelim, i, i + 1}
	case c == '"':
		return jsonToken{jsonString, i, stringEnd(text, i)}
	case c == '-' || isDigit(c):
		return jsonToken{jsonNumber, i, numberEnd(text, i)}
	}
	for _, lit := range []string{"true", "false", "null"} {
		if strings.HasPrefix(text[i:], lit) {
			return jsonToken{jsonLiteral, i, i + len(lit)}
		}
	}
	return jsonToken{start: i, end: -1}
}

// stringEnd returns the end of the string that starts at text[i], or -1.
func stringEnd(text string, i int) int {
	for i++; i < len(text); i++ {
		switch c := text[i]; {
		case c == '"':
			return i + 1
		case c < 0x20:
			return -1
		case c == '\\':
			i++
			switch {
			case i < len(text) && strings.IndexByte(`"\/bfnrt`, text[i]) >= 0:
			case i+4 < len(text) && text[i] == 'u' && isHex(text[i+1:i+5]):
				i += 4
			default:
				return -1
			}
		}
	}
	return -1
}

// numberEnd returns the end of the number that starts at text[i], or -1.
func numberEnd(text string, i int) int {
	if text[i] == '-' {
		i++
	}
	switch {
	case i < len(text) && text[i] == '0':
		i++
	case i < len(text) && isDigit(text[i]):
		i = digitsEnd(text, i)
	default:
		return -1
	}
	if i < len(text) && text[i] == '.' {
		if i = requiredDigitsEnd(text, i+1); i < 0 {
			return -1
		}
	}
	if i < len(text) && (text[i] == 'e' || text[i] == 'E') {
		i++
		if i < len(text) && (text[i] == '+' || text[i] == '-') {
			i++
		}
		i = requiredDigitsEnd(text, i)
	}
	return i
}

// digitsEnd returns the end of the digits that start at text[i].
func digitsEnd(text string, i int) int {
	for i < len(text) && isDigit(text[i]) {
		i++
	}
	return i
}

// requiredDigitsEnd returns the end of the digits that start at text[i], or -1 when there
// are none.
func requiredDigitsEnd(text string, i int) int {
	if j := digitsEnd(text, i); j > i {
		return j
	}
	return -1
}

// isDigit reports whether c is a decimal digit.
func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// isHex reports whether s is hex digits.
func isHex(s string) bool {
	return strings.Trim(s, "0123456789abcdefABCDEF") == ""
}

// decodeJSONString returns the text of a string token that scanJSON scanned. Invalid
// UTF-8 and unpaired surrogates become U+FFFD, as encoding/json decodes them.
func decodeJSONString(tok string) string {
	if !strings.Contains(tok, `\`) && utf8.ValidString(tok) {
		return tok[1 : len(tok)-1]
	}
	var s string
	json.Unmarshal([]byte(tok), &s) // cannot fail on a token scanJSON scanned
	return s
}

// encodeJSONString returns s as a JSON string token, escaped only where JSON requires.
func encodeJSONString(s string) string {
	return `"` + jsonStyle{}.escape(s) + `"`
}
