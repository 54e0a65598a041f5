// Package helmchart checks urlflow's Helm chart, deploy/helm/urlflow, without a cluster.
//
// Its tests run `go tool helm lint --strict` and `go tool helm template` (helm v4, pinned in
// this module's go.mod) on every values file of the chart's ci/ directory and fail on any
// error or lint warning; decode every rendered document strictly into its Kubernetes API
// type (k8s.io/api, and prometheus-operator's monitoring/v1 for ServiceMonitor and
// PrometheusRule), so that an unknown kind, an unknown or misspelt field, or a field of the
// wrong case fails; and assert what urlflow needs of the objects: the restricted security
// context, the probes on /healthz and /readyz, the preStop sleep and a grace period longer
// than it and URLFLOW_SHUTDOWN_GRACE, Secrets only mounted by reference (no Secret object,
// no secret value), the Redis topology, the Ingress that keeps an Mcp-Session-Id on one
// replica, the values schema refusing unknown keys, and required values failing by name.
//
// The chart's PrometheusRule template is generated from deploy/prometheus/alerts.yml by
// PrometheusRuleTemplate (`go test ./helmchart -update` rewrites it), and a test checks
// that the rendered rule's groups equal alerts.yml's, decoded.
//
// Nothing here installs the chart: the machine it is built on has no cluster.
package helmchart

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Document is one decoded document of a render.
type Document struct {
	// APIVersion and Kind as the document gives them, metadata.name and metadata.namespace.
	APIVersion, Kind, Name, Namespace string
	// Object is a pointer to the API type: *appsv1.Deployment, *corev1.Service, ...
	Object any
	// JSON is the document converted to JSON, as decoded.
	JSON []byte
}

// kinds are the API types the chart may render; any other kind is an error.
var kinds = map[string]func() any{
	"apps/v1/Deployment":                      func() any { return new(appsv1.Deployment) },
	"v1/Service":                              func() any { return new(corev1.Service) },
	"v1/ServiceAccount":                       func() any { return new(corev1.ServiceAccount) },
	"v1/ConfigMap":                            func() any { return new(corev1.ConfigMap) },
	"networking.k8s.io/v1/Ingress":            func() any { return new(networkingv1.Ingress) },
	"networking.k8s.io/v1/NetworkPolicy":      func() any { return new(networkingv1.NetworkPolicy) },
	"policy/v1/PodDisruptionBudget":           func() any { return new(policyv1.PodDisruptionBudget) },
	"autoscaling/v2/HorizontalPodAutoscaler":  func() any { return new(autoscalingv2.HorizontalPodAutoscaler) },
	"monitoring.coreos.com/v1/ServiceMonitor": func() any { return new(monitoringv1.ServiceMonitor) },
	"monitoring.coreos.com/v1/PrometheusRule": func() any { return new(monitoringv1.PrometheusRule) },
}

var separator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// SplitDocuments splits a multi-document YAML stream at its `---` lines and drops the
// documents that hold only comments and blank lines (helm's "# Source:" of an empty template).
func SplitDocuments(stream []byte) [][]byte {
	var docs [][]byte
	for _, doc := range separator.Split(string(stream), -1) {
		if hasContent(doc) {
			docs = append(docs, []byte(doc))
		}
	}
	return docs
}

func hasContent(doc string) bool {
	for _, line := range strings.Split(doc, "\n") {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") {
			return true
		}
	}
	return false
}

// Decode decodes one YAML document strictly into the API type its apiVersion and kind
// name, as the API server would: duplicate keys, unknown fields and fields of the wrong
// case are errors, and so is a kind the chart is not expected to render.
func Decode(doc []byte) (Document, error) {
	data, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return Document{}, fmt.Errorf("not YAML: %w", err)
	}
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return Document{}, fmt.Errorf("reading apiVersion and kind: %w", err)
	}
	d := Document{APIVersion: head.APIVersion, Kind: head.Kind, Name: head.Metadata.Name,
		Namespace: head.Metadata.Namespace, JSON: data}
	newObject, ok := kinds[head.APIVersion+"/"+head.Kind]
	if !ok {
		return d, fmt.Errorf("%s %q: kind %s/%s is not one the chart renders", head.Kind, d.Name, head.APIVersion, head.Kind)
	}
	d.Object = newObject()
	strict, err := kjson.UnmarshalStrict(data, d.Object)
	if err != nil {
		return d, fmt.Errorf("%s %q: %w", d.Kind, d.Name, err)
	}
	if len(strict) > 0 {
		return d, fmt.Errorf("%s %q: %w", d.Kind, d.Name, errors.Join(strict...))
	}
	return d, nil
}

// DecodeAll decodes every document of a render; the error names every document that failed.
func DecodeAll(stream []byte) ([]Document, error) {
	var docs []Document
	var errs []error
	for _, raw := range SplitDocuments(stream) {
		d, err := Decode(raw)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		docs = append(docs, d)
	}
	return docs, errors.Join(errs...)
}

// prometheusRuleHeader is what the generated template starts with, up to `spec:`.
const prometheusRuleHeader = `{{- /*
Generated from deploy/prometheus/alerts.yml, the one source of urlflow's alerts. Do not
edit: change alerts.yml, then run, in deploy/check:
  go test ./helmchart -run TestPrometheusRuleTemplateIsCurrent -update
The alerts' own templates ($labels, $value) are escaped for helm as raw strings.
*/ -}}
{{- if .Values.prometheusRule.enabled }}
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: {{ include "urlflow.fullname" . }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "urlflow.labels" . | nindent 4 }}
    {{- with .Values.prometheusRule.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
`

var action = regexp.MustCompile(`\{\{.*?\}\}`)

// PrometheusRuleTemplate returns the chart's templates/prometheusrule.yaml for the Prometheus
// rule file alerts: the file as it is, comments too, indented under spec:, with each of the
// rules' own {{ ... }} turned into {{`{{ ... }}`}} so that helm writes it out unchanged.
// An action that spans lines, or holds a backquote, cannot be escaped so and is an error.
func PrometheusRuleTemplate(alerts []byte) ([]byte, error) {
	var out bytes.Buffer
	out.WriteString(prometheusRuleHeader)
	for i, line := range strings.Split(strings.TrimRight(string(alerts), "\n"), "\n") {
		escaped, err := escapeActions(line)
		if err != nil {
			return nil, fmt.Errorf("alerts line %d: %w", i+1, err)
		}
		if escaped != "" {
			out.WriteString("  " + escaped)
		}
		out.WriteString("\n")
	}
	out.WriteString("{{- end }}\n")
	return out.Bytes(), nil
}

func escapeActions(line string) (string, error) {
	var out strings.Builder
	rest := line
	for _, loc := range action.FindAllStringIndex(line, -1) {
		offset := len(line) - len(rest)
		before, act := rest[:loc[0]-offset], line[loc[0]:loc[1]]
		if err := checkLiteral(before); err != nil {
			return "", err
		}
		if strings.Contains(act, "`") {
			return "", fmt.Errorf("%s holds a backquote, which a raw string cannot", act)
		}
		out.WriteString(before + "{{`" + act + "`}}")
		rest = line[loc[1]:]
	}
	if err := checkLiteral(rest); err != nil {
		return "", err
	}
	out.WriteString(rest)
	return out.String(), nil
}

func checkLiteral(text string) error {
	if strings.Contains(text, "{{") || strings.Contains(text, "}}") {
		return fmt.Errorf("%q: a template action that does not open and close on one line", text)
	}
	return nil
}
