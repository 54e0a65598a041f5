package doclinks

import (
	"fmt"
	"maps"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/urlflow/urlflow/internal/spelling"
)

// TestEveryLinkInTheDocsResolves: every link of README.md, docs/*.md and e2e's READMEs points
// to a file of the repository that exists and, with an #anchor, to a heading of that file;
// an absolute http(s) link parses and names a host (it is not fetched).
func TestEveryLinkInTheDocsResolves(t *testing.T) {
	root := moduleRoot(t)
	c := newChecker(root)
	checked := 0
	for _, doc := range documents(t, root) {
		text, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(doc)))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range links(string(text)) {
			checked++
			if why := c.check(doc, l.target); why != "" {
				t.Errorf("%s:%d: link %q: %s", doc, l.line, l.target, why)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no link found: the documents were not read")
	}
	t.Logf("%d links checked", checked)
}

// TestEveryGuideIsLinkedFromTheREADME: README.md is the front page, and it links every page
// under docs/.
func TestEveryGuideIsLinkedFromTheREADME(t *testing.T) {
	root := moduleRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	linked := map[string]bool{}
	for _, l := range links(string(readme)) {
		if file, _, ok := localTarget("README.md", l.target); ok {
			linked[file] = true
		}
	}
	guides, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(guides) == 0 {
		t.Fatalf("no guide under docs/ (%v)", err)
	}
	for _, g := range guides {
		guide := "docs/" + filepath.Base(g)
		if !linked[guide] {
			t.Errorf("README.md: no link to the guide %s: add it, with a line saying what it holds, to the README's Documentation section", guide)
		}
	}
}

// TestAnchorFollowsGitHubsRule: a heading's anchor is its text in lower case, with spaces
// turned into '-' and punctuation other than '-' and '_' removed.
func TestAnchorFollowsGitHubsRule(t *testing.T) {
	for _, tc := range []struct{ heading, anchor string }{
		{"Operating urlflow", "operating-urlflow"},
		{"Production: `urlflow serve`", "production-urlflow-serve"},
		{"`urlflow hook`: secrets leave your machine through URL mode only", "urlflow-hook-secrets-leave-your-machine-through-url-mode-only"},
		{"The operators' pages (`/admin`)", "the-operators-pages-admin"},
		{"Recovery: status, retry, cancel", "recovery-status-retry-cancel"},
		{"`URLFLOW_REDIS_TOPOLOGY`", "urlflow_redis_topology"},
		{"`--oauth`: the SDK's own authorization", "--oauth-the-sdks-own-authorization"},
		{"See [the guide](docs/guide.md) first", "see-the-guide-first"},
		{"Café 2.0 — notes", "café-20--notes"},
		{"0. golang.org/x/oauth2 behaviour", "0-golangorgxoauth2-behaviour"},
	} {
		if got := anchor(tc.heading); got != tc.anchor {
			t.Errorf("anchor(%q) = %q, want %q", tc.heading, got, tc.anchor)
		}
	}
}

// TestAnchorsAreTheHeadingsOutsideCode: headings in fenced code are not headings, a repeated
// heading gets -1, -2, and setext headings and HTML anchors count.
func TestAnchorsAreTheHeadingsOutsideCode(t *testing.T) {
	text := "# Title\n\n## Notes\n\n```yaml\n# not: a heading\n```\n\n## Notes\n\nSetext heading\n--------------\n\n" +
		"<a name=\"kept\"></a>\n   ~~~\n## also not\n   ~~~\n"
	got := anchorsIn(text)
	want := []string{"title", "notes", "notes-1", "setext-heading", "kept"}
	for _, a := range want {
		if !got[a] {
			t.Errorf("anchor %q missing; have %v", a, got)
		}
	}
	for _, a := range []string{"not-a-heading", "also-not"} {
		if got[a] {
			t.Errorf("anchor %q found inside code", a)
		}
	}
}

