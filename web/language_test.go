package web

import (
	"net/http"
	"strings"
	"testing"
)

func TestPagesSayTheirLanguageAndVaryWithTheReaders(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	for _, accept := range []string{"", "de-DE,de;q=0.9", "ja", "ar;q=0.8,en;q=0.5"} {
		got := f.send(t, http.DefaultClient, request{method: http.MethodGet, path: "/", header: http.Header{"Accept-Language": {accept}}})
		// English is the only catalog yet: every reader gets it, and is told so.
		if got.Status != http.StatusOK || got.Header.Get("Content-Language") != "en" || !strings.Contains(got.Body, `<html lang="en" dir="ltr">`) ||
			!strings.Contains(strings.Join(got.Header.Values("Vary"), ","), "Accept-Language") {
			t.Errorf("Accept-Language %q: %d, Content-Language %q, Vary %q", accept, got.Status, got.Header.Get("Content-Language"), got.Header.Values("Vary"))
		}
	}
}
