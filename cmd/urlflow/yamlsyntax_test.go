package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// syntaxErrorForm is what syntaxError says: a place in the file, or none, then the error.
var syntaxErrorForm = regexp.MustCompile(`^(?:(\d+):(\d+):)? not YAML: .+`)

// FuzzSyntaxError: for any file that yaml.v3 refuses, syntaxError gives one line of the
// promised form, whose place is within the file.
func FuzzSyntaxError(f *testing.F) {
	for _, seed := range []string{
		"secrets:\n  - name: k\n    label: K\n   description: d\n",
		"addr: 127.0.0.1:0\nsecrets:\n  - name: k\n\tlabel: K\n",
		"public_url: \"https://x\nlog_level: debug\n",
		"secrets: [a, b\n",
		"addr:127.0.0.1:0\nlog_level: debug\n  x: y\n",
		"\t- a\n",
		"a: b: c\n",
		"- a\nb: c\n",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		var doc yaml.Node
		err := yaml.Unmarshal([]byte(raw), &doc)
		if err == nil {
			return
		}
		got := syntaxError([]byte(raw), err)
		m := syntaxErrorForm.FindStringSubmatch(got)
		if m == nil || strings.Contains(got, "\n") && !strings.Contains(err.Error(), "\n") {
			t.Fatalf("syntaxError(%q) = %q: not one line of the form LINE:COLUMN: not YAML: …", raw, got)
		}
		if m[1] != "" {
			line, _ := strconv.Atoi(m[1])
			if lines := strings.Count(raw, "\n") + 1; line < 1 || line > lines {
				t.Fatalf("syntaxError(%q) = %q: line %d of a file of %d lines", raw, got, line, lines)
			}
		}
	})
}
