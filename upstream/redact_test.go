package upstream

import (
	"bytes"
	"cmp"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/andybalholm/brotli"

	"github.com/urlflow/urlflow/state"
)

// echoSecret has what the encodings change: letters beyond ASCII and beyond the BMP
// (JSON's \u escapes, surrogate pairs, UTF-16), characters that HTML and URLs escape, and
// a length (25 bytes) that base64 pads, with "+" and "/" in its base64.
const echoSecret = `pä$$/w<o>r"d'+ &=€😀`

// ordinary is what an API echoes when it is not the secret: the same kinds of characters,
// so that every encoding has something to escape.
const ordinary = `tök/en<i>"x" 'y'+ &=€😃`

// echoingAPI is an API that sends back a value it was given, written its own way.
type echoingAPI struct {
	name string
	// secret is the secret of the call; echoSecret if empty. other is echoed instead of
	// it to check that a body without the secret comes back unchanged; ordinary if empty.
	secret, other string
	// write returns the body that quotes value, before any compression.
	write func(value string) []byte
	// contentType is the Content-Type; contentEncoding are the Content-Encoding lines,
	// and compress is what they do to the body (nothing if nil).
	contentType     string
	contentEncoding []string
	compress        func([]byte) []byte
	// plainTransport makes the call through a Transport that does not ask for gzip.
	plainTransport bool
	// json is true when the body is JSON (a line of JSON per line), which must stay JSON.
	json bool
	// converted is the charset urlflow converts the body from, "" if none.
	converted string
}

// echoingAPIs are APIs that echo the secret in each of the encodings that redaction knows.
func echoingAPIs() []echoingAPI {
	text := func(prefix string, encode func(string) string) func(string) []byte {
		return func(v string) []byte { return []byte(prefix + encode(v) + "\n") }
	}
	same := func(s string) string { return s }
	b64 := func(enc *base64.Encoding) func(string) string {
		return func(v string) string { return enc.EncodeToString([]byte(v)) }
	}
	utf16Body := func(order binary.AppendByteOrder, bom bool) func(string) []byte {
		return func(v string) []byte { return utf16Of("your key: "+v+"\n", order, bom) }
	}
	plain := text("your key: ", same)
	return append([]echoingAPI{
		{name: "PHP json_encode: / as \\/, \\uXXXX beyond ASCII", contentType: "application/json", json: true,
			write: func(v string) []byte { return []byte(`{"error":"invalid key ` + phpJSON(v) + `","code":401}`) }},
		{name: "Python json.dumps: \\uXXXX beyond ASCII", contentType: "application/json", json: true,
			write: func(v string) []byte { return []byte(`{"detail": "bad key: ` + pythonJSON(v) + `"}`) }},
		{name: "JSON with every character as \\uXXXX, ASCII too", contentType: "application/json", json: true,
			write: func(v string) []byte { return []byte(`["` + everyCharJSON(v) + `", "\u0041\/b"]`) }},
		{name: "a PIN as a JSON number", secret: "4711", other: "1234", contentType: "application/json", json: true,
			write: func(v string) []byte { return []byte(`{"pin":` + v + `,"ok":true,"n":1.5e+3}`) }},
		{name: "a PIN with leading zeros as a JSON number", secret: "0042", other: "0017", contentType: "application/json", json: true,
			write: func(v string) []byte { return []byte(`{"pin": ` + strings.TrimLeft(v, "0") + `}`) }},
		{name: "NDJSON, a line PHP-escaped", contentType: "application/x-ndjson", json: true,
			write: func(v string) []byte { return []byte("{\"n\":1}\n{\"key\":\"" + phpJSON(v) + "\"}\n") }},
		{name: "lower-case %xx, as a query", write: text("next: https://api.example/cb?key=", func(v string) string {
			return lowerPercent(url.QueryEscape(v))
		})},
		{name: "lower-case %xx, as a path", write: text("next: https://api.example/keys/", func(v string) string {
			return lowerPercent(url.PathEscape(v))
		})},
		{name: "HTML as Go escapes it (&amp; &#34;)", contentType: "text/html", write: text("<p>Key: ", html.EscapeString)},
		{name: "HTML as PHP's htmlspecialchars escapes it (&quot; &#039;)", contentType: "text/html", write: text("<p>Key: ", phpHTML)},
		{name: "HTML decimal entities (&#47;)", contentType: "text/html", write: text("<p>Key: ", func(v string) string {
			return entities(v, "&#%d;")
		})},
		{name: "HTML hex entities (&#x2F;)", contentType: "text/html", write: text("<p>Key: ", func(v string) string {
			return entities(v, "&#x%X;")
		})},
		{name: "hex, lower case", write: text("key: ", func(v string) string { return hex.EncodeToString([]byte(v)) })},
		{name: "hex, upper case", write: text("key: ", func(v string) string { return strings.ToUpper(hex.EncodeToString([]byte(v))) })},
		{name: "base64 without padding", write: text("key: ", b64(base64.RawStdEncoding))},
		{name: "base64url with padding", write: text("key: ", b64(base64.URLEncoding))},
		{name: "base64 of the request's header, the secret not on a 3-byte boundary", write: text("request: ", func(v string) string {
			return base64.StdEncoding.EncodeToString([]byte("Authorization: Bearer " + v))
		})},
		{name: "UTF-16LE with a byte order mark", contentType: "text/plain", write: utf16Body(binary.LittleEndian, true), converted: "utf-16le"},
		{name: "UTF-16BE with a byte order mark", write: utf16Body(binary.BigEndian, true), converted: "utf-16be"},
		{name: "UTF-16LE declared, without a byte order mark", contentType: "text/plain; charset=UTF-16LE",
			write: utf16Body(binary.LittleEndian, false), converted: "utf-16le"},
		{name: "UTF-16BE neither marked nor declared", contentType: "application/octet-stream", write: utf16Body(binary.BigEndian, false)},
		{name: "UTF-16LE of ASCII, neither marked nor declared", secret: "plainAsciiKey42", other: "anotherAscii17",
			contentType: "application/octet-stream", write: utf16Body(binary.LittleEndian, false)},
		{name: "gzip twice, in two Content-Encoding lines", write: plain, contentEncoding: []string{"gzip", "gzip"},
			compress: func(b []byte) []byte { return gzipped(gzipped(b)) }},
		{name: "x-gzip", write: plain, contentEncoding: []string{"x-gzip"}, compress: gzipped},
		{name: "gzip, to a Transport that does not ask for it", write: plain, contentEncoding: []string{"gzip"},
			compress: gzipped, plainTransport: true},
		{name: "deflate, zlib-wrapped", write: plain, contentEncoding: []string{"deflate"}, compress: zlibbed},
		{name: "deflate, raw", write: plain, contentEncoding: []string{"Deflate"}, compress: deflated},
		{name: "br", write: plain, contentEncoding: []string{"br"}, compress: brotlied},
		{name: "gzip, then br", write: plain, contentEncoding: []string{"gzip, br"},
			compress: func(b []byte) []byte { return brotlied(gzipped(b)) }},
	}, percentEchoingAPIs()...)
}

