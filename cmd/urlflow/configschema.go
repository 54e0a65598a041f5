package main

import (
	"encoding/json"
	"io"
	"reflect"
	"regexp"
	"strings"
	"time"
)

// schemaURL is the address of the JSON Schema of the configuration file, for editors.
const schemaURL = "https://json-schema.org/draft/2020-12/schema"

// durationPattern is a Go duration as time.ParseDuration reads it, without a sign.
const durationPattern = `^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$`

// writeConfigSchema writes docs/urlflow.schema.json: the JSON Schema (draft 2020-12) of the
// configuration file, so that editors check it as it is written. Its top level holds the
// settings of the settings table that have a YAML key, and the sections of fileConfig,
// read from their Go types as the decoder reads them (yamlFields). Every object refuses
// keys it does not know, as urlflow does.
func writeConfigSchema(w io.Writer) error {
	properties := map[string]any{}
	for _, s := range settingsTable {
		if s.YAML != "" {
			properties[s.YAML] = s.schema()
		}
	}
	fields, _ := yamlFields(reflect.TypeFor[fileConfig]())
	for _, f := range fileSections {
		section := typeSchema(fields[f.key])
		section["description"] = strings.ReplaceAll(f.what, "`", "") + " (docs/" + f.link + ")."
		properties[f.key] = section
	}
	schema := map[string]any{
		"$schema": schemaURL,
		"title":   "urlflow configuration file",
		"description": "The YAML file of URLFLOW_CONFIG (--config). Generated from cmd/urlflow/settings.go; " +
			"every setting is described in docs/configuration.md.",
		"type":                 "object",
		"properties":           properties,
		"additionalProperties": false,
	}
	b, err := json.MarshalIndent(schema, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// schema is the JSON Schema of s's value in the file, with its summary and example.
func (s *setting) schema() map[string]any {
	out := map[string]any{"description": s.Summary + " (" + s.Env + ")", "examples": []string{s.Example}}
	switch {
	case s.Type == "duration":
		out["type"], out["pattern"] = "string", durationPattern
	case s.Type == "integer":
		out["type"] = "integer"
	case s.Type == "boolean":
		out["type"] = "boolean"
	case choices(s.Type) != nil:
		out["enum"] = choices(s.Type)
	default:
		out["type"] = "string"
	}
	if s.Default != "" && len(s.DefaultIn) == 0 {
		out["default"] = s.Default
	}
	return out
}

// choicePattern is a Type that lists the values a setting takes: "push or error", "debug,
// info, warn or error".
var choicePattern = regexp.MustCompile(`^[a-z]+(, [a-z]+)* or [a-z]+$`)

// choices returns the values that typ lists, or nil when it lists none.
func choices(typ string) []string {
	if !choicePattern.MatchString(typ) {
		return nil
	}
	return strings.FieldsFunc(strings.ReplaceAll(typ, " or ", ","), func(r rune) bool { return r == ',' || r == ' ' })
}

// typeSchema is the JSON Schema of the values that go.yaml.in/yaml decodes into t.
func typeSchema(t reflect.Type) map[string]any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == reflect.TypeFor[time.Duration]():
		return map[string]any{"type": "string", "pattern": durationPattern, "examples": []string{"10s"}}
	case t.Kind() == reflect.String:
		return map[string]any{"type": "string"}
	case t.Kind() == reflect.Bool:
		return map[string]any{"type": "boolean"}
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		return map[string]any{"type": "integer"}
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		return map[string]any{"type": "number"}
	case t.Kind() == reflect.Slice || t.Kind() == reflect.Array:
		return map[string]any{"type": "array", "items": typeSchema(t.Elem())}
	case t.Kind() == reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": typeSchema(t.Elem())}
	case t.Kind() == reflect.Struct:
		fields, anyKey := yamlFields(t)
		properties := map[string]any{}
		for name, ft := range fields {
			properties[name] = typeSchema(ft)
		}
		return map[string]any{"type": "object", "properties": properties, "additionalProperties": anyKey}
	}
	return map[string]any{} // anything
}
