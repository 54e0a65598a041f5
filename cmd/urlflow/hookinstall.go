package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/urlflow/urlflow/hook"
	"github.com/urlflow/urlflow/hook/settings"
)

// settingsFileFlags name the Claude Code settings file that install and uninstall edit.
type settingsFileFlags struct {
	scope, file string
}

func (f *settingsFileFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.scope, "scope", "user", "the settings file: user, project, local (the project's, not committed) or managed (system-wide)")
	fs.StringVar(&f.file, "settings", "", "a settings file to edit instead of the scope's")
}

// path returns the settings file: --settings, or the scope's.
func (f *settingsFileFlags) path(cmd *cobra.Command, getenv env) (string, error) {
	if f.file != "" {
		return f.file, nil
	}
	v, err := commandSettings(cmd, getenv)
	if err != nil {
		return "", err
	}
	return settingsPath(f.scope, v.raw("claude_config_dir"))
}

// newHookUninstallCommand returns urlflow hook uninstall, which takes urlflow's hooks out
// of a Claude Code settings file again.
func newHookUninstallCommand(getenv env) *cobra.Command {
	var where settingsFileFlags
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "take them out again",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path, err := where.path(cmd, getenv)
			if err != nil {
				return err
			}
			if err := settings.Uninstall(path); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "removed urlflow's hooks from %s\n", path)
			return err
		},
	}
	where.register(cmd.Flags())
	return cmd
}

// installFlags are the flags of hook install.
type installFlags struct {
	settingsFileFlags
	server, matcher, policy, command string
}

// newHookInstallCommand returns urlflow hook install, which adds urlflow's two hooks to a
// Claude Code settings file, leaving the rest as it is.
func newHookInstallCommand(getenv env) *cobra.Command {
	var f installFlags
	cmd := &cobra.Command{
		Use:   "install",
		Short: "add the two hooks to Claude Code's settings, leaving the rest as it is",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path, err := f.path(cmd, getenv)
			if err != nil {
				return err
			}
			if f.scope == "managed" && f.file == "" && f.policy == "" {
				// The default policy file is the user's own: in managed settings it would let
				// every user widen what the organisation enforces.
				return errors.New("--scope managed needs --policy FILE, a policy file users cannot change (it may be empty)")
			}
			hooks, err := f.hooks()
			if err != nil {
				return err
			}
			if err := settings.Install(path, f.matcher, hooks); err != nil {
				return err
			}
			stdout := cmd.OutOrStdout()
			fmt.Fprintf(stdout, "installed urlflow's Elicitation and ElicitationResult hooks in %s\n", path)
			if f.server == "" {
				fmt.Fprintln(stdout, "no --server: URL-mode requests go only to the policy file's allowed_origins")
			}
			return nil
		},
	}
	f.register(cmd.Flags())
	cmd.Flags().StringVar(&f.server, "server", "", "urlflow's URL: its origin is allowed for URL mode")
	cmd.Flags().StringVar(&f.matcher, "matcher", "", "the MCP servers the hooks judge (a name, a|b, or a regular expression); default all")
	cmd.Flags().StringVar(&f.policy, "policy", "", "the policy file the hooks read (default ~/.config/urlflow/hook.yaml)")
	cmd.Flags().StringVar(&f.command, "command", "", "the urlflow binary Claude Code runs (default this one)")
	return cmd
}

// hooks returns the two hooks to install: this binary (or --command) with the origin of
// --server allowed and the policy file of --policy.
func (f *installFlags) hooks() ([]settings.Hook, error) {
	binary := f.command
	if binary == "" {
		var err error
		if binary, err = installableExecutable(); err != nil {
			return nil, err
		}
	}
	var flags []string
	if f.server != "" {
		o, err := hook.ParseOrigin(f.server)
		if err != nil {
			return nil, fmt.Errorf("--server: %w", err)
		}
		if o.Scheme != "https" && !o.Loopback() {
			return nil, fmt.Errorf("--server %s: urlflow must be on https, or on loopback", o)
		}
		flags = append(flags, "--allow-origin", o.String())
	}
	if f.policy != "" {
		abs, err := filepath.Abs(f.policy)
		if err != nil {
			return nil, err
		}
		flags = append(flags, "--policy", abs)
	}
	line := func(entry string) string {
		words := []string{settings.Quote(binary), "hook", entry}
		for _, f := range flags {
			words = append(words, settings.Quote(f))
		}
		return strings.Join(words, " ")
	}
	return []settings.Hook{
		{Event: hook.EventElicitation, Command: line("elicitation")},
		{Event: hook.EventElicitationResult, Command: line("elicitation-result")},
	}, nil
}

// settingsPath returns the Claude Code settings file of a scope; configDir is Claude
// Code's configuration directory (CLAUDE_CONFIG_DIR), if set.
func settingsPath(scope, configDir string) (string, error) {
	switch scope {
	case "user":
		if configDir != "" {
			return filepath.Join(configDir, "settings.json"), nil
		}
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		return filepath.Join(home, ".claude", "settings.json"), nil
	case "project", "local":
		dir, err := os.Getwd()
		if err != nil {
			return "", err
		}
		name := "settings.json"
		if scope == "local" {
			name = "settings.local.json"
		}
		return filepath.Join(dir, ".claude", name), nil
	case "managed":
		return filepath.Join(hook.ManagedDir(), "managed-settings.json"), nil
	}
	return "", fmt.Errorf("--scope %q: user, project, local or managed", scope)
}

// installableExecutable returns this binary's path, unless it is a temporary build (go
// run), which would be gone when Claude Code runs the hook.
func installableExecutable() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find this binary: %w (name it with --command)", err)
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return "", fmt.Errorf("find this binary: %w (name it with --command)", err)
	}
	if strings.HasPrefix(exe, os.TempDir()) && strings.Contains(exe, "go-build") {
		return "", errors.New("this urlflow is a temporary build (go run): install it (go install ./cmd/urlflow) and run that, or name the binary with --command")
	}
	return exe, nil
}
