// Package layers holds the test that keeps urlflow's imports pointing down: each package of
// the module has a layer (Layer), and a package imports only packages of lower layers. The
// layers are the package map of docs/design.md ("Packages").
package layers

import "strings"

// layers lists the module's packages by layer, lowest first. A package imports packages of
// lower layers only; a new package must be placed here.
var layers = [][]string{
	// Libraries that import nothing of the service, and those built on them.
	{"internal/tracing", "internal/buildinfo", "internal/spelling"},
	{"internal/ages", "internal/brand", "internal/display", "internal/locale", "internal/embedded", "internal/every", "internal/expiring", "internal/loopback",
		"internal/resend", "internal/signed", "internal/layers", "internal/testhttp", "internal/zcursor", "web/respond"},
	{"internal/", "delegate", "metrics", "templates", "demoapi", "hook", "hook/settings", "oauth"},
	// The stores' shared vocabulary, and the stores that need no other store.
	{"state"},
	{"state/vault", "state/audit", "state/counters", "state/ratelimit", "state/browsersession", "state/once", "state/languages",
		"state/authorizations", "upstream"},
	{"state/credentials", "state/vault/vaulttest", "slots", "userref"},
	{"state/flow", "oauth/identity", "oauth/providers", "services"},
	{"state/mcpsessions", "state/serviceevents", "state/webhooks", "state/servicecreds", "proxy"},
	// The use cases, and the background sender of webhooks.
	{"ask", "recovery", "webhook", "forget"},
	// The MCP server, and what the HTTP surface's audiences share.
	{"mcp", "web/browser", "web/limits", "web/listing"},
	// The HTTP surface's audiences, then the server.
	{"web/pages", "web/admin", "web/api"},
	{"web"},
	// Programs and whole-system tests.
	{"cmd/urlflow/internal/opsclient"},
	{"cmd/urlflow", "examples/", "clients/", "e2e", "e2e/", "deploy"},
}

// Layer returns the layer of the module's package at path (relative to the module), and
// false when none is given: the longest entry of layers that is path, or a prefix of it
// ending in "/", decides.
func Layer(path string) (int, bool) {
	best, layer := -1, 0
	for i, names := range layers {
		for _, name := range names {
			match := path == name || (strings.HasSuffix(name, "/") && strings.HasPrefix(path, name))
			if match && len(name) > best {
				best, layer = len(name), i
			}
		}
	}
	return layer, best >= 0
}
