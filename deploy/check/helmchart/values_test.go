package helmchart

import (
	"path"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
)

// TestMissingRequiredValueFailsByName: ci/minimal.yaml with one required value emptied does
// not render, and the failure names the value.
func TestMissingRequiredValueFailsByName(t *testing.T) {
	required := []struct{ set, want string }{
		{"image.repository=", "image.repository is required"},
		{"image.tag=", "image.tag (or image.digest) is required"},
		{"publicUrl=", "publicUrl is required"},
		{"oidc.issuer=", "oidc.issuer is required"},
		{"oidc.clientId=", "oidc.clientId is required"},
		{"secrets.keys.name=", "secrets.keys.name is required"},
		{"secrets.oidcClientSecret.name=", "secrets.oidcClientSecret.name is required"},
		{"secrets.redisUrl.name=", "secrets.redisUrl.name is required"},
		{"serviceMonitor.enabled=true,secrets.operatorReadonlyTokens.name=ro", "serviceMonitor.tokenSecret.name is required"},
		{"serviceMonitor.enabled=true", "serviceMonitor needs an operator token"},
	}
	for _, r := range required {
		t.Run(r.set, func(t *testing.T) {
			t.Parallel()
			wantFailure(t, r.want, "-f", ciValues("minimal"), "--set", r.set)
		})
	}
	t.Run("services without secrets.userReferenceKey", func(t *testing.T) {
		t.Parallel()
		wantFailure(t, "secrets.userReferenceKey.name is required when config.file has services",
			"-f", ciValues("everything"), "--set", "secrets.userReferenceKey.name=")
	})
	t.Run("no values", func(t *testing.T) {
		t.Parallel()
		wantFailure(t, "is required")
	})
}

// TestSchemaRefusesUnknownKeysAndBadValues: values.schema.json refuses an unknown
// top-level key, a misspelt nested key, a secret value where a Secret's name belongs, and
// values urlflow would refuse, before anything renders.
func TestSchemaRefusesUnknownKeysAndBadValues(t *testing.T) {
	refused := []struct{ set, want string }{
		{"replicas=3", "additional properties 'replicas' not allowed"},
		{"ingress.enabeld=true", "additional properties 'enabeld' not allowed"},
		{"secrets.keys.value=k1:AAAA", "additional properties 'value' not allowed"},
		{"redis.url=redis://:pw@redis:6379", "additional properties 'url' not allowed"},
		{"publicUrl=http://urlflow.example.com", "/publicUrl"},
		{"logLevel=verbose", "/logLevel"},
		{"redis.topology=replicated", "/redis/topology"},
		{"shutdownGraceSeconds=0", "/shutdownGraceSeconds"},
	}
	for _, r := range refused {
		t.Run(r.set, func(t *testing.T) {
			t.Parallel()
			wantFailure(t, r.want, "-f", ciValues("minimal"), "--set", r.set)
		})
	}
}

// TestRedisTopologyReachesUrlflow: each ci file's Redis topology is URLFLOW_REDIS_TOPOLOGY,
// and the whole URL is the file URLFLOW_REDIS_URL_FILE names, from the Secret and key given.
func TestRedisTopologyReachesUrlflow(t *testing.T) {
	topologies := map[string]struct{ topology, secret, key string }{
		"minimal":    {"standalone", "urlflow-redis", "url"},
		"sentinel":   {"sentinel", "urlflow-redis-sentinel", "url"},
		"cluster":    {"cluster", "urlflow", "redis-url"},
		"everything": {"standalone", "urlflow-redis", "url"},
	}
	forEachCI(t, func(t *testing.T, name string) {
		want, ok := topologies[name]
		if !ok {
			t.Fatalf("ci/%s.yaml is new: say in topologies which Redis it names", name)
		}
		d := one[appsv1.Deployment](t, decoded(t, name))
		env := envOf(t, urlflowContainer(t, d))
		if got := env["URLFLOW_REDIS_TOPOLOGY"].Value; got != want.topology {
			t.Errorf("URLFLOW_REDIS_TOPOLOGY=%q, want %q", got, want.topology)
		}
		file := env["URLFLOW_REDIS_URL_FILE"].Value
		if secret, key := projectedSource(t, d, path.Base(file)); secret != want.secret || key != want.key {
			t.Errorf("URLFLOW_REDIS_URL_FILE=%s comes from Secret %s key %s, want %s key %s", file, secret, key, want.secret, want.key)
		}
	})
}

// projectedSource is the Secret and key that fill the file of the projected Secrets.
func projectedSource(t *testing.T, d *appsv1.Deployment, file string) (secret, key string) {
	t.Helper()
	v := volume(t, d, volumeMount(t, urlflowContainer(t, d), secretsDir).Name)
	for _, src := range v.Projected.Sources {
		for _, item := range src.Secret.Items {
			if item.Path == file {
				return src.Secret.Name, item.Key
			}
		}
	}
	t.Fatalf("no projected Secret fills %s", file)
	return "", ""
}
