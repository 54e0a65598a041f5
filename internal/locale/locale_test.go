package locale

import (
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"go.yaml.in/yaml/v3"
)

// messageIDs returns the IDs of the catalog file name.
func messageIDs(t *testing.T, name string) []string {
	t.Helper()
	raw, err := fs.ReadFile(embedded, name)
	if err != nil {
		t.Fatal(err)
	}
	var messages map[string]any
	if err := yaml.Unmarshal(raw, &messages); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return slices.Sorted(maps.Keys(messages))
}

func TestEveryCatalogHasEveryMessageOfEnglishAndNoOther(t *testing.T) {
	english := messageIDs(t, "messages/en.yaml")
	files, _ := fs.Glob(embedded, "messages/*.yaml")
	for _, name := range files {
		ids := messageIDs(t, name)
		for _, id := range english {
			if !slices.Contains(ids, id) {
				t.Errorf("%s lacks %s", name, id)
			}
		}
		for _, id := range ids {
			if !slices.Contains(english, id) {
				t.Errorf("%s has %s, which English has not", name, id)
			}
		}
	}
	if _, err := Load(nil); err != nil {
		t.Fatal(err)
	}
}

// used matches a message read by the templates (t(ctx, "id", and tn, tm, tnm), by this
// package (l.T("id"), or by a handler (locale.T(ctx, "id").
var used = regexp.MustCompile(`\b(?:(?:t|tn|tm|tnm)\(ctx, |locale\.[TN]\([\w.()]+, |l\.[TN]\()"([a-z0-9_.]+)"|"(mcp\.[a-z0-9_.]+)"`)

func TestTheTemplatesUseEveryMessageAndOnlyMessagesEnglishHas(t *testing.T) {
	english := messageIDs(t, "messages/en.yaml")
	sources, _ := filepath.Glob("../../templates/*")
	for _, dir := range []string{".", "../../web", "../../web/pages", "../../web/admin", "../../web/browser"} {
		more, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		sources = append(sources, more...)
	}
	sources = append(sources, "../../mcp/words.go") // the words of MCP results
	seen := map[string]bool{}
	for _, name := range sources {
		if !strings.HasSuffix(name, ".templ") && !(strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_templ.go") && !strings.HasSuffix(name, "_test.go")) {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range used.FindAllStringSubmatch(string(src), -1) {
			id := m[1] + m[2] // the words of MCP results name their messages apart (mcp/words.go)
			seen[id] = true
			if !slices.Contains(english, id) {
				t.Errorf("%s reads %s, which the English catalog lacks", filepath.Base(name), id)
			}
		}
	}
	for _, id := range english {
		if !seen[id] {
			t.Errorf("no template reads %s", id)
		}
	}
}

func TestTheReadersChoiceThenTheirBrowsersThenTheDeploymentsDefault(t *testing.T) {
	c, err := load(fstest.MapFS{
		"messages/en.yaml": {Data: []byte("hello: Hello\nflows:\n  one: \"{{.Count}} flow\"\n  other: \"{{.Count}} flows\"\n")},
		"messages/de.yaml": {Data: []byte("hello: Hallo\nflows:\n  one: \"{{.Count}} Ablauf\"\n  other: \"{{.Count}} Abläufe\"\n")},
		"messages/ar.yaml": {Data: []byte("hello: مرحبا\n")},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		chosen, accept, lang, dir, hello string
	}{
		{"", "", "en", "ltr", "Hello"},
		{"", "de-AT,de;q=0.9,en;q=0.5", "de", "ltr", "Hallo"},
		{"", "fr-FR,fr;q=0.9", "en", "ltr", "Hello"},
		{"", "fr;q=0.9,ar;q=0.8", "ar", "rtl", "مرحبا"},
		{"en", "de", "en", "ltr", "Hello"},
		{"de", "en", "de", "ltr", "Hallo"},
		{"not a tag!", "de", "de", "ltr", "Hallo"},
		{"", "*;q=0,de;q=x", "en", "ltr", "Hello"},
	} {
		l := c.Negotiate(tc.chosen, tc.accept)
		if l.Lang() != tc.lang || l.Dir() != tc.dir || l.T("hello", nil) != tc.hello {
			t.Errorf("chosen %q, Accept-Language %q: %s %s %q, want %s %s %q", tc.chosen, tc.accept, l.Lang(), l.Dir(), l.T("hello", nil), tc.lang, tc.dir, tc.hello)
		}
	}
	de := c.Negotiate("de", "")
	if one, many := de.N("flows", 1, nil), de.N("flows", 3, nil); one != "1 Ablauf" || many != "3 Abläufe" {
		t.Errorf("plurals: %q, %q", one, many)
	}
	if got := c.Negotiate("ar", "").N("flows", 2, nil); got != "2 flows" {
		t.Errorf("a message Arabic lacks: %q, want English's", got)
	}

	german, err := c.WithDefault("de")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ chosen, accept, lang string }{
		{"", "", "de"}, {"", "fr-FR", "de"}, {"", "ar", "ar"}, {"en", "", "en"}, {"", "en-US", "en"},
	} {
		if got := german.Negotiate(tc.chosen, tc.accept).Lang(); got != tc.lang {
			t.Errorf("German by default: chosen %q, Accept-Language %q: %s, want %s", tc.chosen, tc.accept, got, tc.lang)
		}
	}
	if got := c.Negotiate("", "").Lang(); got != "en" {
		t.Errorf("WithDefault changed the catalog it was called on: %s", got)
	}
	if _, err := c.WithDefault("fr"); err == nil || !strings.Contains(err.Error(), "en, ar, de") {
		t.Errorf("a default the catalog lacks: %v", err)
	}
}