// TestLinksAreFoundOutsideCode: inline links and images, across lines, with titles,
// reference definitions and autolinks are links; those in code, comments or escaped are not.
func TestLinksAreFoundOutsideCode(t *testing.T) {
	text := "text [a](x.md) and `[b](y.md)` and\n" + // 1
		"[multi\n" + // 2
		"line](z.md#h) ![img](i.png \"title\") [`code`](<with space.md>)\n" + // 3
		"```go\n" + // 4
		"[c](in-fence.md)\n" + // 5
		"```\n" + // 6
		"<!-- [d](comment.md) --> \\[not a link\\](w.md) [p](f(x).md)\n" + // 7
		"[ref]: https://example.com/ref\n" + // 8
		"<https://example.com/auto> ``[e](`x`.md)``\n" // 9
	want := []link{{1, "x.md"}, {3, "z.md#h"}, {3, "i.png"}, {3, "with space.md"}, {7, "f(x).md"},
		{8, "https://example.com/ref"}, {9, "https://example.com/auto"}}
	got := links(text)
	slices.SortStableFunc(got, func(a, b link) int { return a.line - b.line })
	if !slices.Equal(got, want) {
		t.Errorf("links:\n got %v\nwant %v", got, want)
	}
}

// TestBrokenLinksAreReported: the check says what is wrong with each kind of broken link.
func TestBrokenLinksAreReported(t *testing.T) {
	root := t.TempDir()
	for name, text := range map[string]string{
		"README.md":         "# Front\n",
		"docs/guide.md":     "# Guide\n\n## Running it\n",
		"docs/openapi.yaml": "openapi: 3.0.0\n",
	} {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := newChecker(root)
	for _, tc := range []struct{ doc, target, why string }{
		{"README.md", "docs/guide.md", ""},
		{"README.md", "docs/guide.md#running-it", ""},
		{"docs/guide.md", "../README.md#front", ""},
		{"docs/guide.md", "#guide", ""},
		{"docs/guide.md", "openapi.yaml", ""},
		{"README.md", "docs", ""},
		{"README.md", "https://example.com/x#y", ""},
		{"README.md", "docs/gide.md", "no such file docs/gide.md"},
		{"README.md", "docs/guide.md#runing-it", `no heading of docs/guide.md has the anchor #runing-it (did you mean #running-it?)`},
		{"docs/guide.md", "#Running-it", `no heading of docs/guide.md has the anchor #Running-it (did you mean #running-it?)`},
		{"docs/guide.md", "openapi.yaml#paths", "an #anchor into docs/openapi.yaml, which is not Markdown"},
		{"docs/guide.md", "../../elsewhere.md", "leaves the repository"},
		{"README.md", "https://exa mple.com/", "does not parse"},
		{"README.md", "https:///path", "names no host"},
		{"README.md", "ftp://example.com/", `scheme "ftp" is not one of http, https, mailto`},
		{"README.md", "", "empty target"},
	} {
		why := c.check(tc.doc, tc.target)
		if tc.why == "" && why != "" || tc.why != "" && !strings.Contains(why, tc.why) {
			t.Errorf("check(%s, %q) = %q, want %q", tc.doc, tc.target, why, tc.why)
		}
	}
}

// moduleRoot returns the directory of go.mod, found upwards from the test's directory.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// documents returns the Markdown files whose links are checked, relative to root and with
// slashes: README.md, the guides under docs/, and the READMEs and notes of e2e's own
// directories (not those of the npm packages installed there).
func documents(t *testing.T, root string) []string {
	t.Helper()
	var docs []string
	for _, pattern := range []string{"README.md", "docs/*.md", "docs/*/*.md", "e2e/*/README.md", "e2e/*/NOTES.md"} {
		matches, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(pattern)))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range matches {
			rel, err := filepath.Rel(root, m)
			if err != nil {
				t.Fatal(err)
			}
			if rel = filepath.ToSlash(rel); !strings.HasPrefix(rel, "e2e/node_modules/") {
				docs = append(docs, rel)
			}
		}
	}
	return docs
}

// link is a Markdown link's target as written (without angle brackets or title), and the
// line it is on.
type link struct {
	line   int
	target string
}

func (l link) String() string { return fmt.Sprintf("%d:%s", l.line, l.target) }

var (
	// inlineLink is [text](target "title") or ![alt](target): the text may hold one level of
	// brackets and span lines; the target may hold balanced parentheses, or be <in angle brackets>.
	inlineLink = regexp.MustCompile(`!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^<>\n]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)(?:\s+(?:"[^"]*"|'[^']*'|\([^()]*\)))?\s*\)`)
	// referenceDefinition is [label]: target.
	referenceDefinition = regexp.MustCompile(`(?m)^ {0,3}\[[^\]]+\]:[ \t]*(<[^<>\n]*>|\S+)`)
	// autolink is <https://...>.
	autolink = regexp.MustCompile(`<((?:https?|mailto):[^<>\s]+)>`)
)

