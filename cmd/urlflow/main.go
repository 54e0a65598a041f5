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
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/urlflow/urlflow/services"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr)
	stop()
	var status exitStatus
	switch {
	case err == nil:
	case errors.As(err, &status):
		os.Exit(int(status))
	case errors.Is(err, flag.ErrHelp):
		os.Exit(2)
	default:
		fmt.Fprintf(os.Stderr, "urlflow: %v\n", indentLines(err.Error()))
		os.Exit(1)
	}
}

const usage = `usage: urlflow <command> [flags]

commands:
  dev       run everything on this machine: embedded Redis (unless URLFLOW_REDIS_URL is set),
            a development identity, loopback only
  serve     run in production: a real Redis, your OpenID issuer for identity; every
            setting from flags, the environment or the configuration file (README)
  version   print the version
  service-key
            make a key for a delegating MCP server and the digest line for its keys_file
  flows     for operators: list, summary, show, cancel, retry the flows of a running
            urlflow ("urlflow flows" says more)
  audit export --since T [--until T]
            for operators: the audit trail of a running urlflow, as JSON Lines
  hook      on a user's machine: the policy for Claude Code's Elicitation hooks that keeps
            secrets out of form mode ("urlflow hook" says more)

Run "urlflow dev -h" for the flags; every setting is also an environment variable (README).
`

func run(ctx context.Context, args []string, getenv env, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return flag.ErrHelp
	}
	switch args[0] {
	case "dev":
		return runDev(ctx, args[1:], getenv, stdout, stderr)
	case "serve":
		return runServe(ctx, args[1:], getenv, stdout, stderr)
	case "flows":
		return runFlows(ctx, args[1:], getenv, stdout, stderr)
	case "audit":
		return runAudit(ctx, args[1:], getenv, stdout, stderr)
	case "hook":
		return runHook(ctx, args[1:], getenv, os.Stdin, stdout, stderr)
	case "service-key":
		return runServiceKey(args[1:], stdout)
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, "urlflow", version())
		return nil
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}

// version returns the module version, or the VCS revision of a development build.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			return "devel-" + s.Value[:12]
		}
	}
	return "devel"
}

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

// runServiceKey prints a new service key and the line of its digest for a keys_file.
func runServiceKey(args []string, stdout io.Writer) error {
	if len(args) > 0 {
		return fmt.Errorf("service-key takes no arguments")
	}
	key, digest := services.NewKey()
	fmt.Fprintf(stdout, "key (give it to the service only):   %s\nkeys_file line (all urlflow keeps): %s\n", key, digest)
	return nil
}
