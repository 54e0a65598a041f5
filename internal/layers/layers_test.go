package layers

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/urlflow/urlflow"

// pkg is what go list says of a package.
type pkg struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

// listPackages returns every package of the module, with its imports.
func listPackages(t *testing.T) []pkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			return pkgs
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
}

func TestEveryImportPointsDown(t *testing.T) {
	for _, p := range listPackages(t) {
		path := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		layer, ok := Layer(path)
		if !ok {
			t.Errorf("%s has no layer: place it in layers (layers.go) and in docs/design.md's package map", path)
			continue
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module+"/") {
				continue
			}
			dep := strings.TrimPrefix(imp, module+"/")
			if depLayer, _ := Layer(dep); depLayer >= layer {
				t.Errorf("%s (layer %d) imports %s (layer %d): imports point to lower layers only", path, layer, dep, depLayer)
			}
		}
	}
}

func TestLayerMatchesTheLongestEntry(t *testing.T) {
	for path, want := range map[string]int{
		"internal/tracing": 0, "internal/every": 1, "internal/redistest": 2, "state": 3, "state/flow": 6, "web": 11, "web/api": 10,
		"cmd/urlflow/internal/opsclient": 12, "cmd/urlflow": 13, "examples/weather": 13,
	} {
		if got, ok := Layer(path); !ok || got != want {
			t.Errorf("Layer(%s) = %d, %v; want %d", path, got, ok, want)
		}
	}
	if _, ok := Layer("nowhere"); ok {
		t.Error("a package that is not placed has a layer")
	}
}