// links returns the links of a Markdown text, outside code and HTML comments.
func links(text string) []link {
	masked := mask(text)
	var out []link
	add := func(start int, target string) {
		target = strings.TrimSuffix(strings.TrimPrefix(target, "<"), ">")
		out = append(out, link{line: 1 + strings.Count(text[:start], "\n"), target: target})
	}
	for _, re := range []*regexp.Regexp{inlineLink, referenceDefinition, autolink} {
		for _, m := range re.FindAllStringSubmatchIndex(masked, -1) {
			add(m[2], text[m[2]:m[3]])
		}
	}
	slices.SortStableFunc(out, func(a, b link) int { return a.line - b.line })
	return out
}

// mask returns text with fenced code blocks, code spans, HTML comments and backslash escapes
// blanked out (newlines kept), so that offsets in it are offsets in text.
func mask(text string) string {
	b := []byte(text)
	blank := func(from, to int) {
		for i := from; i < to; i++ {
			if b[i] != '\n' {
				b[i] = ' '
			}
		}
	}
	offset, code := 0, fenced(text)
	for i, line := range strings.SplitAfter(text, "\n") {
		if code[i] {
			blank(offset, offset+len(line))
		}
		offset += len(line)
	}
	for {
		s := string(b)
		start := strings.Index(s, "<!--")
		if start < 0 {
			break
		}
		end := strings.Index(s[start:], "-->")
		if end < 0 {
			end = len(s) - start - 3
		}
		blank(start, start+end+3)
	}
	for i := 0; i < len(b); i++ {
		switch {
		case b[i] == '\\' && i+1 < len(b) && b[i+1] < unicode.MaxASCII && (unicode.IsPunct(rune(b[i+1])) || unicode.IsSymbol(rune(b[i+1]))):
			blank(i, i+2)
			i++
		case b[i] == '`':
			n := 1
			for i+n < len(b) && b[i+n] == '`' {
				n++
			}
			if end := closingRun(b, i+n, n); end >= 0 {
				blank(i, end+n)
				i = end + n - 1
			} else {
				i += n - 1
			}
		}
	}
	return string(b)
}

// closingRun returns where a run of exactly n backticks starts at or after from, before the
// paragraph ends (a blank line), or -1.
func closingRun(b []byte, from, n int) int {
	for j := from; j < len(b); j++ {
		if b[j] == '\n' {
			k := j + 1
			for k < len(b) && (b[k] == ' ' || b[k] == '\t') {
				k++
			}
			if k >= len(b) || b[k] == '\n' {
				return -1
			}
			continue
		}
		if b[j] != '`' {
			continue
		}
		m := 1
		for j+m < len(b) && b[j+m] == '`' {
			m++
		}
		if m == n {
			return j
		}
		j += m - 1
	}
	return -1
}

// fenced reports, for each line of text (as strings.SplitAfter cuts it), whether it belongs
// to a fenced code block, its fences included. A fence may be indented, as in a list item.
func fenced(text string) []bool {
	lines := strings.SplitAfter(text, "\n")
	in := make([]bool, len(lines))
	var fence string // the opening fence's run, while inside a block
	for i, line := range lines {
		trimmed := strings.TrimSpace(line)
		if fence == "" {
			for _, c := range []string{"`", "~"} {
				if strings.HasPrefix(trimmed, c+c+c) {
					fence = c + strings.Repeat(c, len(trimmed)-len(strings.TrimLeft(trimmed, c))-1)
					in[i] = true
				}
			}
			continue
		}
		in[i] = true
		if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]) == "" {
			fence = ""
		}
	}
	return in
}

var (
	atxHeading    = regexp.MustCompile(`^ {0,3}#{1,6}(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$`)
	setextLine    = regexp.MustCompile(`^ {0,3}(?:=+|-+)[ \t]*$`)
	notParagraph  = regexp.MustCompile(`^\s*(?:$|#|[-*+>|<]|\d+[.)]\s)`)
	htmlAnchor    = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
	headingLink   = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	headingHTML   = regexp.MustCompile(`<[^>]+>`)
	trailingBreak = regexp.MustCompile(`\r?\n$`)
)

