package templates_test

import (
	"testing"

	"github.com/urlflow/urlflow/internal/browsertest"
	"github.com/urlflow/urlflow/internal/locale"
)

// TestEveryPageHasNoAxeViolations runs axe-core in Chromium over every page of the gallery
// (every page state urlflow renders) in the light and the dark colour scheme on a desktop,
// on a phone at 390 px, with a deployment's brand (a theme, a logo) in both schemes, and in
// every other language (Arabic also themed and dark, right to left), and fails on any
// violation of WCAG 2.2 AA or best practice.
func TestEveryPageHasNoAxeViolations(t *testing.T) {
	srv := gallery(t)
	u := browsertest.Start(t).NewUser(t, "axe")
	type view struct {
		name, query string
		setUp       func()
	}
	views := []view{
		{"light", "", func() { u.SetColorScheme(t, "light") }},
		{"dark", "", func() { u.SetColorScheme(t, "dark") }},
		{"phone", "", func() { u.SetColorScheme(t, "light"); u.AsPhone(t) }},
		{"themed", "?brand=acme", func() { u.AsDesktop(t) }},
		{"themed-dark", "?brand=acme", func() { u.SetColorScheme(t, "dark") }},
		{"ar-themed-dark", "?brand=acme&lang=ar", func() {}},
	}
	for _, l := range locale.Default().Localizers()[1:] {
		views = append(views, view{l.Lang(), "?lang=" + l.Lang(), func() { u.SetColorScheme(t, "light") }})
	}
	for _, view := range views {
		view.setUp()
		for _, s := range samples() {
			t.Run(view.name+"/"+s.name, func(t *testing.T) {
				u.Navigate(t, srv.URL+"/gallery/"+s.name+view.query)
				for _, v := range u.Axe(t) {
					t.Error(v)
				}
			})
		}
	}
}