// percentEchoingAPIs are APIs that echo the secret percent-encoded as encoders mix escapes
// and bytes as they are, over other encodings too, and among malformed escapes.
func percentEchoingAPIs() []echoingAPI {
	text := func(prefix string, encode func(string) string) func(string) []byte {
		return func(v string) []byte { return []byte(prefix + encode(v) + "\n") }
	}
	return []echoingAPI{
		{name: "%xx for every byte, lower case (%64%65%6d%6f)", write: text("next: https://api.example/cb?key=", func(v string) string {
			return percentEncoded(v, everyByte, "xx")
		})},
		{name: "%XX for every byte, upper case", write: text("next: ", func(v string) string { return percentEncoded(v, everyByte, "XX") })},
		{name: "%Xx for every byte, digits of mixed case", write: text("next: ", func(v string) string { return percentEncoded(v, everyByte, "Xx") })},
		{name: "%xx for every other character, the rest as is", write: text("next: ", func(v string) string {
			return percentEncoded(v, everyOtherChar, "xX")
		})},
		{name: "%xx for the first byte of each character beyond ASCII, so not UTF-8", write: text("next: ", func(v string) string {
			return percentEncoded(v, func(s string, i int) bool { return s[i] >= utf8.RuneSelf && utf8.RuneStart(s[i]) }, "xx")
		})},
		{name: "a query: + for a space, %2B for +, %XX for every other character", write: text("next: /cb?key=", queryMix)},
		{name: "%xx for every byte in a JSON string", contentType: "application/json", json: true, write: func(v string) []byte {
			return []byte(`{"next":"https://api.example/cb?key=` + percentEncoded(v, everyByte, "xx") + `"}`)
		}},
		{name: "%XX for every other character in a JSON string that Python escapes", contentType: "application/json", json: true,
			write: func(v string) []byte {
				return []byte(`{"next": "` + pythonJSON(percentEncoded(v, everyOtherChar, "XX")) + `"}`)
			}},
		{name: "PHP's json_encode, then %xx for every other character", write: text("next: ", func(v string) string {
			return percentEncoded(phpJSON(v), everyOtherChar, "xx")
		})},
		{name: "PHP's htmlspecialchars, then %xx for every byte", contentType: "text/html", write: text("<a href=\"/cb?k=", func(v string) string {
			return percentEncoded(phpHTML(v), everyByte, "xx")
		})},
		{name: "base64, then %xx for every byte", write: text("key: ", func(v string) string {
			return percentEncoded(base64.StdEncoding.EncodeToString([]byte(v)), everyByte, "xx")
		})},
		{name: "hex, then %XX for every other byte", write: text("key: ", func(v string) string {
			return percentEncoded(hex.EncodeToString([]byte(v)), func(_ string, i int) bool { return i%2 == 0 }, "XX")
		})},
		{name: "malformed escapes around it: %, %4, %zz, %%", write: func(v string) []byte {
			return []byte("%zz %4%%" + percentEncoded(v, everyOtherChar, "xx") + "%4%")
		}},
		{name: "echoes that overlap, each encoded differently", secret: "ky-ky-ky-ky", other: "ky-ky-ky-kz", write: text("ids: ", func(v string) string {
			return percentEncoded(v+v[len(v)-3:], everyOtherChar, "Xx")
		})},
	}
}

