package delegate

import (
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// The package's promise rests on importing none of the module's other packages, which
// carry none.
func TestThePublicPackageImportsNothingOfTheModule(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(path, "github.com/urlflow/urlflow") {
				t.Errorf("%s imports %s", name, path)
			}
		}
	}
}

// What a server that imports the package compiles in: the modules of the package's
// dependencies are these few (the MCP Go SDK and what it needs, and x/oauth2), never the
// rest of urlflow's graph (Redis, OpenTelemetry, the web framework, ...): the package
// stays in the main module on that condition (docs/delegation.md, "In Go").
func TestThePackageCompilesInOnlyTheModulesItNeeds(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{with .Module}}{{.Path}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	allowed := map[string]bool{
		"github.com/urlflow/urlflow": true, "github.com/modelcontextprotocol/go-sdk": true, "github.com/google/jsonschema-go": true,
		"github.com/segmentio/asm": true, "github.com/segmentio/encoding": true, "github.com/yosida95/uritemplate/v3": true,
		"golang.org/x/oauth2": true, "golang.org/x/sync": true, "golang.org/x/sys": true, "golang.org/x/time": true,
	}
	for _, mod := range strings.Fields(string(out)) {
		if !allowed[mod] {
			t.Errorf("the package compiles in %s: a server that imports it would too", mod)
		}
	}
}
