package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/urlflow/urlflow/internal/spelling"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

const rootLong = `urlflow collects secrets and third-party OAuth grants for MCP servers through URL-mode
elicitation, in the user's own browser.

Every setting is a flag, an environment variable or a key of the configuration file, in
that order of precedence: docs/configuration.md lists them all. Flags take two dashes
(--addr); one dash (-addr) works too, as with earlier versions.

Exit status: 0 when done, 1 on an error (one line on stderr), 2 on a mistake in the command
line. Shell completion: urlflow completion bash|zsh|fish|powershell.`

// run runs the command line args with the environment getenv and the standard streams.
func run(ctx context.Context, args []string, getenv env, stdin io.Reader, stdout, stderr io.Writer) error {
	root := newRootCommand(getenv, stdin, stdout, stderr)
	root.SetArgs(twoDashes(root, args))
	return root.ExecuteContext(ctx)
}

// newRootCommand returns the command urlflow, with every command under it, on the standard
// streams given.
func newRootCommand(getenv env, stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:     "urlflow",
		Short:   "collects secrets for MCP servers through URL-mode elicitation",
		Long:    rootLong,
		Version: version(),
		Args:    cobra.ArbitraryArgs, // an unknown command is runGroup's to name
		RunE:    runGroup,
		// main prints the error, once (report); a usage error points to the help (usageError).
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetVersionTemplate(versionText() + "\n")
	// A command that holds others is run with one of them, not with flags of its own.
	root.SetUsageTemplate(strings.Replace(root.UsageTemplate(), "{{if .Runnable}}", "{{if and .Runnable (not .HasAvailableSubCommands)}}", 1))
	root.SetFlagErrorFunc(flagError)
	root.AddCommand(newDevCommand(getenv), newServeCommand(getenv), newVersionCommand(), newKeysCommand(getenv), newServiceKeyAlias(),
		newFlowsCommand(getenv), newAuditCommand(getenv), newUsersCommand(getenv), newHookCommand(getenv), newConfigCommand(getenv), newHealthcheckCommand(getenv))
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.InitDefaultCompletionCmd() // after SetOut: its commands write where the root does
	if completion, _, err := root.Find([]string{"completion"}); err == nil && completion != root {
		completion.Short = "print the shell completion script for bash, zsh, fish or powershell"
		completion.RunE = runGroup
	}
	walk(root, func(c *cobra.Command) { c.SuggestionsMinimumDistance = 2 }) // "Did you mean" up to two edits away
	return root
}

// walk calls visit for cmd and every command under it.
func walk(cmd *cobra.Command, visit func(*cobra.Command)) {
	visit(cmd)
	for _, c := range cmd.Commands() {
		walk(c, visit)
	}
}

// runGroup is the RunE of a command that holds others: without one it prints its help on
// stderr and exits 2, "help" prints it on stdout, and anything else is an unknown command.
func runGroup(cmd *cobra.Command, args []string) error {
	if len(args) > 0 && args[0] == "help" {
		return cmd.Help()
	}
	if len(args) == 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "%s\n\n%s", cmd.Long, cmd.UsageString())
		return usageStatus
	}
	u := &usageError{cmd: cmd, err: fmt.Errorf("unknown command %q", args[0])}
	if suggestions := cmd.SuggestionsFor(args[0]); len(suggestions) > 0 {
		u.hint = "Did you mean " + strings.Join(quoted(suggestions), " or ") + "?"
	}
	return u
}

// A usageError is a command line that does not say what to do: an unknown command or
// flag, a missing or extra argument. main prints it as one line naming the command, a
// suggestion when there is one, and where the command's help is, and exits 2.
type usageError struct {
	cmd  *cobra.Command
	err  error
	hint string // "Did you mean \"list\"?", or empty
}

func (u *usageError) Error() string { return u.cmd.CommandPath() + ": " + u.err.Error() }
func (u *usageError) Unwrap() error { return u.err }

// report writes what main says about err, the error of a command line, on stderr, and
// returns the exit status: 0 for no error, 2 for a usage error, the status of an
// exitStatus (whose command has said what there was to say), and 1 for any other error,
// said in one line.
func report(err error, stderr io.Writer) int {
	var (
		usage  *usageError
		status exitStatus
	)
	switch {
	case err == nil:
		return 0
	case errors.As(err, &status):
		return int(status)
	case errors.As(err, &usage):
		fmt.Fprintf(stderr, "%s\n", usage)
		if usage.hint != "" {
			fmt.Fprintln(stderr, usage.hint)
		}
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", usage.cmd.CommandPath())
		return int(usageStatus)
	}
	fmt.Fprintf(stderr, "urlflow: %v\n", indentLines(err.Error()))
	return 1
}

// flagError is the usage error of a flag that cmd does not know or cannot read, with the
// flag that was probably meant.
func flagError(cmd *cobra.Command, err error) error {
	u := &usageError{cmd: cmd, err: err}
	if name, ok := strings.CutPrefix(err.Error(), "unknown flag: --"); ok {
		if near := nearFlags(cmd, name); len(near) > 0 {
			u.hint = "Did you mean " + strings.Join(near, " or ") + "?"
		}
	}
	return u
}

// nearFlags returns cmd's flags whose names are at most two edits from name, or that start
// with it, as --name.
func nearFlags(cmd *cobra.Command, name string) []string {
	var near []string
	visit := func(f *pflag.Flag) {
		if !f.Hidden && (strings.HasPrefix(f.Name, name) || spelling.Distance(f.Name, name) <= 2) {
			near = append(near, "--"+f.Name)
		}
	}
	cmd.LocalFlags().VisitAll(visit)
	cmd.InheritedFlags().VisitAll(visit)
	slices.Sort(near)
	return slices.Compact(near)
}

// quoted returns names, each in double quotes.
func quoted(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = strconv.Quote(n)
	}
	return out
}

// wantArgs returns the argument check of a command that takes n arguments: elicitation IDs
// for the commands of flows.
func wantArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) == n:
			return nil
		case n == 1 && len(args) == 0:
			return &usageError{cmd: cmd, err: errors.New("want an elicitation ID")}
		case n == 1:
			return &usageError{cmd: cmd, err: fmt.Errorf("want one elicitation ID, got %d arguments", len(args))}
		}
		return noArgs(cmd, args)
	}
}

// noArgs is the argument check of a command that takes none.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return &usageError{cmd: cmd, err: fmt.Errorf("unexpected arguments: %s", strings.Join(args, " "))}
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