func TestEchoedSecretIsRedactedInEveryEncoding(t *testing.T) {
	t.Parallel()
	for _, api := range echoingAPIs() {
		t.Run(api.name, func(t *testing.T) {
			t.Parallel()
			secret := cmp.Or(api.secret, echoSecret)
			t.Run("echoing the secret", func(t *testing.T) {
				t.Parallel()
				resp := callEchoing(t, api, secret, secret)
				body := responseBytes(t, resp)
				if found := revealed(body, secret); len(found) > 0 {
					t.Errorf("the body shows the secret %s:\n%q", strings.Join(found, ", "), body)
				}
				for name, v := range resp.Headers {
					if found := revealed([]byte(v), secret); len(found) > 0 {
						t.Errorf("header %s = %q shows the secret %s", name, v, strings.Join(found, ", "))
					}
				}
				if len(revealed(body, Redacted)) == 0 {
					t.Errorf("the body does not say %s:\n%q", Redacted, body)
				}
				if api.json {
					checkJSONHidesSecret(t, body, secret)
				}
				if resp.ConvertedFrom != api.converted {
					t.Errorf("ConvertedFrom = %q, want %q", resp.ConvertedFrom, api.converted)
				}
			})
			t.Run("echoing something else", func(t *testing.T) {
				t.Parallel()
				other := cmp.Or(api.other, ordinary)
				resp := callEchoing(t, api, secret, other)
				want, encoding := api.write(other), "text"
				switch {
				case api.converted != "":
					want = []byte(fromUTF16(t, want))
				case !utf8.Valid(want):
					want, encoding = []byte(base64.StdEncoding.EncodeToString(want)), "base64"
				}
				if resp.Body != string(want) || resp.BodyEncoding != encoding || resp.ConvertedFrom != api.converted {
					t.Errorf("got %s %q (converted from %q),\nwant %s %q (converted from %q)",
						resp.BodyEncoding, resp.Body, resp.ConvertedFrom, encoding, want, api.converted)
				}
			})
		})
	}
}

// callEchoing calls api, made a real server on loopback that echoes value, with secret,
// and returns the Response.
func callEchoing(t *testing.T, api echoingAPI, secret, value string) *Response {
	t.Helper()
	body := api.write(value)
	if api.compress != nil {
		body = api.compress(body)
	}
	server := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		if api.contentType != "" {
			w.Header().Set("Content-Type", api.contentType)
		}
		for _, c := range api.contentEncoding {
			w.Header().Add("Content-Encoding", c)
		}
		w.Write(body)
	})
	slot := newSlot(t, API{BaseURL: server.URL, Inject: Injection{Header: "Authorization", Template: "Bearer {secret}"}}, nil)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DisableCompression = api.plainTransport
	t.Cleanup(tr.CloseIdleConnections)
	resp, err := New(tr).Call(context.Background(), slot.API, state.NewSecret(secret), Request{Method: "GET", Path: "echo"})
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	return resp
}

// responseBytes returns the body of resp as the API's bytes, decoding base64.
func responseBytes(t *testing.T, resp *Response) []byte {
	t.Helper()
	if resp.BodyEncoding != "base64" {
		return []byte(resp.Body)
	}
	b, err := base64.StdEncoding.DecodeString(resp.Body)
	if err != nil {
		t.Fatalf("the body is not base64: %v", err)
	}
	return b
}

