package main

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
)

const configSchema = "../../docs/urlflow.schema.json"

// TestConfigSchemaIsCurrent: docs/urlflow.schema.json is what the settings table and the
// sections of the file make.
func TestConfigSchemaIsCurrent(t *testing.T) {
	var want bytes.Buffer
	if err := writeConfigSchema(&want); err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(configSchema, want.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(configSchema)
	if err != nil || !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("docs/urlflow.schema.json is not what the settings table makes (%v): regenerate it with\n"+
			"  go test ./cmd/urlflow -run TestConfigSchemaIsCurrent -update", err)
	}
}

// compileConfigSchema compiles docs/urlflow.schema.json with a JSON Schema validator.
func compileConfigSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open(configSchema)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("urlflow.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	schema, err := c.Compile("urlflow.schema.json")
	if err != nil {
		t.Fatalf("docs/urlflow.schema.json is no valid JSON Schema: %v", err)
	}
	return schema
}

// validateYAML validates the YAML text src against schema, as an editor would.
func validateYAML(t *testing.T, schema *jsonschema.Schema, src string) error {
	t.Helper()
	var v any
	if err := yaml.Unmarshal([]byte(src), &v); err != nil {
		t.Fatalf("not YAML: %v\n%s", err, src)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return schema.Validate(doc)
}

// configExamples returns the configuration files the repository shows: urlflow dev's
// demo, and the YAML blocks of docs/ that are urlflow's file (those that start with one of
// its keys, not a hook policy or Prometheus'), by where they are.
func configExamples(t *testing.T) map[string]string {
	t.Helper()
	demo, err := os.ReadFile("demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{"cmd/urlflow/demo.yaml": string(demo)}
	topKeys, _ := yamlFields(reflect.TypeFor[fileConfig]())
	block := regexp.MustCompile("(?s)```yaml\n(.*?)```")
	firstKey := regexp.MustCompile(`(?m)^([a-z_]+):`)
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range append(docs, "../../README.md") {
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range block.FindAllStringSubmatch(string(text), -1) {
			key := firstKey.FindStringSubmatch(m[1])
			if key == nil {
				continue
			}
			if _, isSection := topKeys[key[1]]; isSection || slices.ContainsFunc(settingsTable, func(s setting) bool { return s.YAML == key[1] }) {
				out[strings.TrimPrefix(path, "../../")+" block "+strconv.Itoa(i+1)] = m[1]
			}
		}
	}
	return out
}

// TestTheSchemaAcceptsTheExamples: every configuration file the repository shows is valid
// by the schema, and urlflow dev loads each without a problem of its keys or types.
func TestTheSchemaAcceptsTheExamples(t *testing.T) {
	schema := compileConfigSchema(t)
	examples := configExamples(t)
	if len(examples) < 6 { // the demo, two in configuring.md, one in delegation.md, two in operating.md
		t.Fatalf("found %d examples, want the demo and the five of docs/: %v", len(examples), slices.Sorted(maps.Keys(examples)))
	}
	for name, src := range examples {
		if err := validateYAML(t, schema, src); err != nil {
			t.Errorf("%s is not valid by docs/urlflow.schema.json: %v", name, err)
		}
		_, err := loadArgs(cmdDev, nil, envOf(map[string]string{"URLFLOW_CONFIG": writeFile(t, src)}))
		if err != nil && (strings.Contains(err.Error(), "unknown key") || strings.Contains(err.Error(), ": want ")) {
			t.Errorf("%s: urlflow dev refuses a key or a type the schema accepts: %v", name, err)
		}
	}
}

// TestTheSchemaRefusesMistakes: what urlflow refuses for its keys and types, the schema
// refuses too, so that an editor underlines it.
func TestTheSchemaRefusesMistakes(t *testing.T) {
	schema := compileConfigSchema(t)
	for name, src := range map[string]string{
		"a misspelt setting":      "log_levl: debug\n",
		"a misspelt section":      "secret:\n  - name: k\n    label: K\n",
		"a misspelt key of slots": "secrets:\n  - name: k\n    lable: K\n",
		"a misspelt key deeper":   "secrets:\n  - name: k\n    label: K\n    api: {base_url: https://x.example, methds: [GET]}\n",
		"a value not listed":      "log_format: xml\n",
		"not a duration":          "elicitation_ttl: ten minutes\n",
		"a list for a setting":    "trusted_proxies: [10.0.0.1]\n",
		"a list for text":         "secrets:\n  - name: [k]\n",
		"text for a number":       "secrets:\n  - name: k\n    validation: {min_length: short}\n",
		"a duration as a number":  "secrets:\n  - name: k\n    api: {base_url: https://x.example, timeout: 10}\n",
	} {
		if err := validateYAML(t, schema, src); err == nil {
			t.Errorf("%s: the schema accepts\n%s", name, src)
		}
		if _, err := loadArgs(cmdDev, nil, envOf(map[string]string{"URLFLOW_CONFIG": writeFile(t, src)})); err == nil {
			t.Errorf("%s: urlflow dev accepts what the schema refuses:\n%s", name, src)
		}
	}
}
