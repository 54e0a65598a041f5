// Command urlflow runs urlflow, the service that collects secrets for MCP servers through
// URL-mode elicitation, in the user's own browser.
//
//	urlflow dev       everything embedded, on loopback, with a development identity
//	urlflow serve     production: real Redis, OpenID identity, settings from the environment
//	urlflow version   print the version
//	urlflow service-key   a new key for a delegating MCP server, and its keys_file line
//	urlflow flows     find, read, cancel and retry flows of a running urlflow (operators)
//	urlflow audit export  the audit trail of a running urlflow, as JSON Lines (operators)
//	urlflow hook      the policy for Claude Code's Elicitation hooks, on a user's machine
//	urlflow config check  check the configuration as serve would, and print it with its sources
//	urlflow healthcheck   exit 0 when the local serve answers /readyz (the container's HEALTHCHECK)
//
// Each command has a file of its own (dev.go, serve.go, flows.go, ...) on cobra, under the
// root command of root.go. Every setting is one row of the settings table (settings.go),
// read by one loop; docs/configuration.md is generated from it.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first signal stops urlflow gracefully (it drains); a second one kills it at once.
	context.AfterFunc(ctx, stop)
	err := run(ctx, os.Args[1:], os.LookupEnv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(report(err, os.Stderr))
}

// exitStatus is an error that makes main exit with that status and print nothing more: what
// there was to say has been said.
type exitStatus int

func (s exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(s)) }

// usageStatus is the exit status of a command line that does not say what to do: a
// command run without the command it needs (urlflow, urlflow flows, ...), whose usage is
// on stderr, or a usageError.
const usageStatus exitStatus = 2

// indentLines puts each line after the first of a multi-line error on its own indented line.
func indentLines(s string) string {
	out := []byte{}
	for i := 0; i < len(s); i++ {
		out = append(out, s[i])
		if s[i] == '\n' {
			out = append(out, "  "...)
		}
	}
	return string(out)
}
