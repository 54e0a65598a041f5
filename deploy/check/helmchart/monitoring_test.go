package helmchart

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

var (
	// alertsFile is deploy/prometheus/alerts.yml, the one source of the alerts.
	alertsFile = filepath.Join(moduleRoot, "..", "prometheus", "alerts.yml")
	// ruleTemplate is the chart's template generated from it.
	ruleTemplate = filepath.Join(chartDir, "templates", "prometheusrule.yaml")
)

// TestPrometheusRuleTemplateIsCurrent: the chart's templates/prometheusrule.yaml is what
// PrometheusRuleTemplate makes of alerts.yml; -update writes it.
func TestPrometheusRuleTemplateIsCurrent(t *testing.T) {
	alerts, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	want, err := PrometheusRuleTemplate(alerts)
	if err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}
	if *update {
		if err := os.WriteFile(ruleTemplate, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(ruleTemplate)
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("%s is stale (%v): run  go test ./helmchart -run TestPrometheusRuleTemplateIsCurrent -update  in deploy/check", ruleTemplate, err)
	}
}

// TestRenderedPrometheusRuleEqualsAlerts: the PrometheusRule rendered by helm has exactly the
// groups of alerts.yml, decoded and compared as data, so that an escaping mistake (a
// {{ $value }} that helm evaluated, or one left escaped) fails; it carries the labels of
// prometheusRule.labels.
func TestRenderedPrometheusRuleEqualsAlerts(t *testing.T) {
	docs := decoded(t, "everything")
	rule := one[monitoringv1.PrometheusRule](t, docs)
	if rule.Labels["release"] != "prometheus" {
		t.Errorf("the PrometheusRule's labels %v lack prometheusRule.labels", rule.Labels)
	}
	got := asData(t, rule.Spec)
	want := alertsData(t)
	if !reflect.DeepEqual(got["groups"], want["groups"]) {
		gotJSON, _ := json.MarshalIndent(got["groups"], "", "  ")
		wantJSON, _ := json.MarshalIndent(want["groups"], "", "  ")
		t.Errorf("rendered groups:\n%s\nalerts.yml's:\n%s", gotJSON, wantJSON)
	}
	if len(want) != 1 || len(want["groups"].([]any)) == 0 {
		t.Errorf("alerts.yml holds more than groups, or none: %v", want)
	}
}

// alertsData is alerts.yml, decoded strictly as a rule file and as plain data.
func alertsData(t *testing.T) map[string]any {
	t.Helper()
	alerts, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var spec monitoringv1.PrometheusRuleSpec
	if err := yaml.UnmarshalStrict(alerts, &spec); err != nil {
		t.Fatalf("alerts.yml is not a PrometheusRule spec: %v", err)
	}
	var data map[string]any
	if err := yaml.UnmarshalStrict(alerts, &data); err != nil {
		t.Fatal(err)
	}
	return data
}

// asData is v as plain data, as JSON sees it.
func asData(t *testing.T, v any) map[string]any {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestPrometheusRuleTemplateRefusesWhatItCannotEscape: an action with a backquote, or one
// that spans lines, is an error rather than a template that renders something else.
func TestPrometheusRuleTemplateRefusesWhatItCannotEscape(t *testing.T) {
	for alerts, want := range map[string]string{
		"summary: \"{{ `x` }}\"":                   "backquote",
		"summary: \"{{ $value\n  }} is high\"":     "does not open and close on one line",
		"summary: \"{{ $value }} and }} stray\"":   "does not open and close on one line",
		"description: ok {{ $labels.instance }}\n": "",
	} {
		_, err := PrometheusRuleTemplate([]byte(alerts))
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("%q: %v, want an error with %q", alerts, err, want)
		}
	}
}

// TestServiceMonitorScrapesWithAnOperatorToken: the ServiceMonitor scrapes /metrics on port
// http through the main Service only (not the -sessions one, which would scrape each pod
// twice), with the operator token of serviceMonitor.tokenSecret, and sets job="urlflow",
// which alerts.yml's UrlflowDown names.
func TestServiceMonitorScrapesWithAnOperatorToken(t *testing.T) {
	docs := decoded(t, "everything")
	sm := one[monitoringv1.ServiceMonitor](t, docs)
	var selected []string
	for _, svc := range objects[corev1.Service](docs) {
		if labels.SelectorFromSet(sm.Spec.Selector.MatchLabels).Matches(labels.Set(svc.Labels)) {
			selected = append(selected, svc.Name)
		}
	}
	if len(selected) != 1 || selected[0] != release {
		t.Errorf("the ServiceMonitor selects the Services %v, want only %s", selected, release)
	}
	if len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("%d endpoints, want 1", len(sm.Spec.Endpoints))
	}
	ep := sm.Spec.Endpoints[0]
	auth := ep.Authorization
	if ep.Port != "http" || ep.Path != "/metrics" || auth == nil || auth.Credentials == nil ||
		auth.Credentials.Name != "urlflow-metrics-token" || auth.Credentials.Key != "token" {
		t.Errorf("the endpoint is not /metrics on http with the token urlflow-metrics-token/token: %+v", ep)
	}
	job := `job="urlflow"`
	if len(ep.RelabelConfigs) != 1 || ep.RelabelConfigs[0].TargetLabel != "job" || ep.RelabelConfigs[0].Replacement == nil ||
		*ep.RelabelConfigs[0].Replacement != "urlflow" || !strings.Contains(alertsText(t), job) {
		t.Errorf("the relabelings %+v do not set %s, which alerts.yml names", ep.RelabelConfigs, job)
	}
}

func alertsText(t *testing.T) string {
	t.Helper()
	alerts, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	return string(alerts)
}
