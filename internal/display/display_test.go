package display

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestClean(t *testing.T) {
	for _, tt := range []struct {
		name  string
		in    string
		limit int
		want  string
	}{
		{"plain text is kept", "Claude Code", 100, "Claude Code"},
		{"letters, marks, symbols and emoji are kept", "Café ☕ 日本語 v1.2-β", 100, "Café ☕ 日本語 v1.2-β"},
		{"whitespace collapses and is trimmed", " \t Claude\n\r\n  Code\u00a0\u3000v2 \u2028", 100, "Claude Code v2"},
		{"control characters go", "Cl\x00au\x1bde\x7f \u0085Code\u009b", 100, "Claude Code"},
		{"bidirectional controls go", "\u202eedoC edualC\u202c \u2066x\u2069\u200e\u200f\u061c\u202a\u202b\u202d\u2067\u2068", 100, "edoC edualC x"},
		{"zero-width and tag characters go", "Cl\u200bau\u200cde\u200d\u2060\ufeff\U000E0041\U000E0042\u00ad", 100, "Claude"},
		{"the zero-width joiner of an emoji sequence goes", "👩\u200d💻", 100, "👩💻"},
		{"variation selectors and Hangul fillers go", "❤\ufe0f\u3164\u115f\uffa0 ok\U000E0100", 100, "❤ ok"},
		{"private-use and unassigned code points go", "a\ue000b\U0010fffdc\U000e0080d\u0378e", 100, "abcde"},
		{"invalid UTF-8 becomes U+FFFD", "a\xffb", 100, "a\ufffdb"},
		{"a text at the limit is kept", "abcde", 5, "abcde"},
		{"a longer text ends with an ellipsis within the limit", "abcdef", 5, "abcd…"},
		{"runes are counted, not bytes", "ééééééé", 5, "éééé…"},
		{"no space before the ellipsis", "abc  def", 5, "abc…"},
		{"removed characters do not count", "a\u202eb\u202ec\u202ed\u202ee", 5, "abcde"},
		{"only invisible text is empty", "\u202e\u200b \t\x00", 10, ""},
		{"a limit of one", "ab", 1, "…"},
		{"a limit below one", "ab", 0, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := Clean(tt.in, tt.limit); got != tt.want {
				t.Errorf("Clean(%+q, %d) = %+q, want %+q", tt.in, tt.limit, got, tt.want)
			}
		})
	}
}

func TestCleanOfAHugeTextIsBounded(t *testing.T) {
	in := "\u202e" + strings.Repeat("Evil Client ", 10_000) // 120 KB
	got := Clean(in, 100)
	if n := utf8.RuneCountInString(got); n != 100 || !strings.HasSuffix(got, "…") || strings.ContainsRune(got, '\u202e') {
		t.Errorf("Clean of 120 KB = %+q (%d runes)", got, n)
	}
}

// FuzzClean checks Clean against its promise: valid UTF-8 within the limit, nothing that
// is not visible but single inner spaces, idempotent, and the same as a plain
// implementation that cleans the whole text before it cuts.
func FuzzClean(f *testing.F) {
	f.Add("Claude Code", uint8(100))
	f.Add("\u202eedoC\u202c  \t\n x\u2066\u200d👩\u200d💻\ufe0f", uint8(5))
	f.Add("a\xffb\xc0\x80 \u0085\u00a0c\U000E0041", uint8(3))
	f.Add(strings.Repeat("ab ", 50), uint8(100))
	f.Add("é é é", uint8(1))
	f.Fuzz(func(t *testing.T, s string, limit uint8) {
		got := Clean(s, int(limit))
		if !utf8.ValidString(got) {
			t.Fatalf("Clean(%+q, %d) = %+q is not valid UTF-8", s, limit, got)
		}
		if n := utf8.RuneCountInString(got); n > int(limit) {
			t.Fatalf("Clean(%+q, %d) = %+q has %d runes", s, limit, got, n)
		}
		for _, r := range got {
			if r != ' ' && (unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || unicode.IsSpace(r) || bidiControl(r)) {
				t.Fatalf("Clean(%+q, %d) = %+q keeps %U", s, limit, got, r)
			}
		}
		if strings.HasPrefix(got, " ") || strings.HasSuffix(got, " ") || strings.Contains(got, "  ") {
			t.Fatalf("Clean(%+q, %d) = %+q has spaces left", s, limit, got)
		}
		if again := Clean(got, int(limit)); again != got {
			t.Fatalf("Clean is not idempotent: %+q, then %+q", got, again)
		}
		if want := plainClean(s, int(limit)); got != want {
			t.Fatalf("Clean(%+q, %d) = %+q, want %+q", s, limit, got, want)
		}
	})
}

// bidiControl reports whether r is one of the characters that change the direction of the
// text around them.
func bidiControl(r rune) bool {
	return r >= '\u202a' && r <= '\u202e' || r >= '\u2066' && r <= '\u2069' || r == '\u200e' || r == '\u200f' || r == '\u061c'
}

// plainClean is what Clean does, written without care for long texts.
func plainClean(s string, limit int) string {
	if limit < 1 {
		return ""
	}
	kept := strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) || visible(r) {
			return r
		}
		return -1
	}, s) // strings.Map turns each invalid byte into U+FFFD, as range does
	words := strings.Join(strings.Fields(kept), " ")
	if r := []rune(words); len(r) > limit {
		return strings.TrimRight(string(r[:limit-1]), " ") + "…"
	}
	return words
}

func TestCapitalizedStartsASentence(t *testing.T) {
	for in, want := range map[string]string{
		"": "", "call set_secret again": "Call set_secret again", "This": "This", "émoi": "Émoi", "1 minute": "1 minute",
	} {
		if got := Capitalized(in); got != want {
			t.Errorf("Capitalized(%q) = %q, want %q", in, got, want)
		}
	}
}