// checkJSONHidesSecret checks that body, JSON or a line of JSON per line, still is, and
// that no string in it shows secret, nor any number equals it.
func checkJSONHidesSecret(t *testing.T, body []byte, secret string) {
	t.Helper()
	for line := range bytes.Lines(body) {
		var v any
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			t.Errorf("the body is no longer JSON (%v):\n%s", err, body)
			return
		}
		for s := range jsonScalars(v) {
			n, isNumber := s.(json.Number)
			switch {
			case isNumber && sameNumber(string(n), secret):
				t.Errorf("the number %s is the secret", n)
			case !isNumber && strings.Contains(fmt.Sprint(s), secret):
				t.Errorf("%q shows the secret", s)
			}
		}
	}
}

// jsonScalars yields the keys, strings and numbers of a decoded JSON value.
func jsonScalars(v any) func(yield func(any) bool) {
	return func(yield func(any) bool) {
		var walk func(v any) bool
		walk = func(v any) bool {
			switch v := v.(type) {
			case map[string]any:
				for k, e := range v {
					if !yield(k) || !walk(e) {
						return false
					}
				}
			case []any:
				for _, e := range v {
					if !walk(e) {
						return false
					}
				}
			case string, json.Number:
				return yield(v)
			}
			return true
		}
		walk(v)
	}
}

// sameNumber reports whether the JSON number n has the value of secret, read as a number.
func sameNumber(n, secret string) bool {
	a, err1 := strconv.ParseFloat(n, 64)
	b, err2 := strconv.ParseFloat(secret, 64)
	return err1 == nil && err2 == nil && a == b
}

// revealed returns the ways body shows secret: as written, or once one of the common
// encodings is undone (percent-encoding, HTML entities, JSON escapes, hex, base64, UTF-16,
// compression). It knows nothing of how urlflow redacts.
func revealed(body []byte, secret string) []string {
	s := string(body)
	views := map[string]string{
		"as written":                 s,
		"percent-decoded":            percentDecode(s),
		"percent-decoded as a query": percentDecode(strings.ReplaceAll(s, "+", " ")),
		"HTML-unescaped":             html.UnescapeString(s),
		"JSON-unescaped":             jsonUnescape(s),
		"hex-decoded":                hexDecodeRuns(s),
		"base64-decoded":             base64DecodeRuns(s),
	}
	for off := range 2 {
		for _, order := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
			views[fmt.Sprintf("as %s UTF-16 from byte %d", order, off)] = utf16View(body[min(off, len(body)):], order)
		}
	}
	for name, d := range decompressors() {
		if b, err := io.ReadAll(d(bytes.NewReader(body))); err == nil && len(b) > 0 {
			for _, how := range revealed(b, secret) {
				views[name+"-decompressed, "+how] = secret
			}
		}
	}
	var found []string
	for how, v := range views {
		if strings.Contains(v, secret) {
			found = append(found, how)
		}
	}
	return found
}

// decompressors returns readers that undo each compression an API may use.
func decompressors() map[string]func(io.Reader) io.Reader {
	return map[string]func(io.Reader) io.Reader{
		"gzip": func(r io.Reader) io.Reader {
			z, err := gzip.NewReader(r)
			if err != nil {
				return &failing{err}
			}
			return z
		},
		"zlib": func(r io.Reader) io.Reader {
			z, err := zlib.NewReader(r)
			if err != nil {
				return &failing{err}
			}
			return z
		},
		"deflate": func(r io.Reader) io.Reader { return flate.NewReader(r) },
		"br":      func(r io.Reader) io.Reader { return brotli.NewReader(r) },
	}
}

// failing is a reader that fails.
type failing struct{ err error }

func (f *failing) Read([]byte) (int, error) { return 0, f.err }

var (
	percentEscape = regexp.MustCompile(`%[0-9a-fA-F]{2}`)
	jsonStringLit = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	hexRun        = regexp.MustCompile(`[0-9a-fA-F]{2,}`)
	base64Run     = regexp.MustCompile(`[A-Za-z0-9+/_-]{2,}`)
)

// percentDecode undoes every %xx in s, whatever the case of its digits.
func percentDecode(s string) string {
	return percentEscape.ReplaceAllStringFunc(s, func(e string) string {
		b, _ := hex.DecodeString(e[1:])
		return string(b)
	})
}

// jsonUnescape returns the text of every JSON string in s, escapes undone.
func jsonUnescape(s string) string {
	var out []string
	for _, lit := range jsonStringLit.FindAllString(s, -1) {
		var v string
		if json.Unmarshal([]byte(lit), &v) == nil {
			out = append(out, v)
		}
	}
	return strings.Join(out, "\n")
}

// hexDecodeRuns returns the bytes of every run of hex digits in s, from either offset.
func hexDecodeRuns(s string) string {
	var out []string
	for _, run := range hexRun.FindAllString(s, -1) {
		for off := range 2 {
			r := run[off:]
			b, _ := hex.DecodeString(r[:len(r)/2*2])
			out = append(out, string(b))
		}
	}
	return strings.Join(out, "\n")
}

