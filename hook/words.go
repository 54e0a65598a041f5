package hook

import (
	"strings"
	"unicode"
)

// SecretPhrases are the words and phrases that, matched as whole words in a form's message
// or in a field's name, title or description, mark a form that asks for a secret. Field
// names are split into words first: apiKey, api_key, api-key and "API key" all read
// "api key".
var SecretPhrases = []string{
	"password", "passwords", "passwd", "passphrase", "passcode",
	"api key", "api keys", "apikey", "api token", "api secret",
	"access key", "access token", "auth token", "bearer token", "refresh token", "session token",
	"token", "secret", "secrets", "client secret", "secret key",
	"private key", "signing key", "encryption key", "ssh key",
	"credential", "credentials",
	"card number", "credit card", "debit card", "cvv", "cvv2", "cvc", "security code",
	"iban", "routing number", "bank account",
	"pin code", "pin number", "otp", "totp", "2fa code", "mfa code",
	"seed phrase", "recovery phrase",
}

// NotSecretPhrases are phrases that hold a secret word but name something else, such as a
// paging cursor (page_token) or a model's budget (token limit). Their words never count as
// a match. Plural "tokens" is not in SecretPhrases at all (max_tokens).
var NotSecretPhrases = []string{
	"page token", "next token", "next page token", "continuation token", "pagination token",
	"sync token", "cursor token", "token count", "token limit", "token budget", "token usage",
	"max token",
}

// A phraseMatcher finds secret phrases in text, word by word.
type phraseMatcher struct {
	secret, notSecret [][]string
}

func newPhraseMatcher(secret, notSecret []string) *phraseMatcher {
	m := &phraseMatcher{}
	for _, p := range secret {
		m.secret = append(m.secret, words(p))
	}
	for _, p := range notSecret {
		m.notSecret = append(m.notSecret, words(p))
	}
	return m
}

// defaultMatcher matches SecretPhrases, less NotSecretPhrases.
var defaultMatcher = newPhraseMatcher(SecretPhrases, NotSecretPhrases)

// find returns the first secret phrase in text, as the published phrase's words, or "".
func (m *phraseMatcher) find(text string) string {
	ws := words(text)
	excluded := make([]bool, len(ws))
	for i := range ws {
		for _, p := range m.notSecret {
			if hasAt(ws, i, p) {
				for j := range p {
					excluded[i+j] = true
				}
			}
		}
	}
	for i := range ws {
		for _, p := range m.secret {
			if !hasAt(ws, i, p) {
				continue
			}
			clear := true
			for j := range p {
				clear = clear && !excluded[i+j]
			}
			if clear {
				return strings.Join(p, " ")
			}
		}
	}
	return ""
}

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
		case (unicode.IsLower(prev) || unicode.IsDigit(prev)) && unicode.IsUpper(r):
			// apiKey, oauth2Token: a word starts at K, at T.
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
