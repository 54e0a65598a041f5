package hook

import (
	"encoding/base64"
	"math"
	"net/url"
	"regexp"
	"strings"
	"unicode/utf8"
)

// A keyPrefix is the start of a kind of credential that its issuer marks as such, and how
// many more key characters make a value one of them.
type keyPrefix struct {
	prefix string
	name   string
	min    int
}

// keyPrefixes lists the published prefixes of API keys and tokens that mark a value as a
// secret, with the issuer's name.
var keyPrefixes = []keyPrefix{
	{"sk-ant-", "Anthropic key", 20},
	{"sk-proj-", "OpenAI key", 20},
	{"sk-", "API key (sk-)", 16},
	{"sk_live_", "Stripe secret key", 16},
	{"sk_test_", "Stripe secret key", 16},
	{"rk_live_", "Stripe restricted key", 16},
	{"whsec_", "webhook signing secret", 16},
	{"ghp_", "GitHub token", 30},
	{"gho_", "GitHub token", 30},
	{"ghu_", "GitHub token", 30},
	{"ghs_", "GitHub token", 30},
	{"ghr_", "GitHub token", 30},
	{"github_pat_", "GitHub token", 30},
	{"glpat-", "GitLab token", 16},
	{"xoxb-", "Slack token", 10},
	{"xoxp-", "Slack token", 10},
	{"xoxa-", "Slack token", 10},
	{"xoxr-", "Slack token", 10},
	{"xoxs-", "Slack token", 10},
	{"xoxe-", "Slack token", 10},
	{"AKIA", "AWS access key", 16},
	{"ASIA", "AWS access key", 16},
	{"AIza", "Google API key", 30},
	{"ya29.", "Google OAuth token", 20},
	{"npm_", "npm token", 30},
	{"pypi-", "PyPI token", 30},
	{"hf_", "Hugging Face token", 30},
	{"SG.", "SendGrid key", 30},
	{"shpat_", "Shopify token", 20},
	{"dop_v1_", "DigitalOcean token", 30},
	{"uf_op_", "urlflow operator token", 16},
}

var (
	jwtPattern = regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*`)
	pemPattern = regexp.MustCompile(`-----BEGIN [A-Z0-9 ]+-----`)
)

// isKeyChar reports whether r can be part of a key: letters, digits and the few
// punctuation marks keys and base64 use.
func isKeyChar(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
		strings.ContainsRune("-_+/=.", r)
}

// minHighEntropyLength is the shortest run of key characters judged by its entropy alone.
const minHighEntropyLength = 24

// secretShaped returns what kind of secret s looks like, or "" when it looks like none.
// It looks at every whitespace-separated word of s, so a key inside a sentence counts, and
// inside a word in base64.
func secretShaped(s string) string { return shaped(s, true) }

// secretShapedPlain is secretShaped without looking inside base64.
func secretShapedPlain(s string) string { return shaped(s, false) }

func shaped(s string, decode bool) string {
	if luhnCardNumber(strings.TrimSpace(s)) {
		return "a payment card number"
	}
	if pemPattern.MatchString(s) {
		return "a PEM block"
	}
	if jwtPattern.MatchString(s) {
		return "a JWT"
	}

	words := strings.Fields(s)
	if joined, ok := spacedKey(words); ok {
		words = append(words, joined)
	}
	for i, word := range words {
		words[i] = strings.Trim(word, `"'()[]{}<>,;:`)
		for _, k := range keyPrefixes {
			if rest, ok := strings.CutPrefix(words[i], k.prefix); ok && len(rest) >= k.min && onlyKeyChars(rest) {
				return "a " + k.name + " (" + k.prefix + ")"
			}
		}
	}
	for _, word := range words {
		if urlWithPassword(word) {
			return "a URL with a password"
		}
	}
	if rule := knownFormat(s); rule != "" {
		return "a secret of a known format (gitleaks rule " + rule + ")"
	}
	for _, word := range words {
		if !decode {
			break
		}
		if inner := decodedSecret(word); inner != "" {
			return inner + ", in base64"
		}
	}
	for _, word := range words {
		if highEntropy(word) {
			return "a long random string"
		}
	}
	return ""
}

