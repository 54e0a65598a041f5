package helmchart

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// urlflowContainer is the Deployment's one container, urlflow.
func urlflowContainer(t *testing.T, d *appsv1.Deployment) corev1.Container {
	t.Helper()
	if cs := d.Spec.Template.Spec.Containers; len(cs) == 1 && cs[0].Name == "urlflow" {
		return cs[0]
	}
	t.Fatalf("the Deployment's containers are not exactly urlflow: %+v", d.Spec.Template.Spec.Containers)
	return corev1.Container{}
}

// envOf maps the container's variables by name; a name set twice fails the test.
func envOf(t *testing.T, c corev1.Container) map[string]corev1.EnvVar {
	t.Helper()
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		if _, twice := env[e.Name]; twice {
			t.Errorf("%s is set twice", e.Name)
		}
		env[e.Name] = e
	}
	return env
}

// TestPodSecurityIsRestricted: the pod and its container run as 65532, non-root, with a
// read-only root, no privilege escalation, no capability, the runtime's seccomp profile,
// and no service account token.
func TestPodSecurityIsRestricted(t *testing.T) {
	forEachCI(t, func(t *testing.T, name string) {
		docs := decoded(t, name)
		pod := one[appsv1.Deployment](t, docs).Spec.Template.Spec
		if err := restrictedPod(pod); err != nil {
			t.Error(err)
		}
		if err := restrictedContainer(pod.Containers[0].SecurityContext); err != nil {
			t.Error(err)
		}
		for _, sa := range objects[corev1.ServiceAccount](docs) {
			if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
				t.Errorf("ServiceAccount %s mounts its token", sa.Name)
			}
		}
	})
}

func restrictedPod(pod corev1.PodSpec) error {
	sc := pod.SecurityContext
	switch {
	case sc == nil:
		return fmt.Errorf("the pod has no securityContext")
	case !isTrue(sc.RunAsNonRoot) || !is65532(sc.RunAsUser) || !is65532(sc.RunAsGroup) || !is65532(sc.FSGroup):
		return fmt.Errorf("the pod does not run as non-root 65532:65532 (fsGroup 65532): %+v", sc)
	case sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		return fmt.Errorf("the pod's seccomp profile is not RuntimeDefault: %+v", sc.SeccompProfile)
	case pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken:
		return fmt.Errorf("the pod mounts a service account token")
	case pod.HostNetwork || pod.HostPID || pod.HostIPC:
		return fmt.Errorf("the pod shares a host namespace")
	}
	return nil
}

func restrictedContainer(sc *corev1.SecurityContext) error {
	switch {
	case sc == nil:
		return fmt.Errorf("the container has no securityContext")
	case !isTrue(sc.RunAsNonRoot) || !is65532(sc.RunAsUser) || !is65532(sc.RunAsGroup):
		return fmt.Errorf("the container does not run as non-root 65532:65532: %+v", sc)
	case !isTrue(sc.ReadOnlyRootFilesystem):
		return fmt.Errorf("the container's root filesystem is writable")
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || isTrue(sc.Privileged):
		return fmt.Errorf("the container may escalate its privileges")
	case sc.Capabilities == nil || len(sc.Capabilities.Add) > 0 || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL":
		return fmt.Errorf("the container's capabilities are not drop [ALL]: %+v", sc.Capabilities)
	case sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		return fmt.Errorf("the container's seccomp profile is not RuntimeDefault")
	}
	return nil
}

func isTrue(b *bool) bool    { return b != nil && *b }
func is65532(id *int64) bool { return id != nil && *id == 65532 }

// TestProbesAndDrain: liveness on /healthz and readiness on /readyz at urlflow's port
// (URLFLOW_ADDR's), a preStop sleep by the kubelet (the image has no shell), and a grace
// period longer than the sleep, URLFLOW_SHUTDOWN_GRACE and 10 s for streams and margin.
func TestProbesAndDrain(t *testing.T) {
	forEachCI(t, func(t *testing.T, name string) {
		d := one[appsv1.Deployment](t, decoded(t, name))
		c := urlflowContainer(t, d)
		env := envOf(t, c)
		if err := probes(c, env["URLFLOW_ADDR"].Value); err != nil {
			t.Error(err)
		}
		pre := c.Lifecycle.PreStop
		if pre == nil || pre.Sleep == nil || pre.Exec != nil || pre.Sleep.Seconds < 1 {
			t.Fatalf("preStop is not a sleep of a second or more: %+v", pre)
		}
		grace, err := time.ParseDuration(env["URLFLOW_SHUTDOWN_GRACE"].Value)
		if err != nil {
			t.Fatalf("URLFLOW_SHUTDOWN_GRACE: %v", err)
		}
		period := d.Spec.Template.Spec.TerminationGracePeriodSeconds
		least := pre.Sleep.Seconds + int64(grace.Seconds()) + 10
		if period == nil {
			t.Fatal("terminationGracePeriodSeconds is unset")
		}
		if *period < least {
			t.Errorf("terminationGracePeriodSeconds %d, want at least %d: preStop %ds + grace %v + 10s", *period, least, pre.Sleep.Seconds, grace)
		}
	})
}

func probes(c corev1.Container, addr string) error {
	if len(c.Ports) != 1 || c.Ports[0].Name != "http" || ":"+strconv.Itoa(int(c.Ports[0].ContainerPort)) != addr {
		return fmt.Errorf("the container's port %+v is not http at URLFLOW_ADDR %q", c.Ports, addr)
	}
	for _, p := range []struct {
		kind  string
		probe *corev1.Probe
		path  string
	}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port.String() != "http" {
			return fmt.Errorf("the %s probe is not GET %s on port http: %+v", p.kind, p.path, p.probe)
		}
	}
	return nil
}

// TestTopologySpreadsByNodeAndZone: replicas spread by host name and by zone, over the
// pods of this release (the constraints' selector matches the pod's labels).
func TestTopologySpreadsByNodeAndZone(t *testing.T) {
	d := one[appsv1.Deployment](t, decoded(t, "minimal"))
	pod := d.Spec.Template
	var keys []string
	for _, c := range pod.Spec.TopologySpreadConstraints {
		keys = append(keys, c.TopologyKey)
		for k, v := range c.LabelSelector.MatchLabels {
			if pod.Labels[k] != v {
				t.Errorf("the %s constraint selects %s=%s, which the pods do not carry", c.TopologyKey, k, v)
			}
		}
	}
	if got := strings.Join(keys, " "); got != "kubernetes.io/hostname topology.kubernetes.io/zone" {
		t.Errorf("topology spread keys %q, want the host name and the zone", got)
	}
}
