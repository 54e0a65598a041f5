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
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/urlflow/urlflow/state"
)

// redact builds the Response, with every form of the secret replaced by [redacted] in the
// body (which readBody has already decompressed), the selected headers and Location.
//
// What it finds:
//   - the literal forms that secretForms lists: the secret as is and inside its header
//     template; percent-encoded (upper- or lower-case hex); escaped in a JSON string or in
//     HTML by the common encoders; hex; base64 and base64url, padded or not, of the secret,
//     of the user:password of basic authentication, and of the secret inside a longer text
//     (at any of the three alignments), these escaped too;
//   - in a body that scans as JSON (one value, or several such as NDJSON), the secret in a
//     string token once its escapes are decoded, whichever escapes the API chose (\/,
//     \u00e9, \u0041, a surrogate pair), and in a number or literal token (a PIN echoed as
//     a number, also without its leading zeros). Only such tokens are rewritten, so the
//     JSON stays JSON; a body or token without the secret is returned byte for byte;
//   - in a UTF-16 body: one that declares a UTF-16 charset, or is text and starts with a
//     byte order mark, and decodes to text, is converted to UTF-8 text and checked as such
//     (Response.ConvertedFrom says so; a model reads text, not base64); in any other body,
//     the UTF-16LE and UTF-16BE bytes of the secret and its base64 forms.
//
// What it does not find: a secret cut in pieces (across JSON tokens, lines, chunks or
// fields); one escaped by mixing encoders (some characters as entities, others
// percent-encoded), escaped twice, or inside JSON nested in a JSON string with escapes
// other than the common ones; a number written differently (1.234e3 for 1234); hashed,
// encrypted, reversed, case-changed or otherwise transformed forms; base32, quoted-printable
// and other encodings not listed; charsets other than UTF-8 and UTF-16 (UTF-32, or Latin-1
// and other legacy charsets for a secret beyond ASCII); compressions other than gzip,
// deflate and br, which readBody refuses.
func (r *redactor) redact(api *API, resp *http.Response, body []byte) *Response {
	out := &Response{Status: resp.StatusCode, Headers: selectedHeaders(api, resp), BodyEncoding: "text"}
	for name, v := range out.Headers {
		out.Headers[name] = r.text.replace(v)
	}
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		out.Redirected = out.Headers["Location"]
	}
	switch charset, text := utf16Text(resp.Header.Get("Content-Type"), body); {
	case charset != "":
		out.Body, out.ConvertedFrom = r.redactText(text), charset
	case utf8.Valid(body):
		out.Body = r.redactText(string(body))
	default:
		// Binary: redact the raw bytes, then encode.
		out.Body, out.BodyEncoding = base64.StdEncoding.EncodeToString([]byte(r.all.replace(string(body)))), "base64"
	}
	return out
}

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

// formSet replaces a set of forms in one pass over a text.
type formSet struct {
	forms    []form
	replacer *strings.Replacer
}

// newFormSet returns the set of forms, which are longest first: where several start at
// one place, the longest is replaced.
func newFormSet(forms []form) formSet {
	pairs := make([]string, 0, 2*len(forms))
	for _, f := range forms {
		pairs = append(pairs, f.old, f.new)
	}
	return formSet{forms: forms, replacer: strings.NewReplacer(pairs...)}
}

// replace returns s with every form in it replaced. A form that overlaps one replaced
// before it, further left, is cut by that replacement, so that none is left whole.
func (fs formSet) replace(s string) string {
	if len(fs.forms) == 0 {
		return s
	}
	return fs.replacer.Replace(s)
}

// in reports whether s has a form of the set.
func (fs formSet) in(s string) bool {
	return slices.ContainsFunc(fs.forms, func(f form) bool { return strings.Contains(s, f.old) })
}

// redactor replaces the forms of one secret.
type redactor struct {
	// all holds all the forms, longest first; text those that are valid UTF-8, for text,
	// where a form that is not could only match across characters.
	all, text formSet
	// number is the secret as a JSON number writes it, when the secret is digits with
	// leading zeros ("42" for the PIN "0042"); empty otherwise.
	number string
}

// newRedactor returns the redactor of secret as api carries it.
func newRedactor(api *API, secret state.Secret) *redactor {
	forms := redactions(api, secret)
	r := &redactor{
		all:  newFormSet(forms),
		text: newFormSet(slices.DeleteFunc(slices.Clone(forms), func(f form) bool { return !utf8.ValidString(f.old) })),
	}
	s := secret.Reveal()
	if trimmed := strings.TrimLeft(s, "0"); trimmed != s && trimmed != "" && strings.Trim(trimmed, "0123456789") == "" {
		r.number = trimmed
	}
	return r
}

// redactText replaces every form of the secret in a text body: first token by token, when
// the body scans as JSON, so that escaped forms are seen and the JSON stays JSON; then
// wherever a form is left (in what is not JSON, or across tokens).
func (r *redactor) redactText(body string) string {
	return r.text.replace(r.redactJSON(body))
}