// spacedKey joins words that are one key written in groups (ghp_ 0123 4567 ..., or
// Zx8q-L2mN-7vB4-...): three or more groups of key characters, each as long as the first
// but the last (which is at most as long), separated by single spaces or hyphens. Words of a
// sentence are of many lengths, and never joined.
func spacedKey(words []string) (string, bool) {
	if len(words) == 1 && strings.Count(words[0], "-") >= 2 && !strings.HasPrefix(words[0], "-") {
		words = strings.Split(words[0], "-")
	}
	if len(words) < 3 {
		return "", false
	}
	size := len(words[1])
	for i, w := range words {
		last := i == len(words)-1
		if !onlyKeyChars(w) || w == "" || (i > 0 && !last && len(w) != size) || (last && len(w) > size) {
			return "", false
		}
	}
	joined := strings.Join(words, "")
	return joined, len(joined) >= minHighEntropyLength-4
}

// decodedSecret returns what kind of secret word is once decoded from base64 (standard or
// URL alphabet, padded or not), when it decodes to text: a key wrapped to hide its shape.
// One level only.
func decodedSecret(word string) string {
	if len(word) < 24 || !onlyKeyChars(word) {
		return ""
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		raw, err := enc.DecodeString(word)
		if err != nil || !utf8.Valid(raw) || strings.IndexFunc(string(raw), func(r rune) bool { return r < ' ' && r != '\n' }) >= 0 {
			continue
		}
		if kind := secretShapedPlain(string(raw)); kind != "" {
			return kind
		}
	}
	return ""
}

// urlWithPassword reports whether word is a URL whose user part holds a password
// (https://user:secret@host, postgres://app:secret@db).
func urlWithPassword(word string) bool {
	if !strings.Contains(word, "://") {
		return false
	}
	u, err := url.Parse(word)
	if err != nil || u.User == nil {
		return false
	}
	pw, ok := u.User.Password()
	return ok && pw != ""
}

func onlyKeyChars(s string) bool {
	for _, r := range s {
		if !isKeyChar(r) {
			return false
		}
	}
	return true
}

// highEntropy reports whether word looks random enough to be a key: at least
// minHighEntropyLength key characters, letters and digits mixed, and a Shannon entropy
// close to the most its length and alphabet allow. Words, identifiers and dates are far
// from it; a random base62, base64 or hex string is near it.
func highEntropy(word string) bool {
	if len(word) < minHighEntropyLength || !onlyKeyChars(word) {
		return false
	}
	var letters, digits int
	hex := true
	counts := map[rune]int{}
	for _, r := range word {
		counts[r]++
		switch {
		case r >= '0' && r <= '9':
			digits++
		case r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z':
			letters++
			hex = hex && (r >= 'a' && r <= 'f' || r >= 'A' && r <= 'F')
		default:
			hex = false
		}
	}
	if letters == 0 || digits == 0 {
		return false
	}
	if isUUID(word) {
		return false // an identifier far more often than a key
	}
	var entropy float64
	n := float64(len(word))
	for _, c := range counts {
		p := float64(c) / n
		entropy -= p * math.Log2(p)
	}
	alphabet := 62.0
	if hex {
		alphabet = 16
	}
	most := math.Min(math.Log2(alphabet), math.Log2(n))
	return entropy >= 0.85*most
}

func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, r := range s {
		switch i {
		case 8, 13, 18, 23:
			if r != '-' {
				return false
			}
		default:
			if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f' || r >= 'A' && r <= 'F') {
				return false
			}
		}
	}
	return true
}

// luhnCardNumber reports whether s is 13 to 19 digits, in groups separated by spaces or
// hyphens or not, that pass the Luhn check of payment card numbers.
func luhnCardNumber(s string) bool {
	var digits []int
	for _, r := range s {
		switch {
		case r >= '0' && r <= '9':
			digits = append(digits, int(r-'0'))
		case r == ' ' || r == '-':
		default:
			return false
		}
	}
	if len(digits) < 13 || len(digits) > 19 {
		return false
	}
	sum := 0
	for i := range digits {
		d := digits[len(digits)-1-i]
		if i%2 == 1 {
			if d *= 2; d > 9 {
				d -= 9
			}
		}
		sum += d
	}
	return sum%10 == 0
}
