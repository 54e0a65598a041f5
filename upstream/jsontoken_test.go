package upstream

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/urlflow/urlflow/state"
)

func TestScanJSONYieldsEveryTokenWithItsRange(t *testing.T) {
	t.Parallel()
	tests := []struct {
		text string
		want []string // kind:token; nil when scanJSON must fail
	}{
		{``, []string{}},
		{` {"a\/b": [1, -0.5e+3, true, null, false, "\u00e9\ud83d\ude00"]} `,
			[]string{`{:{`, `":"a\/b"`, `{::`, `{:[`, `0:1`, `{:,`, `0:-0.5e+3`, `{:,`, `t:true`, `{:,`, `t:null`, `{:,`, `t:false`, `{:,`, `":"\u00e9\ud83d\ude00"`, `{:]`, `{:}`}},
		{"1\n2\r\n\t\"x\"", []string{`0:1`, `0:2`, `":"x"`}},
		{`] 0 {`, []string{`{:]`, `0:0`, `{:{`}},
		{`"\""`, []string{`":"\""`}},
		{`"unterminated`, nil},
		{`"\x"`, nil},
		{`"\u12"`, nil},
		{"\"tab\there\"", nil},
		{`-`, nil},
		{`1.`, nil},
		{`1e`, nil},
		{`tru`, nil},
		{`hello`, nil},
		{`{"a":1} trailing`, nil},
	}
	for _, tt := range tests {
		got, err := tokens(tt.text)
		switch {
		case tt.want == nil && err == nil:
			t.Errorf("scanJSON(%q) = %q; want an error", tt.text, got)
		case tt.want != nil && err != nil:
			t.Errorf("scanJSON(%q): %v; want %q", tt.text, err, tt.want)
		case tt.want != nil && !slices.Equal(got, tt.want):
			t.Errorf("scanJSON(%q) =\n%q,\nwant\n%q", tt.text, got, tt.want)
		}
	}
}

// tokens returns the tokens of text as kind:token.
func tokens(text string) ([]string, error) {
	out := []string{}
	for tok, err := range scanJSON(text) {
		if err != nil {
			return out, err
		}
		out = append(out, fmt.Sprintf("%c:%s", tok.kind, text[tok.start:tok.end]))
	}
	return out, nil
}

func TestRedactedJSONStaysJSONAndChangesOnlyWhatShowsTheSecret(t *testing.T) {
	t.Parallel()
	api := newSlot(t, API{BaseURL: "https://api.example", Inject: Injection{Header: "Authorization"}}, nil).API
	tests := []struct {
		name, secret, body, want string
	}{
		{"a PHP-escaped string", testSecret,
			`{"key": "s3cr3t\/tok+en= x&y", "url": "https:\/\/a.example\/b"}`,
			`{"key": "[redacted]", "url": "https:\/\/a.example\/b"}`},
		{"inside a longer string, whose other escapes are written again", testSecret,
			`["\u0041 s3cr3t\/tok\u002ben= x&y\n", "\u0041"]`,
			`["A [redacted]\n", "\u0041"]`},
		{"a key", testSecret,
			`{"s3cr3t\/tok+en= x\u0026y": 1}`,
			`{"[redacted]": 1}`},
		{"a number", "4711",
			`[4711, 47110, 1.5e3, 4712]`,
			`["[redacted]", "[redacted]", 1.5e3, 4712]`},
		{"a number without the PIN's leading zeros", "0042",
			`{"pin":42,"n":420}`,
			`{"pin":"[redacted]","n":420}`},
		{"a literal", "null",
			`{"a":null}`,
			`{"a":"[redacted]"}`},
		{"the secret written as is", testSecret,
			`{"key":"s3cr3t/tok+en= x&y"}`,
			`{"key":"[redacted]"}`},
		{"nothing to redact, escapes and all", testSecret,
			`{"a":"\u0073\/t","b":[1.50,-0E+00]}`,
			`{"a":"\u0073\/t","b":[1.50,-0E+00]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := newRedactor(api, state.NewSecret(tt.secret)).redactText(tt.body)
			if got != tt.want {
				t.Errorf("redacted\n%s\nto\n%s\nwant\n%s", tt.body, got, tt.want)
			}
			if !json.Valid([]byte(got)) {
				t.Errorf("%s is no longer JSON", got)
			}
		})
	}
}

func FuzzScanJSON(f *testing.F) {
	for _, seed := range []string{
		``, `{"a":[1,-2.5e+3,true,false,null]}`, `"\u0041\/\ud83d\ude00"`, `"\ud800"`, "1 2\n\"x\"",
		`01`, `-`, `"abc`, `{"key":"s3cr3t\/tok+en= x&y"}`, `[4711]`, "\xff\"\xfe\"", `"a"b"`, "{\"a\":\"\x00\"}",
	} {
		f.Add(seed)
	}
	api := newSlot(f, API{BaseURL: "https://api.example", Inject: Injection{Header: "Authorization", Template: "Bearer {secret}"}}, nil).API
	r := newRedactor(api, state.NewSecret(testSecret))
	f.Fuzz(func(t *testing.T, text string) {
		var scanErr error
		end := 0
		for tok, err := range scanJSON(text) {
			if err != nil {
				scanErr = err
				break
			}
			// The tokens cover the text, in order, with whitespace between them.
			if tok.start < end || tok.end <= tok.start || tok.end > len(text) {
				t.Fatalf("token [%d,%d) after %d in %q", tok.start, tok.end, end, text)
			}
			if strings.Trim(text[end:tok.start], " \t\r\n") != "" {
				t.Fatalf("%q between tokens is not whitespace", text[end:tok.start])
			}
			end = tok.end
			checkToken(t, tok.kind, text[tok.start:tok.end])
		}
		if scanErr == nil && strings.Trim(text[end:], " \t\r\n") != "" {
			t.Fatalf("%q after the last token is not whitespace", text[end:])
		}
		if scanErr != nil && json.Valid([]byte(text)) {
			t.Fatalf("scanJSON refused the JSON %q: %v", text, scanErr)
		}
		// Redaction leaves a text without the secret as it is, byte for byte.
		if utf8.ValidString(text) && !r.shows(text) {
			if got := r.redactText(text); got != text {
				t.Fatalf("redactText changed %q, which does not show the secret, to %q", text, got)
			}
		}
	})
}

// checkToken fails t unless raw is a valid token of kind that round-trips: a string
// decodes as encoding/json decodes it, and encodeJSONString writes that text back to a
// token that decodes to it.
func checkToken(t *testing.T, kind tokenKind, raw string) {
	t.Helper()
	switch kind {
	case jsonString:
		var want string
		if err := json.Unmarshal([]byte(raw), &want); err != nil {
			t.Fatalf("string token %q does not decode: %v", raw, err)
		}
		if got := decodeJSONString(raw); got != want {
			t.Fatalf("decodeJSONString(%q) = %q, want %q", raw, got, want)
		}
		var back string
		if err := json.Unmarshal([]byte(encodeJSONString(want)), &back); err != nil || back != want {
			t.Fatalf("encodeJSONString(%q) = %q, which decodes to %q, %v", want, encodeJSONString(want), back, err)
		}
	case jsonNumber, jsonLiteral:
		if !json.Valid([]byte(raw)) {
			t.Fatalf("%c token %q is not JSON", kind, raw)
		}
	case jsonDelim:
		if len(raw) != 1 || !strings.Contains("{}[]:,", raw) {
			t.Fatalf("delimiter %q", raw)
		}
	default:
		t.Fatalf("token %q of kind %q", raw, kind)
	}
}
