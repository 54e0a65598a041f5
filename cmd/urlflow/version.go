package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/urlflow/urlflow/internal/buildinfo"
)

// newVersionCommand returns urlflow version (also urlflow --version).
func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "print the version, commit, commit date and Go version",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), versionText())
			return err
		},
	}
}

// versionText is what urlflow version and urlflow --version print.
func versionText() string {
	i := buildinfo.Get()
	return fmt.Sprintf("urlflow %s\ncommit: %s\ncommit date: %s\ngo: %s", i.Short(), orUnknown(i.Commit), orUnknown(i.Date), i.Go)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown (not a release build)"
	}
	return s
}

// version is the version urlflow shows of itself (banner, MCP serverInfo, pages).
func version() string { return buildinfo.Get().Short() }
