package e2e

import (
	"fmt"
	"os"
	"path/filepath"
)

// npmPackage returns the absolute directory of the npm package name as Node finds it from
// the e2e project project ("node", "conformance", "idp" or "claude"). The four projects are
// one npm workspace (e2e/package.json, one lockfile): `npm ci --prefix e2e` hoists every
// package to e2e/node_modules, and keeps one in the project's own node_modules only when
// another project needs it in a different version.
func npmPackage(project, name string) (string, error) {
	for _, dir := range []string{filepath.Join(project, "node_modules", name), filepath.Join("node_modules", name)} {
		if _, err := os.Stat(filepath.Join(dir, "package.json")); err == nil {
			return filepath.Abs(dir)
		}
	}
	return "", fmt.Errorf("npm package %s of e2e/%s is not installed: run `npm ci --prefix e2e --ignore-scripts` (the README's test command does)", name, project)
}
