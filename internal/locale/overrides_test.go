package locale

import (
	"errors"
	"strings"
	"testing"
)

func TestAnOperatorsWordingReplacesTheCatalogsInItsLanguageOnly(t *testing.T) {
	c, err := Load(Overrides{
		"en": {"layout.footer": "Stuck? Ask {{.Product}}'s team.", "time.in_about_minutes": map[string]any{"one": "{{.Count}} min", "other": "{{.Count}} mins"}},
		"de": {"meta.reviewed": "true"},
	})
	if err != nil {
		t.Fatal(err)
	}
	en, de := c.Negotiate("en", ""), c.Negotiate("de", "")
	if got := en.T("layout.footer", map[string]any{"Product": "Acme"}); got != "Stuck? Ask Acme's team." {
		t.Errorf("English override: %q", got)
	}
	if got := en.N("time.in_about_minutes", 2, nil); got != "2 mins" {
		t.Errorf("English plural override: %q", got)
	}
	if got := de.T("layout.footer", map[string]any{"Product": "Acme"}); strings.HasPrefix(got, "Stuck") {
		t.Errorf("German took English's override: %q", got)
	}
	if !de.Reviewed() {
		t.Error("an operator who reviewed German cannot say so")
	}
	if got := Default().Negotiate("en", "").T("layout.need_help", nil); got != "Need help?" {
		t.Errorf("the embedded catalogs changed: %q", got)
	}
}

func TestAnOverrideThatDoesNotFitIsRefusedWithEveryProblem(t *testing.T) {
	_, err := Load(Overrides{
		"xx": {"layout.need_help": "?"},
		"en": {
			"layout.nede_help":      "typo",
			"layout.footer":         "{{.Produkt}} keeps secrets",
			"layout.need_help":      "{{ printf \"%s\" .Product }}",
			"time.in_about_minutes": map[string]any{"some": "x"},
			"layout.sign_out":       42,
		},
	})
	var problems OverrideProblems
	if !errors.As(err, &problems) {
		t.Fatalf("err %v, want OverrideProblems", err)
	}
	got := err.Error()
	for _, want := range []string{
		"xx: no catalog of this language; the languages are en, ",
		"en: layout.nede_help: no such message",
		"en: layout.footer: {{.Produkt}}: the message has no such placeholder; it has {{.Product}}",
		"en: layout.need_help: want placeholders written as {{.Name}}",
		"en: time.in_about_minutes: some: want a plural form",
		"en: layout.sign_out: want a text",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems do not say %q:\n%s", want, got)
		}
	}
}
