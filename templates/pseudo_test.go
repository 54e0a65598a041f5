package templates_test

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/urlflow/urlflow/internal/locale"
)

// TestNoTextEscapesTheCatalog renders every page of the gallery in the pseudo-locale
// (locale.Pseudo: every message accented, between ⟦ and ⟧) and fails on any word that
// reads outside a message: text written into a template or a helper instead of the
// catalog. What the pages show of their data (a client's name, a label, a reason, which
// the gallery's samples hold) and the languages' own names in the switcher are not text
// of urlflow's.
func TestNoTextEscapesTheCatalog(t *testing.T) {
	pseudo, err := locale.Pseudo()
	if err != nil {
		t.Fatal(err)
	}
	// The samples' strings, the languages' names and the product's (and its version's, in
	// the footer): a word of the page is data when one of them has a word that begins so
	// (an ID is shown cut short).
	data := strings.Join(append(sampleStrings(t), "urlflow"), "\n")
	for _, l := range locale.Default().Localizers() {
		data += "\n" + l.Name()
	}
	isData := func(w string) bool { return regexp.MustCompile(`(^|[^A-Za-z])` + w).MatchString(data) }
	ctx := locale.With(context.Background(), pseudo)
	for _, s := range samples() {
		var b strings.Builder
		if err := s.page.Render(ctx, &b); err != nil {
			t.Fatal(err)
		}
		for _, text := range shownTexts(t, b.String()) {
			outside := withoutMessages(text)
			for _, w := range words.FindAllString(outside, -1) {
				if !isData(w) {
					t.Errorf("%s: %q is not in the catalog (in %q)", s.name, w, strings.TrimSpace(outside))
					break
				}
			}
		}
	}
}

// words matches a word of ASCII letters, which no pseudo-locale message leaves unaccented
// in full (it accents every vowel).
var words = regexp.MustCompile(`[A-Za-z]{2,}`)

// message matches a message of the pseudo-locale with no message inside it.
var message = regexp.MustCompile(`⟦[^⟦⟧]*⟧`)

// withoutMessages returns text without its messages, innermost first, as a message's
// placeholder may hold another.
func withoutMessages(text string) string {
	for {
		next := message.ReplaceAllString(text, " ")
		if next == text {
			return text
		}
		text = next
	}
}

// shownTexts returns the texts of a page that a person reads or hears: the text of the
// document (its title included) as one, since a message may hold tags, and the attributes
// that assistive technology reads.
func shownTexts(t *testing.T, page string) []string {
	doc, err := html.Parse(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	var document strings.Builder
	var texts []string
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		switch n.Type {
		case html.TextNode:
			document.WriteString(n.Data + " ")
		case html.ElementNode:
			for _, a := range n.Attr {
				if slices.Contains([]string{"aria-label", "title", "alt", "placeholder"}, a.Key) {
					texts = append(texts, a.Val)
				}
			}
			if n.Data == "svg" {
				return
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	return append(texts, document.String())
}

// sampleStrings returns every string in the gallery's source: the data the samples give
// the pages.
func sampleStrings(t *testing.T) []string {
	f, err := parser.ParseFile(token.NewFileSet(), "gallery_test.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	ast.Inspect(f, func(n ast.Node) bool {
		if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			if s, err := strconv.Unquote(lit.Value); err == nil {
				found = append(found, s)
			}
		}
		return true
	})
	return found
}
