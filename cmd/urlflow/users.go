package main

import (
	"bufio"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/urlflow/urlflow/forget"
)

const usersForgetLong = `Erases what a running urlflow (--server, or URLFLOW_SERVER) keeps about one person, with a
read-write operator token (URLFLOW_TOKEN): every flow with its history, every credential
(a delegating service that held one is told, as when the user disconnects it), the user's
browser and MCP sessions (live ones end), rate-limit counters and indexes. In the audit
trail a tombstone replaces the user's identity and client addresses are removed; the
events stay, and the forgetting is audited. It cannot be undone. It asks you to type the
subject to confirm, unless --yes. Running it again is safe: a run that stopped part way is
finished by the next. docs/privacy.md lists what urlflow keeps about a person.`

// newUsersCommand returns urlflow users and its one command, forget.
func newUsersCommand(getenv env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "users",
		Short: "for operators: forget a user of a running urlflow",
		Long:  "For operators: the users of a running urlflow.",
		RunE:  runGroup,
	}
	forgetCmd := &cobra.Command{
		Use:   "forget --issuer ISS --subject SUB --reason R",
		Short: "erase what urlflow keeps about a user (flows, credentials, sessions; their identity in the audit trail)",
		Long:  usersForgetLong,
		Args:  wantArgs(0),
	}
	addFlags(forgetCmd.Flags(), cmdUsers)
	issuer := forgetCmd.Flags().String("issuer", "", "the user's issuer, exactly as their tokens carry it (required)")
	subject := forgetCmd.Flags().String("subject", "", "the user's subject, exactly as their tokens carry it (required)")
	reason := forgetCmd.Flags().String("reason", "", "why, for the audit trail (required)")
	yes := forgetCmd.Flags().Bool("yes", false, "do not ask to confirm")
	forgetCmd.Flags().StringP("output", "o", "table", "table, json or yaml (json and yaml: what the API answers, for scripts)")
	forgetCmd.RunE = func(cmd *cobra.Command, _ []string) error {
		for flag, v := range map[string]string{"--issuer": *issuer, "--subject": *subject, "--reason": *reason} {
			if strings.TrimSpace(v) == "" {
				return &usageError{cmd: cmd, err: fmt.Errorf("%s is required", flag)}
			}
		}
		if !*yes {
			if err := confirmForget(cmd, *issuer, *subject); err != nil {
				return err
			}
		}
		op, err := newOperatorCall(cmd, getenv)
		if err != nil {
			return err
		}
		r, err := op.client.Forget(cmd.Context(), *issuer, *subject, *reason)
		if err != nil {
			return err
		}
		return op.print(r, func() error { return printForgotten(op, *subject, *issuer, r) })
	}
	cmd.AddCommand(forgetCmd)
	return cmd
}

// confirmForget asks the operator to type the subject of the user to forget, as gh asks
// for the name of a repository to delete, and refuses anything else.
func confirmForget(cmd *cobra.Command, issuer, subject string) error {
	fmt.Fprintf(cmd.ErrOrStderr(), "This erases every flow and credential of %s at %s, for good.\nType the subject to confirm: ", subject, issuer)
	line, err := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
	if strings.TrimRight(line, "\r\n") == subject {
		return nil
	}
	if err != nil && line == "" {
		return errors.New("nothing confirmed (no input): type the subject when asked, or add --yes")
	}
	return errors.New("the subject typed is not the user's: nothing was erased")
}

// printForgotten prints what forgetting the user erased, for people.
func printForgotten(op *operatorCall, subject, issuer string, r *forget.Report) error {
	_, err := fmt.Fprintf(op.stdout, "Forgot %s at %s: %d flows, %d credentials, %d live MCP sessions ended, %d other keys.\n"+
		"The audit trail names them %s (issuer %s) in %d events.\n",
		subject, issuer, r.Flows, r.Credentials, r.Sessions, r.Keys, r.Tombstone, forget.TombstoneIssuer, r.AuditEvents)
	return err
}
