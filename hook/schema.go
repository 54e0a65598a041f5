package hook

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// schemaProperty is the part of a requested schema, or of one of its properties, that this
// package reads: everything a person filling in the form would read.
type schemaProperty struct {
	Type        any                       `json:"type"`
	Title       string                    `json:"title"`
	Description string                    `json:"description"`
	Format      string                    `json:"format"`
	WriteOnly   bool                      `json:"writeOnly"`
	Enum        []any                     `json:"enum"`
	EnumNames   []string                  `json:"enumNames"`
	Const       any                       `json:"const"`
	Default     any                       `json:"default"`
	Examples    []any                     `json:"examples"`
	OneOf       []schemaProperty          `json:"oneOf"`
	AnyOf       []schemaProperty          `json:"anyOf"`
	Items       *schemaProperty           `json:"items"`
	Minimum     *float64                  `json:"minimum"`
	Maximum     *float64                  `json:"maximum"`
	Properties  map[string]schemaProperty `json:"properties"`
}

// freeText reports whether a user could type anything into the property: a string,
// number or untyped value that is not a choice among listed values, or a list or
// alternative of which one is. A boolean or a choice cannot carry a secret.
func (p *schemaProperty) freeText() bool {
	if len(p.Enum) > 0 || p.Const != nil {
		return false
	}
	if alts := append(append([]schemaProperty(nil), p.OneOf...), p.AnyOf...); len(alts) > 0 {
		for i := range alts {
			if alts[i].freeText() {
				return true
			}
		}
		return false
	}
	types, _ := p.Type.([]any)
	if s, ok := p.Type.(string); ok {
		types = []any{s}
	}
	if len(types) == 0 {
		return len(p.Properties) == 0 // untyped: free unless it is an object of properties
	}
	for _, t := range types {
		switch t {
		case "string", "number", "integer":
			return true
		case "array":
			if p.Items == nil || p.Items.freeText() {
				return true
			}
		}
	}
	return false
}

// A readText is one text of a form, and where it stands.
type readText struct {
	text string
	// field is set for a field's own name and title, where the vocabulary's field words
	// count too.
	field bool
}

// texts are what a person reads of p besides its name: its title, description, default
// and examples, the titles and values of its choices, and those of its items and
// alternatives; its properties are read as fields of their own.
func (p *schemaProperty) texts() []readText {
	out := []readText{{p.Title, true}, {p.Description, false}}
	for _, v := range append(append([]any{p.Default, p.Const}, p.Examples...), p.Enum...) {
		if s, ok := v.(string); ok {
			out = append(out, readText{s, false})
		}
	}
	for _, s := range p.EnumNames {
		out = append(out, readText{s, false})
	}
	for _, alt := range append(append([]schemaProperty(nil), p.OneOf...), p.AnyOf...) {
		for _, t := range alt.texts() {
			out = append(out, readText{t.text, false})
		}
	}
	if p.Items != nil {
		for _, t := range p.Items.texts() {
			out = append(out, readText{t.text, false})
		}
	}
	return out
}

// formField is a field of a form, as formAsksForSecret reads it.
type formField struct {
	path     string
	freeText bool
	texts    []readText // its name first
	prop     *schemaProperty
}

// formFields lists the fields of props, depth first in name order: those of nested
// objects (path a.b) and of object items of lists (path a[].b) too.
func formFields(prefix string, props map[string]schemaProperty) []formField {
	var out []formField
	for _, name := range slices.Sorted(maps.Keys(props)) {
		p := props[name]
		path := prefix + name
		out = append(out, formField{path: path, freeText: p.freeText(), texts: append([]readText{{name, true}}, p.texts()...), prop: &p})
		if len(p.Properties) > 0 {
			out = append(out, formFields(path+".", p.Properties)...)
		}
		if p.Items != nil && len(p.Items.Properties) > 0 {
			out = append(out, formFields(path+"[].", p.Items.Properties)...)
		}
	}
	return out
}

// formAsksForSecret returns why a form with this message and requested schema asks for a
// secret, or "" when it does not, and the names of the form's fields. A field that could
// carry free text is judged by its own name, title, description, default and examples;
// when the form has one, everything else a person reads is judged too (the message, the
// form's title and description, the other fields' titles and choices), because it may
// say what to type into it. A field that cannot carry a secret (a boolean, a choice) is
// never the reason on its own.
func formAsksForSecret(v *vocabulary, message string, rawSchema json.RawMessage) (reason string, fields []formField, err error) {
	var root schemaProperty
	if len(rawSchema) > 0 && string(rawSchema) != "null" {
		if err := json.Unmarshal(rawSchema, &root); err != nil {
			return "", nil, fmt.Errorf("the requested schema is not a JSON schema object: %w", err)
		}
	}
	fields = formFields("", root.Properties)
	anyFreeText := false
	for _, f := range fields {
		if reason != "" {
			continue
		}
		switch {
		case f.prop.Format == "password":
			reason = fmt.Sprintf("field %q has format password", f.path)
		case f.prop.WriteOnly:
			reason = fmt.Sprintf("field %q is writeOnly", f.path)
		case f.prop.Items != nil && f.prop.Items.Format == "password":
			reason = fmt.Sprintf("field %q has items of format password", f.path)
		case f.freeText:
			anyFreeText = true
			for _, t := range f.texts {
				if p, ok := v.find(t.text, t.field); ok {
					reason = fmt.Sprintf("field %q asks for a secret (%q)", f.path, p.text)
					break
				}
			}
		}
	}
	if reason != "" || !anyFreeText {
		return reason, fields, nil
	}
	if p, ok := v.find(message, false); ok {
		return fmt.Sprintf("the message asks for a secret (%q)", p.text), fields, nil
	}
	for _, t := range root.texts() {
		if p, ok := v.find(t.text, false); ok {
			return fmt.Sprintf("the form's title or description asks for a secret (%q)", p.text), fields, nil
		}
	}
	for _, f := range fields {
		if f.freeText {
			continue
		}
		for _, t := range f.texts { // its field words do not count: a choice named pin is a choice
			if p, ok := v.find(t.text, false); ok {
				return fmt.Sprintf("field %q says the form is for a secret (%q)", f.path, p.text), fields, nil
			}
		}
	}
	return "", fields, nil
}

// innocentFormats are the formats of a string that a secret does not fit.
var innocentFormats = map[string]bool{"email": true, "date": true, "date-time": true, "time": true, "uri": true}

// maxInnocentRange is the most values a number field may take and still be innocent to a
// strict stance: a count or a rating, not a card number or a PIN of many digits.
const maxInnocentRange = 10000

// firstUnclearField returns the first free-text field of fields whose purpose cannot be
// told innocent: a string without an innocent format, a number without a small range.
// "" when there is none.
func firstUnclearField(fields []formField) string {
	for _, f := range fields {
		if !f.freeText {
			continue
		}
		p := f.prop
		types, _ := p.Type.([]any)
		if s, ok := p.Type.(string); ok {
			types = []any{s}
		}
		innocent := len(types) > 0 && len(p.OneOf) == 0 && len(p.AnyOf) == 0
		for _, t := range types {
			switch t {
			case "string":
				innocent = innocent && innocentFormats[p.Format]
			case "number", "integer":
				innocent = innocent && p.Minimum != nil && p.Maximum != nil && *p.Maximum-*p.Minimum <= maxInnocentRange
			case "null", "boolean":
			default:
				innocent = false
			}
		}
		if !innocent {
			return f.path
		}
	}
	return ""
}
