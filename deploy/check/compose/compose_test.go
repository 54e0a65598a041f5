// Package compose checks the compose quickstart, deploy/compose: that the compose
// specification's own loader accepts it (an unknown or misspelled key fails), and that its
// parts fit together: urlflow and the browser reach Dex at one issuer URL, Dex knows
// urlflow's redirect and resource, Redis keeps an append-only file, and nothing listens
// beyond loopback. The file cannot be run where urlflow is developed (its base images
// cannot be pulled); this is what can be checked without running it.
package compose

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"sigs.k8s.io/yaml"
)

const dir = "../../compose"

// load loads compose.yaml of dir as docker compose would, with an empty environment.
func load(t *testing.T, dir string) (*types.Project, error) {
	t.Helper()
	options, err := cli.NewProjectOptions([]string{filepath.Join(dir, "compose.yaml")},
		cli.WithWorkingDirectory(dir), cli.WithEnv(nil), cli.WithConsistency(true))
	if err != nil {
		t.Fatal(err)
	}
	return options.LoadProject(context.Background())
}

// dexConfig is what the test reads of deploy/compose/dex.yaml.
type dexConfig struct {
	Issuer  string `json:"issuer"`
	Clients []struct {
		ID        string   `json:"id"`
		Secret    string   `json:"secret"`
		Redirects []string `json:"redirectURIs"`
	} `json:"staticClients"`
	Passwords []struct {
		Email string `json:"email"`
	} `json:"staticPasswords"`
}

func TestTheQuickstartLoadsAndItsPartsFit(t *testing.T) {
	project, err := load(t, dir)
	if err != nil {
		t.Fatalf("the compose loader refused deploy/compose/compose.yaml: %v", err)
	}
	urlflow, dex, redis := service(t, project, "urlflow"), service(t, project, "dex"), service(t, project, "redis")
	if urlflow.NetworkMode != "service:dex" {
		t.Errorf("urlflow's network_mode is %q: urlflow and the browser would not reach Dex by one name", urlflow.NetworkMode)
	}
	if !urlflow.ReadOnly {
		t.Error("urlflow's root filesystem is writable (read_only: true was meant)")
	}
	if !slices.Contains(redis.Command, "--appendonly") || !slices.Contains(redis.Command, "yes") {
		t.Errorf("Redis runs without an append-only file: %q", redis.Command)
	}
	for _, s := range project.Services {
		for _, p := range s.Ports {
			if p.HostIP != "127.0.0.1" {
				t.Errorf("%s publishes port %s beyond loopback (host IP %q)", s.Name, p.Published, p.HostIP)
			}
		}
	}
	if !publishes(dex, "8080") || !publishes(dex, "5556") {
		t.Error("Dex's namespace, which urlflow shares, must publish 8080 (urlflow) and 5556 (Dex)")
	}
	checkDex(t, urlflow.Environment)
}

// checkDex compares urlflow's environment with Dex's configuration.
func checkDex(t *testing.T, env types.MappingWithEquals) {
	raw, err := os.ReadFile(filepath.Join(dir, "dex.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var d dexConfig
	if err := yaml.Unmarshal(raw, &d); err != nil {
		t.Fatalf("dex.yaml: %v", err)
	}
	get := func(name string) string {
		if v := env[name]; v != nil {
			return *v
		}
		t.Errorf("urlflow's environment has no %s", name)
		return ""
	}
	public := get("URLFLOW_PUBLIC_URL")
	if issuer := get("URLFLOW_OIDC_ISSUER"); issuer != d.Issuer {
		t.Errorf("urlflow's issuer %q is not Dex's %q", issuer, d.Issuer)
	}
	clients := map[string]string{}
	for _, c := range d.Clients {
		clients[c.ID] = c.Secret
		if !slices.Contains(c.Redirects, public+"/auth/callback") {
			t.Errorf("Dex's client %s does not allow urlflow's redirect %s/auth/callback", c.ID, public)
		}
	}
	if secret, ok := clients[get("URLFLOW_OIDC_CLIENT_ID")]; !ok || secret != get("URLFLOW_OIDC_CLIENT_SECRET") {
		t.Error("urlflow's client ID and secret are not a client of Dex's")
	}
	if _, ok := clients[public+"/mcp"]; !ok {
		t.Errorf("Dex has no client %s/mcp, whose tokens MCP clients would use", public)
	}
	if len(d.Passwords) == 0 || !strings.Contains(mustRead(t, filepath.Join(dir, "compose.yaml")), d.Passwords[0].Email) {
		t.Error("the user compose.yaml tells people to sign in as is not Dex's static user")
	}
}

// TestTheLoaderRefusesAMisspelledKey: the check above would pass a file whose misspelled
// keys compose ignores unless the loader validates; it does.
func TestTheLoaderRefusesAMisspelledKey(t *testing.T) {
	mutated := t.TempDir()
	text := strings.Replace(mustRead(t, filepath.Join(dir, "compose.yaml")), "read_only: true", "readonly: true", 1)
	if err := os.WriteFile(filepath.Join(mutated, "compose.yaml"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	// dex.yaml is named by configs: copied, so that only the misspelling differs.
	if err := os.WriteFile(filepath.Join(mutated, "dex.yaml"), []byte(mustRead(t, filepath.Join(dir, "dex.yaml"))), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := load(t, mutated); err == nil || !strings.Contains(err.Error(), "readonly") {
		t.Fatalf("a compose file with readonly: for read_only: loaded (err %v)", err)
	}
}

func service(t *testing.T, p *types.Project, name string) types.ServiceConfig {
	t.Helper()
	s, err := p.GetService(name)
	if err != nil {
		t.Fatalf("no service %s: %v", name, err)
	}
	return s
}

func publishes(s types.ServiceConfig, port string) bool {
	return slices.ContainsFunc(s.Ports, func(p types.ServicePortConfig) bool { return p.Published == port })
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
