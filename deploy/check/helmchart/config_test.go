package helmchart

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// urlflowSchema is the JSON Schema of urlflow's configuration file, from this package.
var urlflowSchema = filepath.Join(moduleRoot, "..", "..", "docs", "urlflow.schema.json")

// configFile is the configuration file the ConfigMap holds, decoded.
func configFile(t *testing.T, docs []Document) map[string]any {
	t.Helper()
	cm := one[corev1.ConfigMap](t, docs)
	var cfg map[string]any
	if err := yaml.UnmarshalStrict([]byte(cm.Data["urlflow.yaml"]), &cfg); err != nil {
		t.Fatalf("the ConfigMap's urlflow.yaml: %v", err)
	}
	return cfg
}

// configFiles are the values of every key named *_file in the configuration, at any depth.
func configFiles(v any) []string {
	var files []string
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && strings.HasSuffix(k, "_file") {
				files = append(files, s)
			}
			files = append(files, configFiles(x)...)
		}
	case []any:
		for _, x := range v {
			files = append(files, configFiles(x)...)
		}
	}
	return files
}

// TestConfigFileIsMountedAndValid: with config.enabled, the ConfigMap holds config.file of
// ci/everything.yaml as it is, a valid urlflow configuration by docs/urlflow.schema.json;
// it is mounted read-only at /etc/urlflow, named by URLFLOW_CONFIG, and its checksum is a
// pod annotation, so that a change rolls the pods.
func TestConfigFileIsMountedAndValid(t *testing.T) {
	docs := decoded(t, "everything")
	got := configFile(t, docs)
	if want := ciConfig(t, "everything"); !reflect.DeepEqual(got, want) {
		t.Errorf("the ConfigMap holds\n%v\nwant config.file\n%v", got, want)
	}
	if err := validateConfig(got); err != nil {
		t.Errorf("the configuration file is not valid by docs/urlflow.schema.json: %v", err)
	}
	d := one[appsv1.Deployment](t, docs)
	c := urlflowContainer(t, d)
	if v := envOf(t, c)["URLFLOW_CONFIG"].Value; v != "/etc/urlflow/urlflow.yaml" {
		t.Errorf("URLFLOW_CONFIG=%q, want /etc/urlflow/urlflow.yaml", v)
	}
	mount := volumeMount(t, c, "/etc/urlflow")
	if v := volume(t, d, mount.Name).ConfigMap; !mount.ReadOnly || v == nil || v.Name != one[corev1.ConfigMap](t, docs).Name {
		t.Errorf("/etc/urlflow is not the ConfigMap, read-only: %+v", mount)
	}
	if d.Spec.Template.Annotations["checksum/config"] == "" {
		t.Error("the pod has no checksum/config annotation")
	}
}

// ciConfig is config.file of ci/NAME.yaml.
func ciConfig(t *testing.T, name string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(chartDir, "ci", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values struct {
		Config struct {
			File map[string]any `json:"file"`
		} `json:"config"`
	}
	if err := yaml.Unmarshal(data, &values); err != nil {
		t.Fatalf("ci/%s.yaml: %v", name, err)
	}
	return values.Config.File
}

func validateConfig(cfg map[string]any) error {
	schemaText, err := os.ReadFile(urlflowSchema)
	if err != nil {
		return err
	}
	schemaDoc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemaText))
	if err != nil {
		return err
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("urlflow.schema.json", schemaDoc); err != nil {
		return err
	}
	schema, err := c.Compile("urlflow.schema.json")
	if err != nil {
		return err
	}
	data, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	instance, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return err
	}
	return schema.Validate(instance)
}
