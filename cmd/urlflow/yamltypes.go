package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// typeMismatch is how go.yaml.in/yaml/v3 words a value of the wrong type: "line 3: cannot
// unmarshal !!seq into string", with the value in backquotes for a scalar.
var typeMismatch = regexp.MustCompile("^line ([0-9]+): cannot unmarshal (!![a-z]+)(?: `(.*)`)? into (.+)$")

// typeErrors returns the decoder's complaints of a value of the wrong type, each as
// "LINE:COLUMN: PATH: want WHAT, got WHAT" when the value is found in doc ("LINE: what"
// as the decoder says it otherwise), without Go types; unknown keys are unknownKeys'.
func typeErrors(doc *yaml.Node, err *yaml.TypeError) []string {
	if err == nil {
		return nil
	}
	var out []string
	for _, e := range err.Errors {
		if strings.Contains(e, " not found in type ") {
			continue
		}
		m := typeMismatch.FindStringSubmatch(e)
		if m == nil {
			out = append(out, strings.TrimPrefix(e, "line "))
			continue
		}
		line, _ := strconv.Atoi(m[1])
		got := kindWords[m[2]]
		if m[3] != "" {
			got += " (" + m[3] + ")"
		}
		at, path := "", ""
		if n, p := findValue(doc, "", line, m[2]); n != nil {
			at, path = fmt.Sprintf(":%d", n.Column), " "+p+":"
		}
		out = append(out, fmt.Sprintf("%d%s:%s want %s, got %s", line, at, path, goTypeWords(m[4]), got))
	}
	return out
}

// kindWords names YAML's tags for people.
var kindWords = map[string]string{
	"!!seq": "a list", "!!map": "a mapping (keys and values)", "!!str": "text", "!!int": "a number",
	"!!float": "a number", "!!bool": "true or false", "!!null": "nothing", "!!binary": "binary data",
	"!!timestamp": "a date",
}

// goTypeWords names for people the Go type that a value was to be decoded into.
func goTypeWords(t string) string {
	switch {
	case t == "time.Duration":
		return "a duration such as 10s or 1m30s"
	case t == "string":
		return "text"
	case t == "bool":
		return "true or false"
	case strings.HasPrefix(t, "int") || strings.HasPrefix(t, "uint"):
		return "a whole number"
	case strings.HasPrefix(t, "float"):
		return "a number"
	case strings.HasPrefix(t, "[]"):
		return "a list"
	}
	return "a mapping (keys and values)"
}

// findValue returns the first value under n, on line and with tag, and its path.
func findValue(n *yaml.Node, path string, line int, tag string) (*yaml.Node, string) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			if found, p := findValue(c, path, line, tag); found != nil {
				return found, p
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if found, p := findValue(n.Content[i+1], joinPath(path, n.Content[i].Value), line, tag); found != nil {
				return found, p
			}
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			if found, p := findValue(c, path+"["+strconv.Itoa(i)+"]", line, tag); found != nil {
				return found, p
			}
		}
	}
	if n.Line == line && n.ShortTag() == tag && n.Kind != yaml.DocumentNode {
		return n, path
	}
	return nil, ""
}

// yamlScalar is s as a YAML value: as it is, or quoted where YAML would read it otherwise.
func yamlScalar(s string) string {
	b, err := yaml.Marshal(s)
	if err != nil {
		return strconv.Quote(s)
	}
	return strings.TrimSpace(string(b))
}