// anchorsIn returns the anchors of a Markdown text: those of its headings (ATX and setext,
// outside code; a repeated one gets -1, -2, ...) and of its HTML anchors.
func anchorsIn(text string) map[string]bool {
	lines := strings.SplitAfter(text, "\n")
	code := fenced(text)
	anchors := map[string]bool{}
	seen := map[string]int{}
	addHeading := func(heading string) {
		a := anchor(heading)
		if n := seen[a]; n > 0 {
			seen[a]++
			a = fmt.Sprintf("%s-%d", a, n)
		} else {
			seen[a] = 1
		}
		anchors[a] = true
	}
	for i, line := range lines {
		if code[i] {
			continue
		}
		line = trailingBreak.ReplaceAllString(line, "")
		if m := atxHeading.FindStringSubmatch(line); m != nil {
			addHeading(m[1])
		} else if i > 0 && !code[i-1] && setextLine.MatchString(line) && !notParagraph.MatchString(lines[i-1]) {
			addHeading(strings.TrimSpace(lines[i-1]))
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(mask(line), -1) {
			anchors[m[1]] = true
		}
	}
	return anchors
}

// anchor is GitHub's anchor of a heading: its text (links as their text, without HTML tags)
// in lower case, spaces turned into '-', and every character removed that is not a letter,
// a digit, '-' or '_'.
func anchor(heading string) string {
	heading = headingLink.ReplaceAllString(heading, "$1")
	heading = headingHTML.ReplaceAllString(heading, "")
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// checker checks links against the files under root, keeping each file's anchors once read.
type checker struct {
	root    string
	anchors map[string]map[string]bool
}

func newChecker(root string) *checker {
	return &checker{root: root, anchors: map[string]map[string]bool{}}
}

// localTarget returns the file (relative to the module root, with slashes) and the anchor
// that a relative link of doc points to; ok is false for an absolute link.
func localTarget(doc, target string) (file, fragment string, ok bool) {
	u, err := url.Parse(target)
	if err != nil || u.Scheme != "" || u.Host != "" {
		return "", "", false
	}
	switch {
	case u.Path == "":
		file = doc
	case strings.HasPrefix(u.Path, "/"): // GitHub reads it from the repository's root
		file = path.Clean(strings.TrimPrefix(u.Path, "/"))
	default:
		file = path.Join(path.Dir(doc), u.Path)
	}
	return file, u.Fragment, true
}

// check returns why the link target of doc does not resolve, or "".
func (c *checker) check(doc, target string) string {
	if target == "" {
		return "empty target"
	}
	u, err := url.Parse(target)
	if err != nil {
		return fmt.Sprintf("does not parse: %v", err)
	}
	if u.Scheme != "" || u.Host != "" {
		switch strings.ToLower(u.Scheme) {
		case "http", "https":
			if u.Host == "" {
				return "names no host"
			}
		case "mailto":
		default:
			return fmt.Sprintf("scheme %q is not one of http, https, mailto (write a relative link for a file of the repository)", u.Scheme)
		}
		return ""
	}
	file, fragment, _ := localTarget(doc, target)
	if file == ".." || strings.HasPrefix(file, "../") {
		return "leaves the repository"
	}
	info, err := os.Stat(filepath.Join(c.root, filepath.FromSlash(file)))
	if err != nil {
		return fmt.Sprintf("no such file %s", file)
	}
	if fragment == "" {
		return ""
	}
	if info.IsDir() || !strings.HasSuffix(file, ".md") {
		return fmt.Sprintf("an #anchor into %s, which is not Markdown", file)
	}
	anchors, ok := c.anchors[file]
	if !ok {
		text, err := os.ReadFile(filepath.Join(c.root, filepath.FromSlash(file)))
		if err != nil {
			return fmt.Sprintf("cannot read %s: %v", file, err)
		}
		anchors = anchorsIn(string(text))
		c.anchors[file] = anchors
	}
	if anchors[fragment] {
		return ""
	}
	why := fmt.Sprintf("no heading of %s has the anchor #%s", file, fragment)
	if near := nearest(fragment, anchors); near != "" {
		why += fmt.Sprintf(" (did you mean #%s?)", near)
	}
	return why
}

// nearest returns the anchor closest to want by edit distance, when it is close enough to be
// a likely typo or a renamed heading, or "" (the first in sorted order on a tie).
func nearest(want string, anchors map[string]bool) string {
	return spelling.Nearest(strings.ToLower(want), slices.Sorted(maps.Keys(anchors)), len(want)/3+1)
}
