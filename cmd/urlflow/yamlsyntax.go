package main

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	yaml4 "go.yaml.in/yaml/v4"
)

// syntaxError says where the YAML raw, which go.yaml.in/yaml/v3 refused with err, breaks and
// how to fix it: "LINE:COLUMN: not YAML: what; the fix".
//
// v3 names the line where the block it was reading began ("line 1: did not find expected
// '-' indicator" for a list item mis-indented on line 4). v4's parser, the same one with
// its positions kept, names both the place where it gave up and the start of what it was
// reading; the line to fix is the first for a mis-indented line or a tab, and the second
// for a quote or bracket left open. A missing space after a colon shows up lines later,
// so the lines up to there are searched for a key glued to its value.
func syntaxError(raw []byte, err error) string {
	var doc yaml4.Node
	var le *yaml4.LoadError
	if !errors.As(yaml4.Unmarshal(raw, &doc), &le) || le.Mark.Line == 0 {
		return " not YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")
	}
	mark, hint := le.Mark, ""
	switch {
	case strings.Contains(le.Message, "tab character") || tabAt(raw, le.Mark):
		hint = "indent with spaces, not tabs"
	case strings.HasPrefix(le.ContextMsg, "while scanning a quoted scalar"):
		mark, hint = le.ContextMark, "the quoted value that starts here is not closed: end it with the same quote"
	case strings.HasPrefix(le.ContextMsg, "while parsing a flow"):
		mark, hint = openBracket(raw, le.ContextMark), "the [ or { that starts here is not closed: end it with ] or }"
	case strings.HasPrefix(le.ContextMsg, "while scanning a simple key") || strings.HasPrefix(le.Message, "mapping values are not allowed"):
		if at, ok := gluedKey(raw, max(le.ContextMark.Line, 1), le.Mark.Line); ok {
			mark, hint = at, "put a space after the colon, as in key: value"
		} else {
			hint = `this line is indented deeper than a key can be here, or a value holds ": " (quote the value)`
		}
	case strings.Contains(le.ContextMsg, "block collection"):
		hint = "indent this line like the other items of the list (- name: ...), or like the keys of its item"
	case strings.Contains(le.ContextMsg, "block mapping"):
		hint = "indent this line like the other keys of its mapping"
	}
	mark = inFile(raw, mark)
	out := fmt.Sprintf("%d:%d: not YAML: %s", mark.Line, mark.Column, le.Message)
	if hint != "" {
		out += "; " + hint
	}
	return out
}

// tabAt reports whether raw has a tab at mark (the scanner's "found character that cannot
// start any token" for a tab that indents).
func tabAt(raw []byte, mark yaml4.Mark) bool {
	lines := strings.Split(string(raw), "\n")
	if mark.Line < 1 || mark.Line > len(lines) || mark.Column < 1 {
		return false
	}
	line := lines[mark.Line-1]
	return mark.Column <= len(line) && line[mark.Column-1] == '\t'
}

// gluedKeyPattern is a line that starts with a key followed by a colon and no space: YAML
// reads "name:value" as one value, not as a key.
var gluedKeyPattern = regexp.MustCompile(`^(\s*(?:-\s+)?[A-Za-z0-9_]+:)[^\s/:]`)

// gluedKey returns the position of the first key glued to its value on lines from to to.
func gluedKey(raw []byte, from, to int) (yaml4.Mark, bool) {
	lines := strings.Split(string(raw), "\n")
	for n := from; n <= to && n <= len(lines); n++ {
		if m := gluedKeyPattern.FindStringSubmatch(lines[n-1]); m != nil {
			return yaml4.Mark{Line: n, Column: len(m[1])}, true
		}
	}
	return yaml4.Mark{}, false
}

// openBracket returns the place of the [ or { that a flow left open: mark when it is one
// there, or else the last one before mark (the parser gives the end of the file for a flow
// left open at its end), or mark when there is none.
func openBracket(raw []byte, mark yaml4.Mark) yaml4.Mark {
	lines := strings.Split(string(raw), "\n")
	for n := min(mark.Line, len(lines)); n >= 1; n-- {
		line := lines[n-1]
		if n == mark.Line {
			line = line[:min(max(mark.Column, 0), len(line))]
		}
		if i := strings.LastIndexAny(line, "[{"); i >= 0 {
			return yaml4.Mark{Line: n, Column: i + 1}
		}
	}
	return mark
}

// inFile returns mark, or the end of the last line when the parser put it past the end
// of the file.
func inFile(raw []byte, mark yaml4.Mark) yaml4.Mark {
	lines := strings.Split(string(raw), "\n")
	if mark.Line <= len(lines) {
		return mark
	}
	return yaml4.Mark{Line: len(lines), Column: len(lines[len(lines)-1]) + 1}
}
