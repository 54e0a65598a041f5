package helmchart

import (
	"path"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// secretSettings are urlflow's settings that hold a secret (docs/configuration.md, column
// "secret"), each readable from NAME_FILE.
var secretSettings = []string{"URLFLOW_KEYS", "URLFLOW_REDIS_URL", "URLFLOW_OIDC_CLIENT_SECRET",
	"URLFLOW_OPERATOR_TOKENS", "URLFLOW_OPERATOR_READONLY_TOKENS", "URLFLOW_USER_REFERENCE_KEY", "URLFLOW_TOKEN", "URLFLOW_HOOK_TOKEN"}

// requiredSecretFiles are the secret settings urlflow serve cannot start without.
var requiredSecretFiles = []string{"URLFLOW_KEYS_FILE", "URLFLOW_REDIS_URL_FILE", "URLFLOW_OIDC_CLIENT_SECRET_FILE"}

const secretsDir = "/run/secrets/urlflow"

// TestSecretsAreFilesFromExistingSecrets: no render holds a Secret object or a secret
// value. Each secret setting is given only as NAME_FILE, naming a file of the read-only
// projected volume at /run/secrets/urlflow (0440) that an existing Secret fills; no
// variable comes from a secretKeyRef, which kubectl describe would show by name.
func TestSecretsAreFilesFromExistingSecrets(t *testing.T) {
	forEachCI(t, func(t *testing.T, name string) {
		out, err := template("-f", ciValues(name))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(out), "\nkind: Secret\n") {
			t.Error("a Secret object is rendered")
		}
		d := one[appsv1.Deployment](t, decoded(t, name))
		files := projectedFiles(t, d)
		env := envOf(t, urlflowContainer(t, d))
		for _, required := range requiredSecretFiles {
			if _, ok := env[required]; !ok {
				t.Errorf("%s is not set", required)
			}
		}
		for _, e := range env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				t.Errorf("%s comes from a secretKeyRef", e.Name)
			}
			checkSecretSetting(t, e, files)
		}
	})
}

func checkSecretSetting(t *testing.T, e corev1.EnvVar, files map[string]bool) {
	t.Helper()
	for _, s := range secretSettings {
		switch e.Name {
		case s:
			t.Errorf("%s is set as a variable, not as %s_FILE", s, s)
		case s + "_FILE":
			if !files[e.Value] {
				t.Errorf("%s=%s is not a file of the projected Secrets under %s", e.Name, e.Value, secretsDir)
			}
		}
	}
}

// projectedFiles are the files of the volume mounted read-only at /run/secrets/urlflow,
// which must be a projection of Secrets only, readable by the owner and group only.
func projectedFiles(t *testing.T, d *appsv1.Deployment) map[string]bool {
	t.Helper()
	mount := volumeMount(t, urlflowContainer(t, d), secretsDir)
	if !mount.ReadOnly {
		t.Errorf("%s is mounted writable", secretsDir)
	}
	v := volume(t, d, mount.Name).Projected
	if v == nil || v.DefaultMode == nil || *v.DefaultMode != 0o440 {
		t.Fatalf("%s is not a projected volume of mode 0440: %+v", secretsDir, v)
	}
	files := map[string]bool{}
	for _, src := range v.Sources {
		if src.Secret == nil || src.ConfigMap != nil || src.DownwardAPI != nil || src.ServiceAccountToken != nil {
			t.Fatalf("%s projects something else than a Secret: %+v", secretsDir, src)
		}
		for _, item := range src.Secret.Items {
			files[path.Join(secretsDir, item.Path)] = true
		}
	}
	return files
}

func volumeMount(t *testing.T, c corev1.Container, mountPath string) corev1.VolumeMount {
	t.Helper()
	for _, m := range c.VolumeMounts {
		if m.MountPath == mountPath {
			return m
		}
	}
	t.Fatalf("nothing is mounted at %s", mountPath)
	return corev1.VolumeMount{}
}

func volume(t *testing.T, d *appsv1.Deployment, name string) corev1.Volume {
	t.Helper()
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == name {
			return v
		}
	}
	t.Fatalf("the pod has no volume %s", name)
	return corev1.Volume{}
}

// TestExtraEnvRefusesSecretsAndTakenNames: extraEnv cannot smuggle a secret value in, set a
// variable the chart sets, or set a test-only setting that urlflow serve refuses.
func TestExtraEnvRefusesSecretsAndTakenNames(t *testing.T) {
	cases := []struct{ env, want string }{
		{`{"name": "URLFLOW_KEYS", "value": "k1:AAAA"}`, "URLFLOW_KEYS holds a secret"},
		{`{"name": "URLFLOW_HOOK_TOKEN", "value": "0123456789abcdef"}`, "URLFLOW_HOOK_TOKEN holds a secret"},
		{`{"name": "URLFLOW_OPERATOR_TOKENS_FILE", "value": "/tmp/tokens"}`, "URLFLOW_OPERATOR_TOKENS_FILE holds a secret"},
		{`{"name": "URLFLOW_REDIS_URL_FILE", "value": "/tmp/url"}`, "URLFLOW_REDIS_URL_FILE is set by the chart"},
		{`{"name": "URLFLOW_PUBLIC_URL", "value": "https://other.example"}`, "URLFLOW_PUBLIC_URL is set by the chart"},
		{`{"name": "URLFLOW_TEST_PUSH_WAIT", "value": "1s"}`, "URLFLOW_TEST_PUSH_WAIT is test-only"},
	}
	for _, c := range cases {
		wantFailure(t, c.want, "-f", ciValues("minimal"), "--set-json", "extraEnv=["+c.env+"]")
	}
}

// TestExtraSecretMountsHoldTheFilesTheConfigurationNames: each extra Secret is mounted
// read-only (0440) where ci/everything.yaml says, and every *_file path of the
// configuration file (a service's keys_file and webhook secret_file, a provider's
// client_secret_file) lies under one of them.
func TestExtraSecretMountsHoldTheFilesTheConfigurationNames(t *testing.T) {
	docs := decoded(t, "everything")
	d := one[appsv1.Deployment](t, docs)
	var mounts []string
	for _, m := range urlflowContainer(t, d).VolumeMounts {
		v := volume(t, d, m.Name)
		if v.Secret == nil || m.MountPath == secretsDir {
			continue
		}
		if !m.ReadOnly || v.Secret.DefaultMode == nil || *v.Secret.DefaultMode != 0o440 {
			t.Errorf("the Secret %s at %s is not read-only and 0440", v.Secret.SecretName, m.MountPath)
		}
		mounts = append(mounts, m.MountPath)
	}
	if len(mounts) != 2 {
		t.Fatalf("extra Secret mounts %v, want the 2 of ci/everything.yaml", mounts)
	}
	files := configFiles(configFile(t, docs))
	if len(files) != 3 {
		t.Fatalf("the configuration names the files %v, want 3", files)
	}
	for _, f := range files {
		if !under(f, mounts) {
			t.Errorf("the configuration names %s, which no extra Secret mount %v holds", f, mounts)
		}
	}
}

func under(file string, dirs []string) bool {
	for _, dir := range dirs {
		if strings.HasPrefix(file, strings.TrimSuffix(dir, "/")+"/") {
			return true
		}
	}
	return false
}
