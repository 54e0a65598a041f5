package helmchart

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// sessionAnnotations make the -sessions Ingress an ingress-nginx canary that takes every
// request carrying Mcp-Session-Id and hashes it by the header.
var sessionAnnotations = map[string]string{
	"nginx.ingress.kubernetes.io/canary":                   "true",
	"nginx.ingress.kubernetes.io/canary-by-header":         "Mcp-Session-Id",
	"nginx.ingress.kubernetes.io/canary-by-header-pattern": ".",
	"nginx.ingress.kubernetes.io/upstream-hash-by":         "$http_mcp_session_id",
}

// TestIngressKeepsAnMcpSessionOnOneReplica: with the Ingress on (ci/everything.yaml), the
// main Ingress serves publicUrl's host with TLS and no hash, so that requests without the
// header are balanced as usual; the -sessions canary on the same host and path hashes the
// requests that carry Mcp-Session-Id by it; each names its own Service, and both Services
// select the same pods.
func TestIngressKeepsAnMcpSessionOnOneReplica(t *testing.T) {
	docs := decoded(t, "everything")
	main, sessions := ingressNamed(t, docs, release), ingressNamed(t, docs, release+"-sessions")
	for key, want := range sessionAnnotations {
		if got, ok := sessions.Annotations[key]; got != want {
			t.Errorf("the -sessions Ingress has %s=%q (set: %v), want %q", key, got, ok, want)
		}
		if _, ok := main.Annotations[key]; ok {
			t.Errorf("the main Ingress has %s: every request without the header would hash to one replica", key)
		}
	}
	mainRule, sessionsRule := onlyRule(t, main), onlyRule(t, sessions)
	if mainRule.Host != "urlflow.example.com" || sessionsRule.Host != mainRule.Host {
		t.Errorf("hosts %q and %q, want publicUrl's urlflow.example.com for both", mainRule.Host, sessionsRule.Host)
	}
	if len(main.Spec.TLS) != 1 || main.Spec.TLS[0].SecretName != "urlflow-tls" || len(sessions.Spec.TLS) != 0 {
		t.Errorf("TLS %+v and %+v, want urlflow-tls on the main Ingress only", main.Spec.TLS, sessions.Spec.TLS)
	}
	pods := labels.Set(one[appsv1.Deployment](t, docs).Spec.Template.Labels)
	for _, rule := range []networkingv1.IngressRule{mainRule, sessionsRule} {
		path := rule.HTTP.Paths[0]
		svc := serviceNamed(t, docs, path.Backend.Service.Name)
		if path.Path != "/" || !labels.SelectorFromSet(svc.Spec.Selector).Matches(pods) {
			t.Errorf("%s on path %s does not reach urlflow's pods", svc.Name, path.Path)
		}
	}
	if mainRule.HTTP.Paths[0].Backend.Service.Name == sessionsRule.HTTP.Paths[0].Backend.Service.Name {
		t.Error("the canary names the main Ingress's Service, which ingress-nginx does not take")
	}
}

// TestIngressAffinityCanBeTurnedOff: mcpSessionAffinity none leaves one Ingress, no
// -sessions Service and no annotation of the chart's.
func TestIngressAffinityCanBeTurnedOff(t *testing.T) {
	docs := decoded(t, "everything", "--set", "ingress.mcpSessionAffinity=none")
	ingresses := objects[networkingv1.Ingress](docs)
	if len(ingresses) != 1 || len(objects[corev1.Service](docs)) != 1 {
		t.Fatalf("%d Ingresses and %d Services, want 1 and 1", len(ingresses), len(objects[corev1.Service](docs)))
	}
	for key := range sessionAnnotations {
		if _, ok := ingresses[0].Annotations[key]; ok {
			t.Errorf("the Ingress has %s", key)
		}
	}
}

func ingressNamed(t *testing.T, docs []Document, name string) *networkingv1.Ingress {
	t.Helper()
	for _, i := range objects[networkingv1.Ingress](docs) {
		if i.Name == name {
			return i
		}
	}
	t.Fatalf("no Ingress %s", name)
	return nil
}

func serviceNamed(t *testing.T, docs []Document, name string) *corev1.Service {
	t.Helper()
	for _, s := range objects[corev1.Service](docs) {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no Service %s", name)
	return nil
}

func onlyRule(t *testing.T, i *networkingv1.Ingress) networkingv1.IngressRule {
	t.Helper()
	if len(i.Spec.Rules) != 1 || i.Spec.Rules[0].HTTP == nil || len(i.Spec.Rules[0].HTTP.Paths) != 1 {
		t.Fatalf("Ingress %s has not exactly one rule with one path: %+v", i.Name, i.Spec.Rules)
	}
	return i.Spec.Rules[0]
}
