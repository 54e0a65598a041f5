package brand

import (
	"bytes"
	"fmt"
)

// scheme is one colour scheme of the pages: the colours of urlflow.css that an accent
// meets, and the two colours that can be written on it.
type scheme struct {
	name string
	// field is the configuration's name of the scheme's accent.
	field string
	// surface, surface2 and background are the colours links sit on.
	surface, surface2, background color
	// onAccent are the candidates for text on the accent, the better one is taken.
	onAccent []color
	// hover is what the accent mixes with for a button under the pointer, and by how much;
	// soft is how much of the surface makes the accent's pale tint (info notices).
	hover     color
	hoverMix  float64
	softMix   float64
	selector  string
	lighterOK bool // a colour that fails is to be made lighter (dark scheme), else darker
}

var (
	white = mustColor("#ffffff")
	black = mustColor("#000000")
	ink   = mustColor("#0b1020")

	light = scheme{name: "light", field: "branding.colors.accent", surface: white, surface2: mustColor("#f6f8fb"),
		background: mustColor("#f3f5f8"), onAccent: []color{white, ink}, hover: black, hoverMix: 0.2, softMix: 0.92, selector: ":root"}
	dark = scheme{name: "dark", field: "branding.colors.accent_dark", surface: mustColor("#171d2b"), surface2: mustColor("#1d2434"),
		background: mustColor("#0e131d"), onAccent: []color{ink, white}, hover: white, hoverMix: 0.25, softMix: 0.85,
		selector: "@media (prefers-color-scheme: dark) { :root", lighterOK: true}
)

// textContrast is what WCAG 1.4.3 asks of text: links, and a button's label on the accent.
const textContrast = 4.5

// palette is what a scheme draws with its accent.
type palette struct {
	accent, hover, soft, softBorder, onAccent color
}

func (s scheme) palette(accent color) palette {
	p := palette{accent: accent, hover: accent.mix(s.hover, s.hoverMix), soft: accent.mix(s.surface, s.softMix),
		softBorder: accent.mix(s.surface, 0.7)}
	best := -1.0
	for _, c := range s.onAccent {
		if worst := min(contrast(c, p.accent), contrast(c, p.hover)); worst > best {
			best, p.onAccent = worst, c
		}
	}
	return p
}

// shortfall says what in p has less contrast than text needs, and "" when nothing does.
func (s scheme) shortfall(p palette) string {
	for _, pair := range []struct {
		fg, bg color
		what   string
	}{
		{p.accent, s.surface, "links on the page"},
		{p.accent, s.surface2, "links in a panel"},
		{p.accent, s.background, "links on the background"},
		{p.accent, p.soft, "links in a notice"},
		{p.onAccent, p.accent, "a button's label"},
		{p.onAccent, p.hover, "a button's label under the pointer"},
	} {
		if r := contrast(pair.fg, pair.bg); r < textContrast {
			return fmt.Sprintf("%s on %s has a contrast of %.1f:1 (%s); text needs %.1f:1 (WCAG 1.4.3)",
				pair.fg, pair.bg, r, pair.what, textContrast)
		}
	}
	return ""
}

// nearest returns the colour nearest to c, made darker or lighter as the scheme needs,
// whose palette has contrast enough, and false if none has.
func (s scheme) nearest(c color) (color, bool) {
	towards := black
	if s.lighterOK {
		towards = white
	}
	for step := range 21 {
		candidate := c.mix(towards, float64(step)*0.05)
		if s.shortfall(s.palette(candidate)) == "" {
			return candidate, true
		}
	}
	return color{}, false
}

// stylesheet returns the theme of accent and accentDark ("" for urlflow's own), and the
// problems of each: a colour that is not one, or whose palette lacks contrast. An empty
// accentDark is accent made light enough for the dark scheme.
func stylesheet(accent, accentDark string) ([]byte, []Problem) {
	if accent == "" && accentDark == "" {
		return nil, nil
	}
	var problems []Problem
	var sheet bytes.Buffer
	sheet.WriteString("/* The deployment's theme (branding.colors), over urlflow.css. */\n")
	for _, s := range []struct {
		scheme
		value string
	}{{light, accent}, {dark, accentDark}} {
		value := s.value
		if value == "" && s.name == "dark" {
			value = accent
		}
		if value == "" {
			continue // the dark accent alone: the light scheme keeps urlflow's
		}
		c, err := parseColor(value)
		if err != nil {
			if s.value != "" { // a derived one's accent has its problem already
				problems = append(problems, Problem{s.field, err.Error()})
			}
			continue
		}
		if s.value == "" { // derived: made light enough
			c, _ = s.nearest(c)
		} else if why := s.shortfall(s.palette(c)); why != "" {
			msg := fmt.Sprintf("%s in the %s colour scheme: %s", c, s.name, why)
			if better, ok := s.nearest(c); ok {
				msg += fmt.Sprintf("; %s would do", better)
			}
			problems = append(problems, Problem{s.field, msg})
			continue
		}
		p := s.palette(c)
		closing := "}\n"
		if s.name == "dark" {
			closing = "} }\n"
		}
		fmt.Fprintf(&sheet, "%s {\n  --accent: %s;\n  --accent-hover: %s;\n  --accent-soft: %s;\n  --accent-soft-border: %s;\n  --on-accent: %s;\n  --focus: %s;\n%s",
			s.selector, p.accent, p.hover, p.soft, p.softBorder, p.onAccent, p.accent, closing)
	}
	if len(problems) > 0 {
		return nil, problems
	}
	return sheet.Bytes(), nil
}
