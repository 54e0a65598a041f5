package templates_test

import (
	"strings"
	"testing"

	"github.com/urlflow/urlflow/internal/browsertest"
)

// TestEveryPageHasNoAxeViolations runs axe-core in Chromium over every page of the gallery
// (every page state urlflow renders) in the light and the dark colour scheme on a desktop,
// on a phone at 390 px, and with a deployment's brand (a theme, a logo) in both schemes,
// and fails on any violation of WCAG 2.2 AA or best practice.
func TestEveryPageHasNoAxeViolations(t *testing.T) {
	srv := gallery(t)
	u := browsertest.Start(t).NewUser(t, "axe")
	for _, view := range []struct {
		name  string
		setUp func()
	}{
		{"light", func() { u.SetColorScheme(t, "light") }},
		{"dark", func() { u.SetColorScheme(t, "dark") }},
		{"phone", func() { u.SetColorScheme(t, "light"); u.AsPhone(t) }},
		{"themed", func() { u.AsDesktop(t) }},
		{"themed-dark", func() { u.SetColorScheme(t, "dark") }},
	} {
		view.setUp()
		query := ""
		if strings.HasPrefix(view.name, "themed") {
			query = "?brand=acme"
		}
		for _, s := range samples() {
			t.Run(view.name+"/"+s.name, func(t *testing.T) {
				u.Navigate(t, srv.URL+"/gallery/"+s.name+query)
				for _, v := range u.Axe(t) {
					t.Error(v)
				}
			})
		}
	}
}
