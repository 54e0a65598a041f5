package zcursor

import (
	"errors"
	"strings"
	"testing"
)

func FuzzCursorsReadBackWhatTheyWrote(f *testing.F) {
	f.Add(int64(1764682505000), "GEZDGNBVGY3DOOBZ")
	f.Add(int64(0), "key with.dots and spaces")
	f.Fuzz(func(t *testing.T, at int64, member string) {
		accept := func(string) bool { return true }
		got, err := Parse(Position{at, member}.Cursor(), accept)
		if err != nil || got != (Position{at, member}) {
			t.Fatalf("(%d, %q) read back as %+v, %v", at, member, got, err)
		}
	})
}

func TestACursorNotHandedOutIsRefused(t *testing.T) {
	valid := func(m string) bool { return !strings.Contains(m, " ") }
	for _, c := range []string{"nope", "", Position{1, "has space"}.Cursor(), "MTIz"} {
		if _, err := Parse(c, valid); !errors.Is(err, ErrBadCursor) {
			t.Errorf("Parse(%q) = %v, want ErrBadCursor", c, err)
		}
	}
}
