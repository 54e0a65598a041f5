package helmchart

import (
	"fmt"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// TestAutoscalerOwnsTheReplicaCount: with autoscaling on, the Deployment leaves replicas to
// the HorizontalPodAutoscaler, which scales it by CPU and memory; without, replicaCount.
func TestAutoscalerOwnsTheReplicaCount(t *testing.T) {
	docs := decoded(t, "everything")
	d := one[appsv1.Deployment](t, docs)
	hpa := one[autoscalingv2.HorizontalPodAutoscaler](t, docs)
	if d.Spec.Replicas != nil {
		t.Errorf("the Deployment sets replicas %d, which would fight the autoscaler", *d.Spec.Replicas)
	}
	ref := hpa.Spec.ScaleTargetRef
	if ref.Kind != "Deployment" || ref.Name != d.Name || *hpa.Spec.MinReplicas != 3 || hpa.Spec.MaxReplicas != 10 {
		t.Errorf("the autoscaler scales %s %s from %d to %d, want Deployment %s from 3 to 10", ref.Kind, ref.Name, *hpa.Spec.MinReplicas, hpa.Spec.MaxReplicas, d.Name)
	}
	var resources []string
	for _, m := range hpa.Spec.Metrics {
		resources = append(resources, fmt.Sprintf("%s %d%%", m.Resource.Name, *m.Resource.Target.AverageUtilization))
	}
	if !slices.Equal(resources, []string{"cpu 70%", "memory 80%"}) {
		t.Errorf("the autoscaler's targets %v, want cpu 70%% and memory 80%%", resources)
	}
	if r := one[appsv1.Deployment](t, decoded(t, "minimal")).Spec.Replicas; r == nil || *r != 2 {
		t.Errorf("without autoscaling, replicas %v, want replicaCount 2", r)
	}
}

// TestDisruptionBudgetSelectsThePods: the PodDisruptionBudget covers urlflow's pods, and
// wants exactly one of maxUnavailable and minAvailable.
func TestDisruptionBudgetSelectsThePods(t *testing.T) {
	docs := decoded(t, "everything")
	pdb := one[policyv1.PodDisruptionBudget](t, docs)
	pods := labels.Set(one[appsv1.Deployment](t, docs).Spec.Template.Labels)
	selector := labels.SelectorFromSet(pdb.Spec.Selector.MatchLabels)
	if !selector.Matches(pods) || pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 || pdb.Spec.MinAvailable != nil {
		t.Errorf("the PodDisruptionBudget is not maxUnavailable 1 over urlflow's pods: %+v", pdb.Spec)
	}
	wantFailure(t, "set exactly one of maxUnavailable and minAvailable",
		"-f", ciValues("everything"), "--set", "podDisruptionBudget.minAvailable=1")
}

// TestNetworkPolicyOpensOnlyWhatUrlflowUses: ingress only to port http, from the peers
// given; with egress restricted, DNS, Redis, https and the extra rules, nothing else; by
// default egress stays open (urlflow reaches its issuer and APIs by host name).
func TestNetworkPolicyOpensOnlyWhatUrlflowUses(t *testing.T) {
	np := one[networkingv1.NetworkPolicy](t, decoded(t, "everything"))
	if len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].Ports) != 1 || np.Spec.Ingress[0].Ports[0].Port.String() != "http" ||
		len(np.Spec.Ingress[0].From) != 2 {
		t.Errorf("ingress %+v, want port http from the 2 peers of ci/everything.yaml", np.Spec.Ingress)
	}
	if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
		t.Errorf("policy types %v: egress is not restricted", np.Spec.PolicyTypes)
	}
	if got := egressPorts(np); !slices.Equal(got, []string{"UDP 53", "TCP 53", "TCP 6379", "TCP 443", "TCP 4318"}) {
		t.Errorf("egress ports %v, want DNS, Redis, https and the OTLP collector", got)
	}
	open := one[networkingv1.NetworkPolicy](t, decoded(t, "minimal", "--set", "networkPolicy.enabled=true"))
	if len(open.Spec.Egress) != 0 || slices.Contains(open.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) || len(open.Spec.Ingress[0].From) != 0 {
		t.Errorf("by default, policy types %v with %d egress rules and ingress from %v, want Ingress only, from anywhere",
			open.Spec.PolicyTypes, len(open.Spec.Egress), open.Spec.Ingress[0].From)
	}
}

func egressPorts(np *networkingv1.NetworkPolicy) []string {
	var ports []string
	for _, rule := range np.Spec.Egress {
		for _, p := range rule.Ports {
			ports = append(ports, fmt.Sprintf("%s %s", *p.Protocol, p.Port))
		}
	}
	return ports
}
