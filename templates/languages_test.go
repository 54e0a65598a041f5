package templates_test

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/urlflow/urlflow/internal/browsertest"
	"github.com/urlflow/urlflow/internal/locale"
)

var pictures = flag.Bool("pictures", false, "save the pictures of one flow in every language to docs/screenshots/languages")

// TestOneFlowInEveryLanguage opens the pages of one secret flow (the consent page, the
// form, the confirmation) in every language: each says its language and direction, says
// when its translation awaits review, and keeps the CSP. With -pictures it saves them for
// docs/languages.md:
//
//	go test ./templates -run TestOneFlowInEveryLanguage -args -pictures
func TestOneFlowInEveryLanguage(t *testing.T) {
	srv := gallery(t)
	u := browsertest.Start(t).NewUser(t, "languages")
	dir := browsertest.ArtifactsDir(t)
	if *pictures {
		dir = filepath.Join("..", "docs", "screenshots", "languages")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range locale.Default().Localizers() {
		for _, page := range []string{"consent", "secret-form", "done"} {
			t.Run(l.Lang()+"/"+page, func(t *testing.T) {
				u.ClearConsole(t)
				u.Navigate(t, srv.URL+"/gallery/"+page+"?lang="+l.Lang())
				u.AssertNoCSPViolations(t)
				if got := browsertest.Evaluate[string](t, u, `document.documentElement.lang + " " + document.documentElement.dir`); got != l.Lang()+" "+l.Dir() {
					t.Errorf("lang and dir %q, want %q", got, l.Lang()+" "+l.Dir())
				}
				unreviewed := browsertest.Evaluate[bool](t, u, `document.querySelector("footer").textContent.includes(`+
					jsString(l.T("layout.unreviewed", nil))+`)`)
				if unreviewed == l.Reviewed() {
					t.Errorf("the footer says the translation awaits review: %v; the catalog says reviewed: %v", unreviewed, l.Reviewed())
				}
				u.SavePicture(t, filepath.Join(dir, l.Lang()+"-"+page+".jpg"), 600)
			})
		}
	}
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}
