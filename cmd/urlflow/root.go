package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

const rootLong = `urlflow collects secrets and third-party OAuth grants for MCP servers through URL-mode
elicitation, in the user's own browser.

Every setting is a flag, an environment variable or a key of the configuration file, in
that order of precedence: docs/configuration.md lists them all. Flags take two dashes
(--addr); one dash (-addr) works too, as with earlier versions.`

// run runs the command line args with the environment getenv and the standard streams.
func run(ctx context.Context, args []string, getenv env, stdin io.Reader, stdout, stderr io.Writer) error {
	root := newRootCommand(getenv)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetArgs(twoDashes(root, args))
	return root.ExecuteContext(ctx)
}

// newRootCommand returns the command urlflow, with every command under it.
func newRootCommand(getenv env) *cobra.Command {
	root := &cobra.Command{
		Use:     "urlflow",
		Short:   "collects secrets for MCP servers through URL-mode elicitation",
		Long:    rootLong,
		Version: version(),
		Args:    cobra.ArbitraryArgs, // an unknown command is runGroup's to name
		RunE:    runGroup("unknown command %q"),
		// main prints the error, once; a flag error prints the usage (flagError).
		SilenceErrors: true,
		SilenceUsage:  true,
		// Shell completion waits for the operator-tools issue to be made public.
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	root.SetVersionTemplate("urlflow {{.Version}}\n")
	// A command that holds others is run with one of them, not with flags of its own.
	root.SetUsageTemplate(strings.Replace(root.UsageTemplate(), "{{if .Runnable}}", "{{if and .Runnable (not .HasAvailableSubCommands)}}", 1))
	root.SetFlagErrorFunc(flagError)
	root.AddCommand(newDevCommand(getenv), newServeCommand(getenv), newVersionCommand(), newServiceKeyCommand(),
		newFlowsCommand(getenv), newAuditCommand(getenv), newHookCommand(getenv))
	return root
}

// runGroup is the RunE of a command that holds others: without one it prints its help on
// stderr and exits 2, "help" prints it on stdout, and anything else is an unknown command
// (unknown formats the error with its name).
func runGroup(unknown string) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 && args[0] == "help" {
			return cmd.Help()
		}
		stderr := cmd.ErrOrStderr()
		if len(args) > 0 {
			if suggestions := cmd.SuggestionsFor(args[0]); len(suggestions) > 0 {
				fmt.Fprintf(stderr, "Did you mean %s?\n\n", strings.Join(suggestions, " or "))
			}
		}
		fmt.Fprintf(stderr, "%s\n\n%s", cmd.Long, cmd.UsageString())
		if len(args) == 0 {
			return usageStatus
		}
		return fmt.Errorf(unknown, args[0])
	}
}

// flagError prints the usage of the command whose flags are wrong on stderr, as Go's flag
// package did, and returns the error for main to print.
func flagError(cmd *cobra.Command, err error) error {
	fmt.Fprint(cmd.ErrOrStderr(), cmd.UsageString())
	return err
}

// wantArgs returns the argument check of a command that takes n arguments: elicitation IDs
// for the commands of flows.
func wantArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) == n:
			return nil
		case n == 1:
			return fmt.Errorf("%s: want one elicitation ID, got %d arguments", cmd.CommandPath(), len(args))
		}
		return fmt.Errorf("%s: unexpected arguments: %s", cmd.CommandPath(), strings.Join(args, " "))
	}
}

// noArgs is the argument check of urlflow dev and serve, which take none.
func noArgs(_ *cobra.Command, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("unexpected arguments: %s", strings.Join(args, " "))
	}
	return nil
}

// twoDashes rewrites -name and -name=value to --name and --name=value for the long flags
// of the command that args run. Before cobra, urlflow's flags were Go's flag package's,
// which takes one dash or two and whose help showed one: command lines written then keep
// working. Values of flags, arguments, short flags (-h) and everything after "--" stay as
// they are.
func twoDashes(root *cobra.Command, args []string) []string {
	out := append([]string{}, args...)
	cmd, _, err := root.Find(out)
	if err != nil {
		return out
	}
	cmd.InitDefaultHelpFlag()
	cmd.InitDefaultVersionFlag()
	for i := 0; i < len(out); i++ {
		arg := out[i]
		if arg == "--" {
			break
		}
		if len(arg) < 2 || arg[0] != '-' {
			continue
		}
		name, _, withValue := strings.Cut(strings.TrimPrefix(arg[1:], "-"), "=")
		f := cmd.Flags().Lookup(name)
		if f == nil {
			f = cmd.InheritedFlags().Lookup(name)
		}
		if f == nil {
			continue
		}
		if !strings.HasPrefix(arg, "--") && len(name) > 1 {
			out[i] = "-" + arg
		}
		if !withValue && f.NoOptDefVal == "" {
			i++ // the flag's value
		}
	}
	return out
}

// commandSettings reads the settings of cmd (readSettings), and joins their problems.
func commandSettings(cmd *cobra.Command, getenv env) (values, error) {
	v, problems := readSettings(strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" "), cmd.Flags(), getenv, nil)
	return v, errors.Join(problems...)
}
