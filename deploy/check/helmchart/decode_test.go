package helmchart

import (
	"slices"
	"strings"
	"testing"
)

// TestChartLintsStrictly: helm lint --strict passes with every ci/*.yaml, and its report
// holds no warning and no error.
func TestChartLintsStrictly(t *testing.T) {
	forEachCI(t, func(t *testing.T, name string) {
		out, err := helm.run("lint", "--strict", chart, "-f", ciValues(name))
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if strings.Contains(out, "[WARNING]") || strings.Contains(out, "[ERROR]") {
			t.Errorf("helm lint --strict with ci/%s.yaml reports:\n%s", name, out)
		}
	})
}

// renderedKinds are the kinds each ci/*.yaml renders, sorted: minimal only the required
// pieces, everything every one.
var renderedKinds = map[string][]string{
	"minimal":  {"Deployment", "Service", "ServiceAccount"},
	"sentinel": {"Deployment", "Service", "ServiceAccount"},
	"cluster":  {"Deployment", "Service", "ServiceAccount"},
	"everything": {"ConfigMap", "Deployment", "HorizontalPodAutoscaler", "Ingress", "Ingress",
		"NetworkPolicy", "PodDisruptionBudget", "PrometheusRule", "Service", "Service",
		"ServiceAccount", "ServiceMonitor"},
}

// TestEveryRenderedDocumentDecodesStrictly: every document of every ci/*.yaml render
// decodes strictly into its API type, in the release's namespace, and each values file
// renders the kinds it should (the optional pieces are off unless enabled).
func TestEveryRenderedDocumentDecodesStrictly(t *testing.T) {
	forEachCI(t, func(t *testing.T, name string) {
		want, ok := renderedKinds[name]
		if !ok {
			t.Fatalf("ci/%s.yaml is new: say in renderedKinds what it renders", name)
		}
		var got []string
		for _, d := range decoded(t, name) {
			got = append(got, d.Kind)
			if d.Namespace != namespace {
				t.Errorf("%s %s has no metadata.namespace %s", d.Kind, d.Name, namespace)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("ci/%s.yaml renders %v, want %v", name, got, want)
		}
	})
}

// TestStrictDecodingRefusesMistakes proves the decoding strict: mutated copies of the
// rendered Deployment, each with one mistake the API server would refuse, do not decode,
// while the copy as rendered does.
func TestStrictDecodingRefusesMistakes(t *testing.T) {
	raw := renderedDocument(t, "minimal", "kind: Deployment")
	if _, err := Decode(raw); err != nil {
		t.Fatalf("the rendered Deployment does not decode: %v", err)
	}
	mistakes := []struct{ what, old, new, want string }{
		{"a misspelt field", "terminationGracePeriodSeconds:", "terminationGracePeriodSecond:", `unknown field "spec.template.spec.terminationGracePeriodSecond"`},
		{"a field in the wrong case", "readOnlyRootFilesystem:", "readOnlyRootFileSystem:", `unknown field "spec.template.spec.containers[0].securityContext.readOnlyRootFileSystem"`},
		{"a duplicate key", "  replicas: 2\n", "  replicas: 2\n  replicas: 3\n", "already set in map"},
		{"a field of the wrong type", "runAsNonRoot: true", "runAsNonRoot: \"yes\"", "cannot unmarshal string"},
		{"an unknown kind", "kind: Deployment", "kind: Deploymnet", "is not one the chart renders"},
		{"an unknown version", "apiVersion: apps/v1", "apiVersion: apps/v1beta2", "is not one the chart renders"},
	}
	for _, m := range mistakes {
		mutated := strings.Replace(string(raw), m.old, m.new, 1)
		if mutated == string(raw) {
			t.Fatalf("%s: the Deployment has no %q to change", m.what, m.old)
		}
		if _, err := Decode([]byte(mutated)); err == nil || !strings.Contains(err.Error(), m.want) {
			t.Errorf("%s: Decode says %v, want an error with %q", m.what, err, m.want)
		}
	}
}

// renderedDocument is the one document of the ci/NAME.yaml render that holds marker.
func renderedDocument(t *testing.T, name, marker string) []byte {
	t.Helper()
	out, err := template("-f", ciValues(name))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range SplitDocuments(out) {
		if strings.Contains(string(doc), "\n"+marker+"\n") {
			return doc
		}
	}
	t.Fatalf("ci/%s.yaml renders no document with %q", name, marker)
	return nil
}
