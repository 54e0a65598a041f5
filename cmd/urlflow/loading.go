package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// loading is one run of loadConfig: the command, the configuration file as read, the
// settings read, and every problem found so far. Its problems name each setting as the
// user wrote it: the flag, the environment variable, or the key and its line in the file.
type loading struct {
	mode string
	// file is the configuration file's name in problems; doc is its YAML, nil when none
	// was read.
	file     string
	doc      *yaml.Node
	v        values
	problems []error
}

// problemf adds a problem.
func (l *loading) problemf(format string, a ...any) {
	l.problems = append(l.problems, fmt.Errorf(format, a...))
}

// fail adds a problem of setting name, named where its value came from (named).
func (l *loading) fail(name, format string, a ...any) {
	l.problems = append(l.problems, fmt.Errorf(l.named(name)+": "+format, a...))
}

// named is setting name as the user wrote it: --flag, the variable (or its _FILE), or the
// key with the file's name, line and column. A default, or nothing, is named by the
// variable, which is how people would set it.
func (l *loading) named(name string) string {
	s, v := lookupSetting(name), l.v[name]
	switch v.From {
	case fromFlag:
		return "--" + s.Flag
	case fromEnvFile:
		return s.Env + " (from " + s.Env + "_FILE)"
	case fromFile:
		return fmt.Sprintf("configuration file %s:%d:%d: %s", l.file, v.Line, v.Column, s.YAML)
	}
	return s.Env
}

// fileProblemf adds a problem of the configuration file at path (as unknownKeys writes
// paths: operators.claim, secrets[0].name), with the line and column of path when the file
// has it.
func (l *loading) fileProblemf(path, format string, a ...any) {
	where := "configuration file " + l.file
	if n := lookupPath(l.doc, path); n != nil {
		where += fmt.Sprintf(":%d:%d", n.Line, n.Column)
	}
	l.problems = append(l.problems, fmt.Errorf(where+": "+path+": "+format, a...))
}

// err joins the problems, each once, in the order found.
func (l *loading) err() error {
	var seen []string
	var out []error
	for _, p := range l.problems {
		if !slices.Contains(seen, p.Error()) {
			seen = append(seen, p.Error())
			out = append(out, p)
		}
	}
	return errors.Join(out...)
}

// lookupPath returns the node of the document doc at path: a key's node (which is where
// people look for the line), or a sequence's item; nil when doc has no such path.
func lookupPath(doc *yaml.Node, path string) *yaml.Node {
	n := doc
	if n != nil && n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	var at *yaml.Node
	for part := range strings.SplitSeq(strings.ReplaceAll(path, "[", ".["), ".") {
		switch {
		case n == nil || part == "":
			return nil
		case strings.HasPrefix(part, "["):
			var i int
			if _, err := fmt.Sscanf(part, "[%d]", &i); err != nil || n.Kind != yaml.SequenceNode || i < 0 || i >= len(n.Content) {
				return nil
			}
			n = n.Content[i]
			at = n
		default:
			at, n = mappingKey(n, part)
		}
	}
	return at
}

// mappingKey returns the key node named key of the mapping n and its value, or nils.
func mappingKey(n *yaml.Node, key string) (*yaml.Node, *yaml.Node) {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i], n.Content[i+1]
		}
	}
	return nil, nil
}

// catalogPrefixes begin the problems of one entry of a section of the file, as the
// packages that check the sections (slots, providers, services) word them.
var catalogPrefixes = []struct{ prefix, section string }{
	{"secret slot ", "secrets"}, {"provider ", "providers"}, {"service ", "services"},
}

// catalogProblems adds the problems of the file's sections, err with one per line, each
// at the entry it names: its key when the problem begins with one, else the entry itself.
func (l *loading) catalogProblems(err error) {
	for problem := range strings.SplitSeq(err.Error(), "\n") {
		where := "configuration file " + l.file
		if n := lookupPath(l.doc, l.entryPath(problem)); n != nil {
			where += fmt.Sprintf(":%d:%d", n.Line, n.Column)
		}
		l.problemf("%s: %s", where, problem)
	}
}

// entryPath returns the path of the entry (secrets[1], or secrets[1].label) that problem
// is about, or "".
func (l *loading) entryPath(problem string) string {
	var root *yaml.Node
	if l.doc != nil && len(l.doc.Content) == 1 {
		root = l.doc.Content[0]
	}
	for _, c := range catalogPrefixes {
		rest, ok := strings.CutPrefix(problem, c.prefix)
		_, list := mappingKey(root, c.section)
		if !ok || list == nil || list.Kind != yaml.SequenceNode {
			continue
		}
		name, detail, _ := strings.Cut(rest, ": ")
		if name == "(no name)" {
			name = ""
		}
		path := ""
		for i, entry := range list.Content {
			if _, n := mappingKey(entry, "name"); (n == nil && name == "") || (n != nil && n.Value == name) {
				path = fmt.Sprintf("%s[%d]", c.section, i)
				if !strings.HasSuffix(detail, "twice") {
					break // the first, or for an entry named twice the last
				}
			}
		}
		if path == "" {
			return ""
		}
		return l.keyPath(path, strings.TrimSuffix(strings.Fields(detail + " ")[0], ":"))
	}
	return ""
}

// keyPath returns the path of key in the entry at path, or one level down (min_length is
// in validation), or path itself when the entry has no such key.
func (l *loading) keyPath(path, key string) string {
	if lookupPath(l.doc, path+"."+key) != nil {
		return path + "." + key
	}
	entry := lookupPath(l.doc, path) // a sequence's item: the mapping itself
	if entry == nil || entry.Kind != yaml.MappingNode {
		return path
	}
	for i := 0; i+1 < len(entry.Content); i += 2 {
		if inner := path + "." + entry.Content[i].Value + "." + key; lookupPath(l.doc, inner) != nil {
			return inner
		}
	}
	return path
}

// example is "e.g. " and the example of setting name, written as the user wrote the
// setting: --flag VALUE, NAME=VALUE, or key: VALUE in the file.
func (l *loading) example(name string) string {
	return l.exampleOf(name, lookupSetting(name).Example)
}

// exampleOf is example with the value ex.
func (l *loading) exampleOf(name, ex string) string {
	s := lookupSetting(name)
	switch l.v[name].From {
	case fromFlag:
		return "e.g. --" + s.Flag + " " + shellWord(ex)
	case fromFile:
		return "e.g. " + s.YAML + ": " + yamlScalar(ex)
	}
	return "e.g. " + s.Env + "=" + shellWord(ex)
}

// shellWord is s as one word of a shell's command line.
func shellWord(s string) string {
	if strings.ContainsAny(s, " \t\n'\"$`\\&|;<>()*?[]#~") {
		return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	return s
}