// base64DecodeRuns returns the bytes of every run of base64 or base64url in s.
func base64DecodeRuns(s string) string {
	var out []string
	for _, run := range base64Run.FindAllString(s, -1) {
		run = strings.NewReplacer("-", "+", "_", "/").Replace(run)
		if len(run)%4 == 1 {
			run = run[:len(run)-1]
		}
		b, _ := base64.RawStdEncoding.DecodeString(run)
		out = append(out, string(b))
	}
	return strings.Join(out, "\n")
}

// utf16View returns b read as UTF-16 in order.
func utf16View(b []byte, order binary.ByteOrder) string {
	units := make([]uint16, len(b)/2)
	for i := range units {
		units[i] = order.Uint16(b[2*i:])
	}
	return string(utf16.Decode(units))
}

// fromUTF16 returns b, UTF-16 with or without a byte order mark, as UTF-8, for a test
// that knows it to be UTF-16.
func fromUTF16(t *testing.T, b []byte) string {
	t.Helper()
	var order binary.ByteOrder = binary.LittleEndian
	switch {
	case bytes.HasPrefix(b, []byte{0xfe, 0xff}):
		order, b = binary.BigEndian, b[2:]
	case bytes.HasPrefix(b, []byte{0xff, 0xfe}):
		b = b[2:]
	case b[0] == 0:
		order = binary.BigEndian
	}
	return utf16View(b, order)
}

// utf16Of returns s in UTF-16 in order, after a byte order mark if bom.
func utf16Of(s string, order binary.AppendByteOrder, bom bool) []byte {
	var b []byte
	if bom {
		b = order.AppendUint16(b, 0xfeff)
	}
	for _, u := range utf16.Encode([]rune(s)) {
		b = order.AppendUint16(b, u)
	}
	return b
}

