// Package brand is an operator's own look for urlflow's pages: the product name, a logo,
// the accent colours and a support contact, read from the configuration file's branding:
// section without rebuilding. Colours are checked against the pages' own (WCAG 1.4.3 and
// 1.4.11), so that a theme cannot make the pages harder to read: one with too little
// contrast is refused, with a colour that would do.
package brand

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
)

// DefaultName is the product name of pages without branding.
const DefaultName = "urlflow"

// Config is the branding: section of the configuration file. Every field may be left out.
type Config struct {
	// ProductName replaces "urlflow" in the end users' pages (the header, the titles, the
	// text); the operators' pages keep urlflow's name and version.
	ProductName string `yaml:"product_name"`
	// Logo is the path of an SVG, PNG, JPEG or WebP file of at most 256 KiB, shown beside
	// the product name in the header.
	Logo   string `yaml:"logo"`
	Colors struct {
		// Accent colours links, buttons and the focus ring in the light colour scheme;
		// AccentDark in the dark one (derived from Accent when left out).
		Accent     string `yaml:"accent"`
		AccentDark string `yaml:"accent_dark"`
	} `yaml:"colors"`
	Support struct {
		// URL is where users get help: https:// or mailto:. Label is the link's text
		// (the pages' "Get help", in the reader's language, when left out).
		URL   string `yaml:"url"`
		Label string `yaml:"label"`
	} `yaml:"support"`
}

// Brand is a deployment's look, ready for the pages. The zero Brand is urlflow's own.
type Brand struct {
	name         string
	supportURL   string
	supportLabel string
	logo         []byte
	logoType     string
	stylesheet   []byte
}

// Problem is what is wrong with one field of the branding: section: Path is its path in
// the file ("branding.colors.accent").
type Problem struct {
	Path, Message string
}

func (p Problem) Error() string { return p.Path + ": " + p.Message }

// maxLogo bounds a logo's file.
const maxLogo = 256 << 10

// Load returns the brand that c describes, reading its logo with readFile, or every
// problem of c.
func Load(c Config, readFile func(string) ([]byte, error)) (*Brand, []Problem) {
	var problems []Problem
	b := &Brand{name: strings.TrimSpace(c.ProductName), supportLabel: strings.TrimSpace(c.Support.Label)}
	if len(b.name) > 40 || strings.ContainsAny(b.name, "\r\n\t") {
		problems = append(problems, Problem{"branding.product_name", "want one line of at most 40 characters, e.g. Acme Keys"})
	}
	if c.Support.URL != "" {
		u, err := url.Parse(c.Support.URL)
		switch {
		case err != nil || !(u.Scheme == "https" && u.Host != "" || u.Scheme == "mailto" && u.Opaque != ""):
			problems = append(problems, Problem{"branding.support.url", fmt.Sprintf("%q: want an https:// or mailto: URL, e.g. mailto:help@acme.example", c.Support.URL)})
		default:
			b.supportURL = u.String()
		}
	} else if b.supportLabel != "" {
		problems = append(problems, Problem{"branding.support.label", "a label without a url: add url, e.g. url: https://help.acme.example"})
	}
	if c.Logo != "" {
		if err := b.readLogo(c.Logo, readFile); err != nil {
			problems = append(problems, Problem{"branding.logo", err.Error()})
		}
	}
	sheet, colorProblems := stylesheet(c.Colors.Accent, c.Colors.AccentDark)
	b.stylesheet = sheet
	problems = append(problems, colorProblems...)
	if len(problems) > 0 {
		return nil, problems
	}
	return b, nil
}

// readLogo reads the logo at path and finds its type.
func (b *Brand) readLogo(path string, readFile func(string) ([]byte, error)) error {
	data, err := readFile(path)
	if err != nil {
		return fmt.Errorf("read the logo: %w", err)
	}
	if len(data) > maxLogo {
		return fmt.Errorf("%s is %d KiB: want at most %d KiB", path, len(data)>>10, maxLogo>>10)
	}
	switch sniffed := http.DetectContentType(data); {
	case strings.EqualFold(filepath.Ext(path), ".svg") && bytes.Contains(data, []byte("<svg")):
		b.logoType = "image/svg+xml"
	case sniffed == "image/png" || sniffed == "image/jpeg" || sniffed == "image/webp":
		b.logoType = sniffed
	default:
		return fmt.Errorf("%s is not an SVG, PNG, JPEG or WebP image (it reads as %s)", path, sniffed)
	}
	b.logo = data
	return nil
}

// Name is the product name the end users' pages show.
func (b *Brand) Name() string {
	if b == nil || b.name == "" {
		return DefaultName
	}
	return b.name
}

// Support returns where users get help and the link's text ("" for the pages' own
// words), or "" and "" when none is set.
func (b *Brand) Support() (href, label string) {
	if b == nil || b.supportURL == "" {
		return "", ""
	}
	return b.supportURL, b.supportLabel
}

// The paths where the server answers ServeLogo and ServeStylesheet.
const (
	LogoPath       = "/brand/logo"
	StylesheetPath = "/brand/theme.css"
)

// LogoURL is the path of the logo with its version, and "" without a logo.
func (b *Brand) LogoURL() string {
	if b == nil || b.logo == nil {
		return ""
	}
	return LogoPath + "?v=" + version(b.logo)
}

// StylesheetURL is the path of the theme's stylesheet with its version, and "" without
// colours.
func (b *Brand) StylesheetURL() string {
	if b == nil || b.stylesheet == nil {
		return ""
	}
	return StylesheetPath + "?v=" + version(b.stylesheet)
}

// version names content in URLs, so that a changed logo or theme is a new URL and the
// old ones can be kept by browsers.
func version(content []byte) string {
	sum := sha256.Sum256(content)
	return hex.EncodeToString(sum[:6])
}

// ServeLogo answers LogoPath with the logo, or 404 without one.
func (b *Brand) ServeLogo(w http.ResponseWriter, r *http.Request) {
	if b == nil {
		b = &Brand{}
	}
	serve(w, r, b.logo, b.logoType)
}

// ServeStylesheet answers StylesheetPath with the theme, or 404 without colours.
func (b *Brand) ServeStylesheet(w http.ResponseWriter, r *http.Request) {
	if b == nil {
		b = &Brand{}
	}
	serve(w, r, b.stylesheet, "text/css; charset=utf-8")
}

// serve answers with content of type, kept by browsers for a week (its URL changes with
// it), or 404 when there is none.
func serve(w http.ResponseWriter, r *http.Request, content []byte, contentType string) {
	if content == nil {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Cache-Control", "public, max-age=604800, immutable")
	w.Write(content)
}
