package main

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/urlflow/urlflow/internal/spelling"

	"go.yaml.in/yaml/v3"
)

// A keyProblem is a key of the configuration file that no setting takes: where it is (its
// path, line and column) and the known key nearest to it, if one is near.
type keyProblem struct {
	path         string
	line, column int
	near         string
}

func (p keyProblem) String() string {
	s := fmt.Sprintf("%d:%d: %s: unknown key", p.line, p.column, p.path)
	if p.near != "" {
		s += fmt.Sprintf("; did you mean %q?", p.near)
	}
	return s
}

// unknownKeys returns the keys of doc that the Go type t does not take (by its fields' yaml
// names, their inline structs, and maps, whose keys are free), at any depth. topLevel adds
// the keys that t's own inline map takes at the top (the settings of the settings table).
func unknownKeys(doc *yaml.Node, t reflect.Type, topLevel []string) []keyProblem {
	var out []keyProblem
	walkKeys(doc, t, "", topLevel, &out)
	return out
}

func walkKeys(n *yaml.Node, t reflect.Type, path string, extra []string, out *[]keyProblem) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case n.Kind == yaml.DocumentNode && len(n.Content) == 1:
		walkKeys(n.Content[0], t, path, extra, out)
	case n.Kind == yaml.AliasNode && n.Alias != nil:
		walkKeys(n.Alias, t, path, extra, out)
	case n.Kind == yaml.MappingNode && t.Kind() == reflect.Struct:
		fields, inlineMap := yamlFields(t)
		names := append(slices.Sorted(maps.Keys(fields)), extra...)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			field, ok := fields[k.Value]
			switch {
			case ok:
				walkKeys(v, field, joinPath(path, k.Value), nil, out)
			case inlineMap && (extra == nil || slices.Contains(extra, k.Value)):
				// An inline map takes it: any key, or at the top, one of extra.
			default:
				*out = append(*out, keyProblem{path: joinPath(path, k.Value), line: k.Line, column: k.Column, near: nearest(k.Value, names)})
			}
		}
	case n.Kind == yaml.MappingNode && t.Kind() == reflect.Map:
		for i := 0; i+1 < len(n.Content); i += 2 {
			walkKeys(n.Content[i+1], t.Elem(), joinPath(path, n.Content[i].Value), nil, out)
		}
	case n.Kind == yaml.SequenceNode && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array):
		for i, item := range n.Content {
			walkKeys(item, t.Elem(), path+"["+strconv.Itoa(i)+"]", nil, out)
		}
	}
}

// yamlFields returns the keys a struct takes in YAML (as go.yaml.in/yaml reads it: the
// yaml tag's name, else the field's name in lower case), with the type of each, and whether
// an inline map takes the other keys.
func yamlFields(t reflect.Type) (map[string]reflect.Type, bool) {
	fields, anyKey := map[string]reflect.Type{}, false
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if slices.Contains(strings.Split(opts, ","), "inline") {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Map {
				anyKey = true
				continue
			}
			inner, innerAny := yamlFields(ft)
			for k, v := range inner {
				fields[k] = v
			}
			anyKey = anyKey || innerAny
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		fields[name] = f.Type
	}
	return fields, anyKey
}

// nearest returns the name of names nearest to key, within two edits, or "".
func nearest(key string, names []string) string {
	return spelling.Nearest(strings.ToLower(key), names, 3)
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