// redactJSON returns body with its tokens redacted when body scans as JSON tokens, body
// unchanged otherwise. A string token that shows the secret once its escapes are decoded
// is written again, with JavaScript's minimal escaping, with [redacted] in its place; a
// number or literal token that shows it becomes the string "[redacted]". Tokens that do
// not show it stay as they are, byte for byte.
func (r *redactor) redactJSON(body string) string {
	var out strings.Builder
	done := 0
	for tok, err := range scanJSON(body) {
		if err != nil {
			return body
		}
		raw := body[tok.start:tok.end]
		redacted, ok := r.redactToken(tok.kind, raw)
		if !ok {
			continue
		}
		out.WriteString(body[done:tok.start])
		out.WriteString(redacted)
		done = tok.end
	}
	if done == 0 {
		return body
	}
	out.WriteString(body[done:])
	return out.String()
}

// redactToken returns the token raw of kind with the secret redacted, and whether it
// showed the secret.
func (r *redactor) redactToken(kind tokenKind, raw string) (string, bool) {
	switch kind {
	case jsonString:
		if !strings.Contains(raw, `\`) {
			// What it shows, it shows as written: redactText's pass over the whole body
			// replaces it there, and the JSON stays JSON, as the token has no quote to cut.
			return raw, false
		}
		s := decodeJSONString(raw)
		if redacted := r.text.replace(s); redacted != s {
			return encodeJSONString(redacted), true
		}
	case jsonNumber, jsonLiteral:
		if raw == r.number || r.text.in(raw) {
			return encodeJSONString(Redacted), true
		}
	}
	return raw, false
}

// byteOrder is a byte order of UTF-16.
type byteOrder interface {
	binary.ByteOrder
	binary.AppendByteOrder
}

// utf16Bytes returns s encoded in UTF-16 in order, without a byte order mark.
func utf16Bytes(s string, order byteOrder) string {
	var b []byte
	for _, u := range utf16.Encode([]rune(s)) {
		b = order.AppendUint16(b, u)
	}
	return string(b)
}

// utf16Text returns body converted to UTF-8 and the charset it was in ("utf-16le" or
// "utf-16be") when body is UTF-16 text: contentType declares a UTF-16 charset and body is
// not UTF-8 text already (valid, without NUL bytes), or body starts with a byte order mark
// (which goes) and contentType is absent or textual; and body decodes to text (even
// length, surrogates in pairs, no control characters but tab, line feed and carriage
// return). It returns "" otherwise, so that binary data stays binary.
func utf16Text(contentType string, body []byte) (charset, text string) {
	mediaType, params, _ := mime.ParseMediaType(contentType)
	switch declared := strings.ToLower(params["charset"]); {
	case bytes.HasPrefix(body, []byte{0xff, 0xfe}) && (declared != "" || textual(mediaType)):
		charset, body = "utf-16le", body[2:]
	case bytes.HasPrefix(body, []byte{0xfe, 0xff}) && (declared != "" || textual(mediaType)):
		charset, body = "utf-16be", body[2:]
	case utf8.Valid(body) && bytes.IndexByte(body, 0) < 0:
		return "", ""
	case declared == "utf-16le" || declared == "utf-16" && mostlyLittleEndian(body):
		charset = "utf-16le"
	case declared == "utf-16be" || declared == "utf-16":
		charset = "utf-16be"
	default:
		return "", ""
	}
	var order byteOrder = binary.BigEndian
	if charset == "utf-16le" {
		order = binary.LittleEndian
	}
	text, ok := decodeUTF16(body, order)
	if !ok {
		return "", ""
	}
	return charset, text
}

// textual reports whether mediaType, as mime.ParseMediaType returns it, is text or absent.
func textual(mediaType string) bool {
	switch {
	case mediaType == "", strings.HasPrefix(mediaType, "text/"),
		strings.HasSuffix(mediaType, "+json"), strings.HasSuffix(mediaType, "+xml"):
		return true
	}
	return slices.Contains([]string{"application/json", "application/xml", "application/javascript", "application/x-ndjson"}, mediaType)
}

// mostlyLittleEndian reports whether UTF-16 body without a byte order mark has more NUL
// bytes at odd offsets than at even ones, as little-endian text mostly in ASCII has. RFC
// 2781 says big-endian, but little-endian is what Windows writes.
func mostlyLittleEndian(body []byte) bool {
	var even, odd int
	for i, c := range body {
		if c == 0 && i%2 == 0 {
			even++
		} else if c == 0 {
			odd++
		}
	}
	return odd > even
}

// decodeUTF16 returns b, UTF-16 in order, as UTF-8 text, and whether it is text: an even
// length, surrogates in pairs, and no control characters but tab, line feed and carriage
// return.
func decodeUTF16(b []byte, order byteOrder) (string, bool) {
	if len(b)%2 != 0 {
		return "", false
	}
	var out strings.Builder
	for i := 0; i < len(b); i += 2 {
		r := rune(order.Uint16(b[i:]))
		if utf16.IsSurrogate(r) {
			if i+4 > len(b) {
				return "", false
			}
			if r = utf16.DecodeRune(r, rune(order.Uint16(b[i+2:]))); r == unicode.ReplacementChar {
				return "", false
			}
			i += 2
		}
		if unicode.IsControl(r) && r != '\t' && r != '\n' && r != '\r' {
			return "", false
		}
		out.WriteRune(r)
	}
	return out.String(), true
}
