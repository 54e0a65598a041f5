package upstream

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"mime"
	"net/http"
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
//   - each of those percent-encoded in any way, found in the text as a URL decoder reads
//     it: any byte as %hh with digits in either case, in any mix with bytes as they are,
//     a space as %20 or "+" (see formSet.decodedSpans). What is replaced is the text as
//     written, escapes and all. A "%" that starts no escape ("%", "%4", "%zz") stays a
//     "%", and the text is decoded once, as a server decodes it;
//   - in a body that scans as JSON (one value, or several such as NDJSON), the secret in a
//     string token once its escapes are decoded, whichever escapes the API chose (\/,
//     \u00e9, \u0041, a surrogate pair), and percent-decoded as above; and in a number or
//     literal token (a PIN echoed as a number, also without its leading zeros). Only such
//     tokens are rewritten, so the JSON stays JSON; a body or token without the secret is
//     returned byte for byte;
//   - in a UTF-16 body: one that declares a UTF-16 charset, or is text and starts with a
//     byte order mark, and decodes to text, is converted to UTF-8 text and checked as such
//     (Response.ConvertedFrom says so; a model reads text, not base64); in any other body,
//     the UTF-16LE and UTF-16BE bytes of the secret and its base64 forms.
//
// What it does not find: a secret cut in pieces (across JSON tokens, lines, chunks or
// fields); one escaped by mixing encoders otherwise than percent-encoding over another
// (some characters as entities, others as JSON escapes), percent-encoded twice (%2564) or
// under another escaping (&#37;64), or partly percent-encoded after a "%" that makes an
// escape of its first two characters ("%de%6do" for "demo"); one inside JSON nested in a
// JSON string with escapes other than the common ones; a number written differently
// (1.234e3 for 1234); hashed, encrypted, reversed, case-changed or otherwise transformed
// forms; base32, quoted-printable and other encodings not listed; charsets other than
// UTF-8 and UTF-16 (UTF-32, or Latin-1 and other legacy charsets for a secret beyond
// ASCII); compressions other than gzip, deflate and br, which readBody refuses.
func (r *redactor) redact(api *API, want []string, resp *http.Response, body []byte) *Response {
	out := &Response{Status: resp.StatusCode, Headers: selectedHeaders(api, want, resp), BodyEncoding: "text"}
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
