package helmchart

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the chart's templates/prometheusrule.yaml from deploy/prometheus/alerts.yml")

const (
	// moduleRoot is the module deploy/check, from this package's directory: helm runs there,
	// as `go tool helm` does.
	moduleRoot = ".."
	// chart is the chart as helm is given it, from moduleRoot.
	chart = "../helm/urlflow"
	// release and namespace of every render.
	release   = "urlflow"
	namespace = "urlflow"
)

// chartDir is the chart from this package's directory, for reading its files.
var chartDir = filepath.Join(moduleRoot, chart)

// helm is the binary that `go tool helm` runs, found once by TestMain.
var helm helmTool

type helmTool struct {
	path string
	env  []string
}

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	home, err := os.MkdirTemp("", "helmchart-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "helmchart:", err)
		return 1
	}
	defer os.RemoveAll(home)
	if helm, err = findHelm(home); err != nil {
		fmt.Fprintln(os.Stderr, "helmchart:", err)
		return 1
	}
	return m.Run()
}

// findHelm asks `go tool -n helm` (in moduleRoot, whose go.mod pins helm v4) for the binary
// it runs, so that each of the many runs below does not go through the go command again.
// Helm gets homes of its own under home, and no kubeconfig: it renders, it never connects.
func findHelm(home string) (helmTool, error) {
	path, err := goTool("-n", "helm")
	if _, statErr := os.Stat(path); err == nil && statErr != nil {
		// Not in the build cache yet: one run through the go command puts it there.
		if _, err = goTool("helm", "version"); err == nil {
			path, err = goTool("-n", "helm")
		}
	}
	if err != nil {
		return helmTool{}, err
	}
	env := append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
		"KUBECONFIG="+filepath.Join(home, "no-kubeconfig"),
		"NO_COLOR=1")
	return helmTool{path: path, env: env}, nil
}

// goTool runs `go tool ARGS` in moduleRoot and returns its output, trimmed.
func goTool(args ...string) (string, error) {
	cmd := exec.Command("go", append([]string{"tool"}, args...)...)
	cmd.Dir = moduleRoot
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go tool %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}

// run runs helm in moduleRoot; the error holds its stderr.
func (h helmTool) run(args ...string) (stdout string, err error) {
	cmd := exec.Command(h.path, args...)
	cmd.Dir = moduleRoot
	cmd.Env = h.env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), nil
}

type renderResult struct {
	once sync.Once
	out  []byte
	err  error
}

var renders sync.Map

// template renders the chart with these extra arguments (-f, --set, ...), once per
// distinct arguments for the whole test run.
func template(args ...string) ([]byte, error) {
	all := append([]string{"template", release, chart, "--namespace", namespace}, args...)
	r, _ := renders.LoadOrStore(strings.Join(all, "\x00"), new(renderResult))
	result := r.(*renderResult)
	result.once.Do(func() {
		out, err := helm.run(all...)
		result.out, result.err = []byte(out), err
	})
	return result.out, result.err
}

// ciValues is the helm argument for the values file ci/NAME.yaml.
func ciValues(name string) string {
	return chart + "/ci/" + name + ".yaml"
}

// ciNames are the names of the chart's ci/*.yaml values files.
func ciNames(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(chartDir, "ci", "*.yaml"))
	if err != nil || len(files) < 4 {
		t.Fatalf("the chart's ci/ values files: %v, %v", files, err)
	}
	var names []string
	for _, f := range files {
		names = append(names, strings.TrimSuffix(filepath.Base(f), ".yaml"))
	}
	sort.Strings(names)
	return names
}

// decoded renders the chart with ci/NAME.yaml and these extra arguments, and decodes
// every document strictly.
func decoded(t *testing.T, name string, args ...string) []Document {
	t.Helper()
	out, err := template(append([]string{"-f", ciValues(name)}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := DecodeAll(out)
	if err != nil {
		t.Fatalf("ci/%s.yaml: %v", name, err)
	}
	return docs
}

// objects are the decoded objects of type T.
func objects[T any](docs []Document) []*T {
	var found []*T
	for _, d := range docs {
		if o, ok := d.Object.(*T); ok {
			found = append(found, o)
		}
	}
	return found
}

// one is the one decoded object of type T; none or several fail the test.
func one[T any](t *testing.T, docs []Document) *T {
	t.Helper()
	found := objects[T](docs)
	if len(found) != 1 {
		var zero T
		t.Fatalf("%d objects of type %T rendered, want 1", len(found), zero)
	}
	return found[0]
}

// forEachCI runs check in parallel subtests, one per ci/*.yaml values file.
func forEachCI(t *testing.T, check func(t *testing.T, name string)) {
	for _, name := range ciNames(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			check(t, name)
		})
	}
}

// wantFailure renders the chart with args and wants it to fail with a message holding want.
func wantFailure(t *testing.T, want string, args ...string) {
	t.Helper()
	out, err := template(args...)
	if err == nil {
		t.Fatalf("helm template %s rendered (%d bytes), want a failure saying %q", strings.Join(args, " "), len(out), want)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("helm template %s failed without saying %q:\n%v", strings.Join(args, " "), want, err)
	}
}
