package brand

import (
	"io/fs"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestContrastIsWCAGs(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want float64
	}{
		{"#000000", "#ffffff", 21},
		{"#ffffff", "#ffffff", 1},
		{"#767676", "#ffffff", 4.54}, // the lightest grey that passes on white
		{"#777", "#ffffff", 4.48},
		{"#2350c8", "#ffffff", 6.88}, // urlflow's own accent
	} {
		if got := contrast(mustColor(tc.a), mustColor(tc.b)); math.Abs(got-tc.want) > 0.01 {
			t.Errorf("contrast(%s, %s) = %.3f, want %.2f", tc.a, tc.b, got, tc.want)
		}
	}
}

// files is a file system of the test's logos.
func files(name string) ([]byte, error) {
	switch name {
	case "logo.svg":
		return []byte(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 10 10"><rect width="10" height="10"/></svg>`), nil
	case "logo.png":
		return []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), nil
	case "notes.txt":
		return []byte("not an image"), nil
	case "huge.png":
		return append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, maxLogo)...), nil
	}
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
}

func TestABrandWithEverything(t *testing.T) {
	var c Config
	c.ProductName, c.Logo = "Acme Keys", "logo.svg"
	c.Colors.Accent = "#0b6e4f"
	c.Support.URL = "mailto:help@acme.example"
	b, problems := Load(c, files)
	if problems != nil {
		t.Fatalf("problems: %v", problems)
	}
	if b.Name() != "Acme Keys" || !strings.HasPrefix(b.LogoURL(), LogoPath+"?v=") || !strings.HasPrefix(b.StylesheetURL(), StylesheetPath+"?v=") {
		t.Errorf("name %q, logo %q, stylesheet %q", b.Name(), b.LogoURL(), b.StylesheetURL())
	}
	if href, label := b.Support(); href != "mailto:help@acme.example" || label != "" {
		t.Errorf("support %q %q", href, label)
	}
	rec := httptest.NewRecorder()
	b.ServeStylesheet(rec, httptest.NewRequest(http.MethodGet, b.StylesheetURL(), nil))
	sheet := rec.Body.String()
	if !strings.Contains(sheet, ":root {\n  --accent: #0b6e4f;") || !strings.Contains(sheet, "@media (prefers-color-scheme: dark) { :root {") ||
		rec.Header().Get("Content-Type") != "text/css; charset=utf-8" {
		t.Errorf("stylesheet:\n%s", sheet)
	}
	// Every colour of the theme, in both schemes, has the contrast text needs.
	for _, s := range []scheme{light, dark} {
		start := strings.Index(sheet, s.selector+" {")
		accent := mustColor(sheet[start+len(s.selector)+15 : start+len(s.selector)+22])
		if why := s.shortfall(s.palette(accent)); why != "" {
			t.Errorf("%s scheme: %s", s.name, why)
		}
	}
	rec = httptest.NewRecorder()
	b.ServeLogo(rec, httptest.NewRequest(http.MethodGet, b.LogoURL(), nil))
	if rec.Header().Get("Content-Type") != "image/svg+xml" || !strings.Contains(rec.Body.String(), "<svg") {
		t.Errorf("logo answered %s %q", rec.Header().Get("Content-Type"), rec.Body.String())
	}
}

func TestNoBrandIsUrlflows(t *testing.T) {
	b, problems := Load(Config{}, files)
	var none *Brand
	for _, b := range []*Brand{b, none} {
		if problems != nil || b.Name() != "urlflow" || b.LogoURL() != "" || b.StylesheetURL() != "" {
			t.Errorf("%v: name %q, logo %q, stylesheet %q", problems, b.Name(), b.LogoURL(), b.StylesheetURL())
		}
		rec := httptest.NewRecorder()
		b.ServeStylesheet(rec, httptest.NewRequest(http.MethodGet, StylesheetPath, nil))
		if rec.Code != http.StatusNotFound {
			t.Errorf("a stylesheet without colours answered %d", rec.Code)
		}
	}
}

func TestABrandThatWouldHurtReadingIsRefusedWithAColourThatWouldDo(t *testing.T) {
	for _, tc := range []struct {
		name   string
		set    func(*Config)
		path   string
		saying []string
	}{
		{"a pale accent", func(c *Config) { c.Colors.Accent = "#ffcc00" }, "branding.colors.accent",
			[]string{"#ffcc00 in the light colour scheme", "links on the page", "text needs 4.5:1 (WCAG 1.4.3)", "would do"}},
		{"a dark accent for the dark scheme", func(c *Config) { c.Colors.Accent, c.Colors.AccentDark = "#0b6e4f", "#0b6e4f" },
			"branding.colors.accent_dark", []string{"in the dark colour scheme", "would do"}},
		{"not a colour", func(c *Config) { c.Colors.Accent = "green" }, "branding.colors.accent", []string{`"green" is not a colour`}},
		{"a logo that is not an image", func(c *Config) { c.Logo = "notes.txt" }, "branding.logo", []string{"not an SVG, PNG, JPEG or WebP"}},
		{"a logo too big", func(c *Config) { c.Logo = "huge.png" }, "branding.logo", []string{"want at most 256 KiB"}},
		{"a logo that is not there", func(c *Config) { c.Logo = "gone.svg" }, "branding.logo", []string{"read the logo", "not exist"}},
		{"a support page over http", func(c *Config) { c.Support.URL = "http://help.acme.example" }, "branding.support.url", []string{"want an https:// or mailto: URL"}},
		{"a label without a support URL", func(c *Config) { c.Support.Label = "Help" }, "branding.support.label", []string{"add url"}},
		{"a name on two lines", func(c *Config) { c.ProductName = "Acme\nKeys" }, "branding.product_name", []string{"one line"}},
	} {
		var c Config
		tc.set(&c)
		b, problems := Load(c, files)
		if b != nil || len(problems) != 1 || problems[0].Path != tc.path {
			t.Errorf("%s: brand %v, problems %v, want one at %s", tc.name, b, problems, tc.path)
			continue
		}
		for _, s := range tc.saying {
			if !strings.Contains(problems[0].Message, s) {
				t.Errorf("%s: %q does not say %q", tc.name, problems[0].Message, s)
			}
		}
		if i := strings.LastIndex(problems[0].Message, "; "); strings.HasSuffix(problems[0].Message, "would do") && i > 0 {
			suggested := strings.Fields(problems[0].Message[i+2:])[0]
			c, s := mustColor(suggested), light
			if tc.path == "branding.colors.accent_dark" {
				s = dark
			}
			if why := s.shortfall(s.palette(c)); why != "" {
				t.Errorf("%s: the suggested %s does not do: %s", tc.name, suggested, why)
			}
		}
	}
	if _, err := parseColor("#12345g"); err == nil {
		t.Error("#12345g read as a colour")
	}
}

// FuzzParseColor: whatever the configuration holds, a colour is refused or read as one that
// writes back as #rrggbb and reads again as itself.
func FuzzParseColor(f *testing.F) {
	for _, s := range []string{"#0b6e4f", "#fff", " #ABCDEF ", "#12345g", "0b6e4f", "#", "#ffff", "#-12345"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := parseColor(s)
		if err != nil {
			return
		}
		again, err := parseColor(c.String())
		if err != nil || again != c || len(c.String()) != 7 {
			t.Errorf("%q read as %s, which reads back as %s (%v)", s, c, again, err)
		}
	})
}
