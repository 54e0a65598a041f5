package main

import (
	"errors"

	"github.com/spf13/cobra"
)

const auditExportLong = `Writes the audit trail of a running urlflow (--server, or URLFLOW_SERVER) from T to T as
JSON Lines, with an operator token (URLFLOW_TOKEN). T is an RFC 3339 time
(2026-12-01T00:00:00Z) or a duration before now (24h).`

// newAuditCommand returns urlflow audit and its one command, export.
func newAuditCommand(getenv env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "for operators: the audit trail of a running urlflow, as JSON Lines",
		Long:  "For operators: the audit trail of a running urlflow.",
		RunE:  runGroup,
	}
	export := &cobra.Command{
		Use:   "export --since T",
		Short: "the audit trail of a running urlflow, as JSON Lines",
		Long:  auditExportLong,
		Args:  wantArgs(0),
	}
	addFlags(export.Flags(), cmdAudit)
	since := export.Flags().String("since", "", "from this time (RFC 3339) or this long ago (24h); required")
	until := export.Flags().String("until", "", "to this time or this long ago; default now")
	export.RunE = func(cmd *cobra.Command, _ []string) error {
		if *since == "" {
			return errors.New("--since is required: a time (2026-12-01T00:00:00Z) or a duration before now (24h)")
		}
		op, err := newOperatorCall(cmd, getenv)
		if err != nil {
			return err
		}
		return op.client.ExportAudit(cmd.Context(), *since, *until, op.stdout)
	}
	cmd.AddCommand(export)
	return cmd
}