// pythonJSON returns s in a JSON string as Python's json.dumps writes it: \uXXXX, lower
// case, beyond ASCII.
func pythonJSON(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteString(`\` + string(r))
		case r > 0x7e || r < 0x20:
			for _, u := range utf16.Encode([]rune{r}) {
				fmt.Fprintf(&b, `\u%04x`, u)
			}
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// phpJSON returns s in a JSON string as PHP's json_encode writes it: as Python does, and
// with / as \/.
func phpJSON(s string) string { return strings.ReplaceAll(pythonJSON(s), "/", `\/`) }

// everyCharJSON returns s in a JSON string with every character as \uXXXX, upper case.
func everyCharJSON(s string) string {
	var b strings.Builder
	for _, u := range utf16.Encode([]rune(s)) {
		fmt.Fprintf(&b, `\u%04X`, u)
	}
	return b.String()
}

// phpHTML returns s as PHP's htmlspecialchars(ENT_QUOTES) writes it.
func phpHTML(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&#039;").Replace(s)
}

// entities returns s with every character but ASCII letters and digits as an entity
// written with format.
func entities(s, format string) string {
	var b strings.Builder
	for _, r := range s {
		if r < 0x80 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			fmt.Fprintf(&b, format, r)
		}
	}
	return b.String()
}

// percentEncoded returns s with each byte that pick chooses (given s and the byte's index)
// written as %hh, the case of its two digits as digits says: "xx", "XX", "Xx" or "xX".
func percentEncoded(s string, pick func(s string, i int) bool, digits string) string {
	format := map[string]string{"xx": "%%%x%x", "XX": "%%%X%X", "Xx": "%%%X%x", "xX": "%%%x%X"}[digits]
	var b strings.Builder
	for i := range len(s) {
		if c := s[i]; pick(s, i) {
			fmt.Fprintf(&b, format, c>>4, c&0xf)
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// everyByte picks every byte for percentEncoded.
func everyByte(string, int) bool { return true }

// everyOtherChar picks, for percentEncoded, the bytes of every other character, the first
// one's among them.
func everyOtherChar(s string, i int) bool {
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return utf8.RuneCountInString(s[:i])%2 == 0
}

// queryMix returns s as a sloppy query encoder might: "+" for a space, %2B for "+", %XX for
// every other character and the rest as is.
func queryMix(s string) string {
	pick := func(s string, i int) bool { return s[i] == '+' || s[i] != ' ' && everyOtherChar(s, i) }
	return strings.ReplaceAll(percentEncoded(s, pick, "XX"), " ", "+")
}

// lowerPercent returns the percent-encoded s with lower-case hex digits.
func lowerPercent(s string) string {
	return percentEscape.ReplaceAllStringFunc(s, strings.ToLower)
}

func gzipped(b []byte) []byte {
	return compressed(b, func(w io.Writer) io.WriteCloser { return gzip.NewWriter(w) })
}

func zlibbed(b []byte) []byte {
	return compressed(b, func(w io.Writer) io.WriteCloser { return zlib.NewWriter(w) })
}

func deflated(b []byte) []byte {
	return compressed(b, func(w io.Writer) io.WriteCloser { z, _ := flate.NewWriter(w, flate.BestCompression); return z })
}

func brotlied(b []byte) []byte {
	return compressed(b, func(w io.Writer) io.WriteCloser { return brotli.NewWriter(w) })
}

// compressed returns b written through the compressor that newWriter returns.
func compressed(b []byte, newWriter func(io.Writer) io.WriteCloser) []byte {
	var buf bytes.Buffer
	w := newWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func TestSelectedHeadersAndLocationAreRedactedInEveryEncoding(t *testing.T) {
	t.Parallel()
	values := map[string]string{
		"X-Percent": "key=" + lowerPercent(url.QueryEscape(echoSecret)),
		"X-Html":    "<b>" + html.EscapeString(echoSecret) + "</b>",
		"X-Hex":     hex.EncodeToString([]byte(echoSecret)),
		"X-Base64":  base64.RawStdEncoding.EncodeToString([]byte(echoSecret)),
		"X-Each":    "key=" + percentEncoded(echoSecret, everyByte, "xx"),
	}
	location := "https://elsewhere.example/cb?key=" + lowerPercent(url.QueryEscape(echoSecret))
	api := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		for name, v := range values {
			w.Header().Set(name, v)
		}
		w.Header().Set("Location", location)
		w.WriteHeader(http.StatusFound)
	})
	slot := newSlot(t, API{BaseURL: api.URL, Inject: Injection{Query: "key"},
		ResponseHeaders: []string{"X-Percent", "X-Html", "X-Hex", "X-Base64", "X-Each"}}, nil)
	resp, err := newCaller(t).Call(context.Background(), slot.API, state.NewSecret(echoSecret), Request{Method: "GET", Path: "x"})
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	if len(resp.Headers) != len(values)+1 {
		t.Errorf("headers %q; want the %d selected and Location", resp.Headers, len(values))
	}
	for name, v := range resp.Headers {
		if found := revealed([]byte(v), echoSecret); len(found) > 0 || !strings.Contains(v, Redacted) {
			t.Errorf("header %s = %q shows the secret %s", name, v, strings.Join(found, ", "))
		}
	}
	if want := "https://elsewhere.example/cb?key=" + Redacted; resp.Redirected != want {
		t.Errorf("Redirected = %q, want %q", resp.Redirected, want)
	}
}

func TestSecretFormsListsEveryEncodingLongestFirst(t *testing.T) {
	t.Parallel()
	s := echoSecret
	goJSON, _ := json.Marshal(s)
	common := []string{
		s, url.QueryEscape(s), lowerPercent(url.QueryEscape(s)), url.PathEscape(s), lowerPercent(url.PathEscape(s)),
		string(goJSON[1 : len(goJSON)-1]), phpJSON(s), pythonJSON(s),
		html.EscapeString(s), phpHTML(s), entities(s, "&#%d;"), entities(s, "&#x%X;"), entities(s, "&#x%x;"),
		hex.EncodeToString([]byte(s)), strings.ToUpper(hex.EncodeToString([]byte(s))),
		base64.StdEncoding.EncodeToString([]byte(s)), base64.RawStdEncoding.EncodeToString([]byte(s)),
		base64.URLEncoding.EncodeToString([]byte(s)), base64.RawURLEncoding.EncodeToString([]byte(s)),
		lowerPercent(url.QueryEscape(base64.StdEncoding.EncodeToString([]byte(s)))),
		string(utf16Of(s, binary.LittleEndian, false)), string(utf16Of(s, binary.BigEndian, false)),
	}
	tests := []struct {
		name   string
		inject Injection
		extra  []string
	}{
		{"header", Injection{Header: "Authorization", Template: "Bearer {secret}"}, []string{"Bearer " + s}},
		{"query", Injection{Query: "key"}, nil},
		{"basic", Injection{Basic: &BasicAuth{Username: "user", Password: "{secret}"}}, []string{
			base64.StdEncoding.EncodeToString([]byte("user:" + s)),
			base64.RawURLEncoding.EncodeToString([]byte("user:" + s)),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			forms := secretForms(newSlot(t, API{BaseURL: "https://api.example", Inject: tt.inject}, nil).API, state.NewSecret(s))
			for _, want := range append(slices.Clone(common), tt.extra...) {
				if !slices.Contains(forms, want) {
					t.Errorf("secretForms lacks %q", want)
				}
			}
			if !slices.IsSortedFunc(forms, func(a, b string) int { return len(b) - len(a) }) {
				t.Errorf("secretForms is not longest first: %q", forms)
			}
			if len(slices.Compact(slices.Sorted(slices.Values(forms)))) != len(forms) {
				t.Errorf("secretForms has duplicates: %q", forms)
			}
		})
	}
}

func TestPercentEncodedSecretIsReplacedWhereItIsWritten(t *testing.T) {
	t.Parallel()
	api := newSlot(t, API{BaseURL: "https://api.example", Inject: Injection{Header: "Authorization"}}, nil).API
	tests := []struct {
		name, secret, body, want string
	}{
		{"every byte, lower case", "demo-key", "k=%64%65%6d%6f%2d%6b%65%79&x=1", "k=[redacted]&x=1"},
		{"every byte, upper case", "demo-key", "k=%64%65%6D%6F%2D%6B%65%79&x=1", "k=[redacted]&x=1"},
		{"bytes as is in another case, which is another text", "demo-key", "<%64e%6Do-%6bEY>", "<%64e%6Do-%6bEY>"},
		{"some bytes as is, the rest in either case", "demo-key", "<%64e%6Do-%6bey>", "<[redacted]>"},
		{"+ for a space and %2B for + in a query", testSecret, "?q=s3cr3t%2ftok%2Ben%3D+x%26y&n=1", "?q=[redacted]&n=1"},
		{"+ as itself and %20 for a space in a path", testSecret, "/s3cr3t/tok+en=%20x&y/", "/[redacted]/"},
		{"a % at the end", "demo-key", "%64%65%6d%6f-key%", "[redacted]%"},
		{"malformed escapes next to it", "demo-key", "%%64emo-key%6", "%[redacted]%6"},
		{"a malformed escape inside it", "demo-key", "%64%zzemo-key", "%64%zzemo-key"},
		{"a part of it only", "demo-key", "%64%65%6d%6f-ke", "%64%65%6d%6f-ke"},
		{"escaped twice, which is decoded once, as a URL decoder does", "demo-key", "%2564emo-key", "%2564emo-key"},
		{"echoes that overlap, as one", "ky-ky-ky", "(%6by-ky-k%79-ky)", "([redacted])"},
		{"echoes apart, each", "demo-key", "%64emo-key and demo-%6bey", "[redacted] and [redacted]"},
		{"in a JSON string with escapes of its own", testSecret, `{"k":"s%33cr3t\/tok\u002ben= x&y"}`, `{"k":"[redacted]"}`},
		{"a near miss, byte for byte", testSecret, "s%33cr3t/tok+en=%20x&z", "s%33cr3t/tok+en=%20x&z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := newRedactor(api, state.NewSecret(tt.secret)).redactText(tt.body); got != tt.want {
				t.Errorf("redacted %q to %q, want %q", tt.body, got, tt.want)
			}
		})
	}
}

// FuzzPercentEncodedSecretNeverSurvives checks that a secret, percent-encoded byte by byte
// in any mix (escapes in either case, bytes as they are, "+" for a space) and put between
// any two texts, shows neither as written nor percent-decoded in what redaction returns,
// nor, when the whole is a JSON string, once that is unescaped. The secrets have neither
// "[" nor "]" and are longer than Redacted, so that no replacement can make one up.
func FuzzPercentEncodedSecretNeverSurvives(f *testing.F) {
	f.Add("next: ", "\n", []byte{1}, uint8(0), false)
	f.Add(`k=`, `&n=1`, []byte{0, 2, 3, 4, 0x81}, uint8(1), true)
	f.Add("%zz %4%%", "%4%", []byte{1, 0}, uint8(2), false)
	f.Add("100%", "%", []byte{0, 0, 1}, uint8(2), false)
	f.Add("%%", "%2", []byte{0, 3}, uint8(3), true)
	f.Add("\xff\xfe", "\x00", []byte{2}, uint8(0), false)
	secrets := []string{echoSecret, testSecret, "demo-key-4711-Zq9x", "50%off-%41-k3y+x y"}
	api := newSlot(f, API{BaseURL: "https://api.example", Inject: Injection{Header: "Authorization", Template: "Bearer {secret}"}}, nil).API
	redactors := make([]*redactor, len(secrets))
	for i, s := range secrets {
		redactors[i] = newRedactor(api, state.NewSecret(s))
	}
	resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"text/plain"}}}
	f.Fuzz(func(t *testing.T, prefix, suffix string, mask []byte, which uint8, inJSON bool) {
		secret, r := secrets[int(which)%len(secrets)], redactors[int(which)%len(secrets)]
		body := prefix + percentMasked(secret, mask) + suffix
		if inJSON {
			body = `{"k": "` + pythonJSON(body) + `"}`
		}
		out := string(responseBytes(t, r.redact(api, nil, resp, []byte(body))))
		views := []string{out}
		if inJSON {
			views = append(views, jsonUnescape(out))
		}
		for _, v := range views {
			for _, decoded := range []string{v, percentDecode(v), percentDecode(strings.ReplaceAll(v, "+", " "))} {
				if strings.Contains(decoded, secret) {
					t.Fatalf("%q redacted to %q, which shows the secret %q as %q", body, out, secret, decoded)
				}
			}
		}
	})
}

// percentMasked returns s with its bytes written as mask says, mask[i%len(mask)] for byte
// i (as it is when mask is empty): its low bits as it is (0, 5, 6, 7) or as %xx, %XX, %Xx
// or %xX (1 to 4); with the high bit set, a space as "+".
func percentMasked(s string, mask []byte) string {
	var b strings.Builder
	for i := range len(s) {
		var m byte
		if len(mask) > 0 {
			m = mask[i%len(mask)]
		}
		switch digits := [...]string{"", "xx", "XX", "Xx", "xX", "", "", ""}[m%8]; {
		case s[i] == ' ' && m >= 0x80:
			b.WriteByte('+')
		case digits != "":
			b.WriteString(percentEncoded(s[i:i+1], everyByte, digits))
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// BenchmarkRedactPercentEncoded measures redaction of a text body of the default largest
// size written with every byte percent-encoded: ordinary text; near misses of the secret
// (all of it but its last byte, over and over), which make every form that starts alike be
// tried; and the secret itself over and over, each replaced.
func BenchmarkRedactPercentEncoded(b *testing.B) {
	api := newSlot(b, API{BaseURL: "https://api.example", Inject: Injection{Basic: &BasicAuth{Username: "user", Password: "{secret}"}}}, nil).API
	resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"text/plain"}}}
	every := func(s string) string { return percentEncoded(s, everyByte, "xx") }
	units := map[string]string{
		"text":        every("héllo wörld / + = &amp; 12345 "),
		"near misses": every(testSecret[:len(testSecret)-1]) + "+",
		"echoes":      every(testSecret) + "+",
	}
	for _, name := range []string{"text", "near misses", "echoes"} {
		body := []byte(strings.Repeat(units[name], DefaultMaxResponseBytes/len(units[name])))
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				newRedactor(api, secret()).redact(api, nil, resp, body)
			}
		})
	}
}

// Detection (checkRequest) looks for the forms that redaction finds, so it reads a request
// as a URL decoder does too, even where url.PathUnescape gives up on a malformed escape.
func TestARequestThatCarriesTheSecretPercentEncodedAmongMalformedEscapesIsRefused(t *testing.T) {
	t.Parallel()
	api := newSlot(t, API{BaseURL: "https://api.example", Inject: Injection{Header: "Authorization"}}, nil).API
	r := newRedactor(api, state.NewSecret("k3yK3yk3YxQ7mZp9"))
	for _, req := range []Request{
		{Method: "GET", Path: "/a%zz/%6b%33yK3yk3YxQ7mZp9"},
		{Method: "GET", Path: "/x", Query: url.Values{"q": {"100% %6B3yK3yk3YxQ7mZp%39"}}},
		{Method: "POST", Path: "/x", Body: `{"note": "50% off", "k": "k3yK3y%6b3YxQ7mZp9"}`},
	} {
		if err := r.checkRequest(req); !errors.Is(err, ErrSecretInRequest) {
			t.Errorf("checkRequest(%+v) = %v, want a refusal", req, err)
		}
	}
	if err := r.checkRequest(Request{Method: "GET", Path: "/a%zz/%6b%33yK3yk3YxQ7mZp8"}); err != nil {
		t.Errorf("checkRequest refused a request without the secret: %v", err)
	}
}

// TestATransportErrorShowsNoFormOfTheSecret: an error of the connection may quote what the
// API sent; it is redacted as a response's text is.
func TestATransportErrorShowsNoFormOfTheSecret(t *testing.T) {
	api := newSlot(t, API{BaseURL: "https://api.example", Inject: Injection{Header: "X-Key"}}, nil).API
	secret := state.NewSecret("demo-key")
	for _, quoted := range []string{"demo-key", "%64%65%6d%6f%2d%6b%65%79", "%64emo-%6Bey", "ZGVtby1rZXk="} {
		err := transportError(t.Context(), api, secret, errors.New(`malformed HTTP response "`+quoted+`"`))
		if !errors.Is(err, ErrUnreachable) || strings.Contains(err.Error(), quoted) || !strings.Contains(err.Error(), Redacted) {
			t.Errorf("the secret as %s: %v", quoted, err)
		}
	}
}
