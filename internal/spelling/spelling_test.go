package spelling

import "testing"

func TestDistanceAndNearest(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"lable", "label", 2}, {"addr", "adr", 1}, {"log_levl", "log_level", 1}, {"x", "", 1}, {"kitten", "sitting", 3}} {
		if got := Distance(c.a, c.b); got != c.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
	names := []string{"label", "pattern", "table"}
	if got := Nearest("lable", names, 3); got != "table" {
		t.Errorf("Nearest(lable) = %q, want table (1 edit; label is 2)", got)
	}
	if got := Nearest("lable", []string{"label", "lapel"}, 3); got != "label" {
		t.Errorf("Nearest(lable) among two at 2 edits = %q, want the first, label", got)
	}
	if got := Nearest("frobnicate", names, 3); got != "" {
		t.Errorf("Nearest(frobnicate) = %q, want none", got)
	}
}
