package e2e

import (
	"bufio"
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The release image, built by scripts/image as a release would be, runs urlflow serve on a
// read-only root filesystem (not even the tmpfs podman would add), as user 65532, passes
// /readyz and its own HEALTHCHECK, and a whole secret flow completes against it in
// Chromium, with the test's redis-server and OpenID provider. The container shares the
// host's network so that it reaches them on 127.0.0.1.
func TestTheImageServesAWholeFlowOnAReadOnlyRoot(t *testing.T) {
	t.Parallel()
	podman := requirePodman(t)
	version := "v0.0.0-e2e." + strings.ToLower(rand.Text()[:8])
	image := buildImage(t, podman, version)
	name := "urlflow-e2e-" + strings.TrimPrefix(version, "v0.0.0-e2e.")

	p := startProductionWith(t, productionOptions{style: "error", command: func(addr string, env []string) *exec.Cmd {
		t.Cleanup(func() { exec.Command(podman, "rm", "--force", "--time", "0", name).Run() }) // after launch's stop
		args := []string{"--runtime", "runc", "run", "--rm", "--name", name, "--network", "host",
			"--read-only", "--read-only-tmpfs=false", "--health-interval", "disable"}
		args = append(args, podmanLimits(t)...)
		// URLFLOW_ADDR rather than --addr: the HEALTHCHECK reads the port from it.
		for _, kv := range append(env, "URLFLOW_ADDR="+addr) {
			if path, ok := strings.CutPrefix(kv, "URLFLOW_CONFIG="); ok {
				// Mounted where an operator would, readable by the image's user.
				if err := os.Chmod(path, 0o644); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--volume", path+":/etc/urlflow/urlflow.yaml:ro")
				kv = "URLFLOW_CONFIG=/etc/urlflow/urlflow.yaml"
			}
			args = append(args, "--env", kv)
		}
		return exec.Command(podman, append(args, image)...) // the image's own command: serve
	}})

	eventually(t, 30*time.Second, "/readyz answers 200", func() bool {
		resp, err := http.Get(p.s.BaseURL + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	if out, err := exec.Command(podman, "healthcheck", "run", name).CombinedOutput(); err != nil {
		t.Fatalf("podman healthcheck run: %v\n%s", err, out)
	}
	out, err := exec.Command(podman, "inspect", "--format", "{{.Config.User}} {{.HostConfig.ReadonlyRootfs}}", name).Output()
	if err != nil || strings.TrimSpace(string(out)) != "65532:65532 true" {
		t.Fatalf("the container's user and read-only root: %q, %v; want 65532:65532 true", out, err)
	}

	aliceToken := p.idp.accessToken(t, p.catcher, p.alice, "alice", "alice-pw", p.resource)
	alice := connect(t, p.s, clientConfig{Token: aliceToken, URLMode: true})
	params := askErrorStyle(t, alice)
	p.aliceStores(t, alice, params, canary, "image-consent")
	requireEvents(t, p.s.status(params.ElicitationID, aliceToken), "created", "browser_open", "verified")
	if res := alice.CallOK("list_connections", nil); !strings.Contains(text(res), "demo_api_key") {
		t.Fatalf("Alice's secret is not listed: %s", text(res))
	}
	requireNoCanary(t, p.rs, map[string]string{"MCP traffic": alice.Traffic.String(), "urlflow output": p.s.Output()})
}

// requirePodman returns the path of podman, and fails the test when podman or runc is
// missing: the full tier installs them (scripts/test).
func requirePodman(t *testing.T) string {
	t.Helper()
	podman, err := exec.LookPath("podman")
	if err == nil {
		_, err = exec.LookPath("runc")
	}
	if err != nil {
		t.Fatalf("the image test needs podman and runc: apt-get install -y podman runc (%v)", err)
	}
	return podman
}

// buildImage builds the image with scripts/image and returns the reference of its
// manifest; the manifest and its images are removed when the test ends.
func buildImage(t *testing.T, podman, version string) string {
	t.Helper()
	image := "localhost/urlflow:" + version
	t.Cleanup(func() {
		exec.Command(podman, "manifest", "rm", image).Run()
		exec.Command(podman, "rmi", "--force", image+"-amd64", image+"-arm64").Run()
	})
	// A cold build cache (a fresh machine) builds the module for two architectures while
	// the other end-to-end tests run: that once took over 5 minutes.
	ctx, cancel := context.WithTimeout(t.Context(), 12*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "../scripts/image", version)
	build.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	out, err := build.CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/image %s: %v\n%s", version, err, out)
	}
	t.Logf("scripts/image built %s in %s:\n%s", image, time.Since(start).Round(time.Second), lastLines(string(out), 4))
	labels, err := exec.Command(podman, "image", "inspect", "--format",
		`{{index .Labels "org.opencontainers.image.version"}} {{index .Labels "org.opencontainers.image.licenses"}}`, image).Output()
	if err != nil || strings.TrimSpace(string(labels)) != version+" Apache-2.0" {
		t.Fatalf("the image's version and licence labels: %q, %v", labels, err)
	}
	return image
}

// podmanLimits are the --ulimit flags that give the container the limits of this process.
// As root, podman asks for 1048576 open files and processes by default, and where runc
// may not raise a limit (a machine that is itself a container without CAP_SYS_RESOURCE)
// the container does not start. Podman lowers its own process limit to pid_max.
func podmanLimits(t *testing.T) []string {
	t.Helper()
	var files syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &files); err != nil {
		t.Fatal(err)
	}
	procs := limitOf(t, "Max processes")
	if b, err := os.ReadFile("/proc/sys/kernel/pid_max"); err == nil {
		if max, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil {
			procs = min(procs, max)
		}
	}
	return []string{"--ulimit", fmt.Sprintf("nofile=%d:%d", files.Max, files.Max), "--ulimit", fmt.Sprintf("nproc=%d:%d", procs, procs)}
}

// limitOf returns the hard limit named name in /proc/self/limits.
func limitOf(t *testing.T, name string) uint64 {
	t.Helper()
	f, err := os.Open("/proc/self/limits")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for sc := bufio.NewScanner(f); sc.Scan(); {
		if rest, ok := strings.CutPrefix(sc.Text(), name); ok {
			if fields := strings.Fields(rest); len(fields) >= 2 {
				if n, err := strconv.ParseUint(fields[1], 10, 64); err == nil {
					return n
				}
			}
		}
	}
	t.Fatalf("/proc/self/limits has no %s", name)
	return 0
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
