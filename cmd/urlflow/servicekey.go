package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/urlflow/urlflow/services"
)

// newServiceKeyCommand returns urlflow service-key, which prints a new service key and the
// line of its digest for a keys_file.
func newServiceKeyCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "service-key",
		Short: "make a key for a delegating MCP server and the digest line for its keys_file",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			key, digest := services.NewKey()
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "key (give it to the service only):   %s\nkeys_file line (all urlflow keeps): %s\n", key, digest)
			return err
		},
	}
}
