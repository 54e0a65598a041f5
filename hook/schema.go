package hook

import (
	"encoding/json"
	"fmt"
	"sort"
)

// schemaProperty is the part of a requested schema's property this package reads.
type schemaProperty struct {
	Type        any                       `json:"type"`
	Title       string                    `json:"title"`
	Description string                    `json:"description"`
	Format      string                    `json:"format"`
	WriteOnly   bool                      `json:"writeOnly"`
	Enum        []any                     `json:"enum"`
	Const       any                       `json:"const"`
	OneOf       []json.RawMessage         `json:"oneOf"`
	AnyOf       []json.RawMessage         `json:"anyOf"`
	Items       *schemaProperty           `json:"items"`
	Properties  map[string]schemaProperty `json:"properties"`
}

// freeText reports whether a user could type anything into the property: a string,
// number or untyped value that is not a choice among listed values. A boolean or a choice
// cannot carry a secret.
func (p *schemaProperty) freeText() bool {
	if len(p.Enum) > 0 || p.Const != nil || len(p.OneOf) > 0 || len(p.AnyOf) > 0 {
		return false
	}
	switch p.Type {
	case "boolean", "null":
		return false
	case "array":
		return p.Items == nil || p.Items.freeText()
	case "object":
		return false // its properties are judged one by one
	}
	return true
}

// formAsksForSecret returns why a form with this message and requested schema asks for a
// secret, or "" when it does not, and the names of the form's fields. The message counts
// only when a field could carry free text.
func formAsksForSecret(m *phraseMatcher, message string, rawSchema json.RawMessage) (reason string, fields []string, err error) {
	var root schemaProperty
	if len(rawSchema) > 0 && string(rawSchema) != "null" {
		if err := json.Unmarshal(rawSchema, &root); err != nil {
			return "", nil, fmt.Errorf("the requested schema is not a JSON schema object: %w", err)
		}
	}
	anyFreeText := false
	var walk func(prefix string, props map[string]schemaProperty)
	walk = func(prefix string, props map[string]schemaProperty) {
		names := make([]string, 0, len(props))
		for name := range props {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			p := props[name]
			path := prefix + name
			fields = append(fields, path)
			if len(p.Properties) > 0 {
				walk(path+".", p.Properties)
			}
			if reason != "" {
				continue
			}
			switch {
			case p.Format == "password":
				reason = fmt.Sprintf("field %q has format password", path)
			case p.WriteOnly:
				reason = fmt.Sprintf("field %q is writeOnly", path)
			case p.Items != nil && p.Items.Format == "password":
				reason = fmt.Sprintf("field %q has items of format password", path)
			case !p.freeText():
			default:
				anyFreeText = true
				for _, text := range []string{name, p.Title, p.Description} {
					if phrase := m.find(text); phrase != "" {
						reason = fmt.Sprintf("field %q asks for a secret (%q)", path, phrase)
						break
					}
				}
			}
		}
	}
	walk("", root.Properties)
	if reason == "" && anyFreeText {
		if phrase := m.find(message); phrase != "" {
			reason = fmt.Sprintf("the message asks for a secret (%q)", phrase)
		}
	}
	return reason, fields, nil
}
