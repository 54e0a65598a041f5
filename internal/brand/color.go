package brand

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// color is an sRGB colour, each channel from 0 to 255.
type color struct{ r, g, b float64 }

// parseColor reads a colour written #rgb or #rrggbb.
func parseColor(s string) (color, error) {
	hex, ok := strings.CutPrefix(strings.TrimSpace(s), "#")
	if ok && len(hex) == 3 {
		hex = string([]byte{hex[0], hex[0], hex[1], hex[1], hex[2], hex[2]})
	}
	n, err := strconv.ParseUint(hex, 16, 32)
	if !ok || len(hex) != 6 || err != nil {
		return color{}, fmt.Errorf("%q is not a colour: want #rrggbb or #rgb, e.g. #1f5fbf", s)
	}
	return color{float64(n >> 16), float64(n >> 8 & 0xff), float64(n & 0xff)}, nil
}

func mustColor(s string) color {
	c, err := parseColor(s)
	if err != nil {
		panic(err)
	}
	return c
}

func (c color) String() string {
	return fmt.Sprintf("#%02x%02x%02x", int(math.Round(c.r)), int(math.Round(c.g)), int(math.Round(c.b)))
}

// mix returns c with share (0 to 1) of other mixed in.
func (c color) mix(other color, share float64) color {
	return color{c.r + (other.r-c.r)*share, c.g + (other.g-c.g)*share, c.b + (other.b-c.b)*share}
}

// luminance is the relative luminance of c (WCAG 2.2, "relative luminance").
func (c color) luminance() float64 {
	channel := func(v float64) float64 {
		v /= 255
		if v <= 0.04045 {
			return v / 12.92
		}
		return math.Pow((v+0.055)/1.055, 2.4)
	}
	return 0.2126*channel(c.r) + 0.7152*channel(c.g) + 0.0722*channel(c.b)
}

// contrast is the contrast ratio of a and b (WCAG 2.2, "contrast ratio"), from 1 to 21.
func contrast(a, b color) float64 {
	la, lb := a.luminance(), b.luminance()
	if la < lb {
		la, lb = lb, la
	}
	return (la + 0.05) / (lb + 0.05)
}
