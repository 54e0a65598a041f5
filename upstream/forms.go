package upstream

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html"
	"net/url"
	"slices"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/urlflow/urlflow/state"
)

// The forms a secret may show in: what the redactor looks for.

// secretForms lists the secret as it may come back, longest first, so that a longer form
// is replaced before a form inside it:
//   - as is, and inside its header template;
//   - hex, with lower- or upper-case digits;
//   - base64 and base64url, padded or not, of the secret and of basic authentication's
//     user:password, and the part of the base64 of a longer text that only the secret
//     decides (at each of the three alignments it can have in that text);
//   - each of those but hex percent-encoded (as url.QueryEscape, url.PathEscape and RFC
//     3986's strictest encoders write it, with upper- or lower-case hex), escaped in a
//     JSON string (as Go, JavaScript, PHP and Python write it) and in HTML (as Go, PHP,
//     Python, XML and OWASP's rules escape it, or with every character but letters and
//     digits as a decimal or hex entity);
//   - the UTF-16LE and UTF-16BE bytes of the secret and of its base64 forms.
func secretForms(api *API, secret state.Secret) []string {
	forms := redactions(api, secret)
	out := make([]string, len(forms))
	for i, f := range forms {
		out[i] = f.old
	}
	return out
}

// form is one way the secret can show, and what replaces it there: [redacted], in UTF-16
// for a UTF-16 form so that the text around it stays readable.
type form struct {
	old, new string
}

// redactions returns the forms that secretForms lists with their replacements, longest
// first.
func redactions(api *API, secret state.Secret) []form {
	s := secret.Reveal()
	if s == "" {
		return nil
	}
	encoded := append([]string{s}, base64Forms(s)...)
	if b := api.Inject.Basic; b != nil {
		encoded = append(encoded, base64Forms(Value(b.Username, s)+":"+Value(b.Password, s))...)
	}
	var texts []string
	for _, e := range encoded {
		texts = append(texts, escapedForms(e)...)
	}
	lowerHex := hex.EncodeToString([]byte(s))
	texts = append(texts, lowerHex, strings.ToUpper(lowerHex))
	if in := api.Inject; in.Header != "" {
		texts = append(texts, Value(in.Template, s))
	}
	forms := make([]form, 0, len(texts)+2*len(encoded))
	for _, t := range texts {
		forms = append(forms, form{t, Redacted})
	}
	for _, e := range encoded {
		for _, order := range []byteOrder{binary.LittleEndian, binary.BigEndian} {
			forms = append(forms, form{utf16Bytes(e, order), utf16Bytes(Redacted, order)})
		}
	}
	slices.SortFunc(forms, func(a, b form) int {
		return cmp.Or(cmp.Compare(len(b.old), len(a.old)), strings.Compare(a.old, b.old))
	})
	return slices.CompactFunc(forms, func(a, b form) bool { return a.old == b.old })
}

// base64Forms returns s in base64 and base64url, padded and not, and the part of each that
// s alone decides when s is inside a longer text, at any offset: the characters whose six
// bits all come from s.
func base64Forms(s string) []string {
	var forms []string
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		forms = append(forms, enc.EncodeToString([]byte(s)), enc.WithPadding(base64.NoPadding).EncodeToString([]byte(s)))
		for shift := range 3 {
			shifted := enc.WithPadding(base64.NoPadding).EncodeToString([]byte(strings.Repeat("\x00", shift) + s))
			first, end := (8*shift+5)/6, 8*(shift+len(s))/6
			if core := shifted[first:end]; len(core) >= len(s) {
				forms = append(forms, core)
			}
		}
	}
	return forms
}

// escapedForms returns s as it is, percent-encoded, and escaped in a JSON string and in
// HTML, as common encoders write each.
func escapedForms(s string) []string {
	forms := []string{s}
	for _, p := range []string{url.QueryEscape(s), url.PathEscape(s), percentEncode(s)} {
		forms = append(forms, p, lowerHexEscapes(p))
	}
	return append(append(forms, jsonForms(s)...), htmlForms(s)...)
}

// percentEncode returns s with every byte outside RFC 3986's unreserved characters
// percent-encoded (JavaScript's encodeURIComponent, Python's quote with safe="").
func percentEncode(s string) string {
	var b strings.Builder
	for i := range len(s) {
		if c := s[i]; c < utf8.RuneSelf && (isAlphanumeric(rune(c)) || strings.IndexByte("-._~", c) >= 0) {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// lowerHexEscapes returns the percent-encoded p with lower-case hex digits, as some
// encoders write them (%2f for %2F).
func lowerHexEscapes(p string) string {
	b := []byte(p)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			copy(b[i+1:i+3], bytes.ToLower(b[i+1:i+3]))
		}
	}
	return string(b)
}

// jsonForms returns s inside a JSON string, without the quotes, as Go (which escapes <, >
// and & too), JavaScript (only what JSON requires), PHP (\/ for /, and \uXXXX beyond
// ASCII unless told not to) and Python (\uXXXX beyond ASCII) write it, and with upper-case
// hex digits.
func jsonForms(s string) []string {
	quoted, _ := json.Marshal(s)
	forms := []string{string(quoted[1 : len(quoted)-1])}
	for _, style := range []jsonStyle{{}, {slash: true, ascii: true}, {slash: true}, {ascii: true}, {ascii: true, upper: true}} {
		forms = append(forms, style.escape(s))
	}
	return forms
}

// jsonStyle is how an encoder escapes a JSON string beyond what JSON requires.
type jsonStyle struct {
	slash bool // "/" as "\/"
	ascii bool // every rune beyond ASCII as \uXXXX, or a surrogate pair of them
	upper bool // upper-case hex digits in \uXXXX
}

// escape returns s escaped for a JSON string, without the quotes. Invalid UTF-8 becomes
// U+FFFD, as encoding/json writes it.
func (st jsonStyle) escape(s string) string {
	var b strings.Builder
	u := func(r rune) {
		if st.upper {
			fmt.Fprintf(&b, `\u%04X`, r)
		} else {
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '/' && st.slash:
			b.WriteString(`\/`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || (st.ascii && r > unicode.MaxASCII && r <= 0xffff):
			u(r)
		case st.ascii && r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			u(r1)
			u(r2)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// htmlForms returns s escaped in HTML as Go's html.EscapeString, PHP's htmlspecialchars,
// Python's html.escape, XML and OWASP's rules write it, and with every character but
// letters and digits as a decimal entity and as a hex entity (both cases).
func htmlForms(s string) []string {
	forms := []string{html.EscapeString(s)}
	for _, quotes := range [][]string{
		{`"`, "&quot;", `'`, "&#039;"},                // PHP
		{`"`, "&quot;", `'`, "&#x27;"},                // Python
		{`"`, "&quot;", `'`, "&apos;"},                // XML, HTML5
		{`"`, "&quot;", `'`, "&#x27;", "/", "&#x2F;"}, // OWASP
	} {
		forms = append(forms, strings.NewReplacer(append([]string{"&", "&amp;", "<", "&lt;", ">", "&gt;"}, quotes...)...).Replace(s))
	}
	for _, format := range []string{"&#%d;", "&#x%X;", "&#x%x;"} {
		var b strings.Builder
		for _, r := range s {
			if isAlphanumeric(r) {
				b.WriteRune(r)
			} else {
				fmt.Fprintf(&b, format, r)
			}
		}
		forms = append(forms, b.String())
	}
	return forms
}

// isAlphanumeric reports whether r is an ASCII letter or digit.
func isAlphanumeric(r rune) bool {
	return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9'
}
