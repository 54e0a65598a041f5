package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/urlflow/urlflow/cmd/urlflow/internal/opsclient"
	"github.com/urlflow/urlflow/internal/ages"
	"github.com/urlflow/urlflow/state/flow"
)

const flowsLong = `For operators: find, read, cancel and retry the flows of a running urlflow (--server, or
URLFLOW_SERVER; default http://127.0.0.1:8080) with an operator token (URLFLOW_TOKEN, or
--token). Errors are one line on stderr and exit status 1; a mistake in the command line
exits 2.`

// newFlowsCommand returns urlflow flows and its commands.
func newFlowsCommand(getenv env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "flows",
		Short: "for operators: list, summary, show, cancel, retry the flows of a running urlflow",
		Long:  flowsLong,
		RunE:  runGroup,
	}
	addFlags(cmd.PersistentFlags(), cmdFlows)
	cmd.PersistentFlags().StringP("output", "o", "table", "table, json or yaml (json and yaml: what the API answers, for scripts)")
	cmd.PersistentFlags().Bool("json", false, "the same as --output json")
	cmd.PersistentFlags().StringSlice("fields", nil, "with json or yaml: only these fields, comma separated (id,state,user,...)")
	cmd.AddCommand(newFlowsListCommand(getenv), newFlowsSummaryCommand(getenv), newFlowsShowCommand(getenv),
		newFlowsEndCommand("cancel", getenv), newFlowsEndCommand("retry", getenv))
	return cmd
}

// listFilters are the filters of urlflow flows list: the flag, the API's query parameter,
// and the flag's help.
var listFilters = []struct{ flag, param, usage string }{
	{"state", "state", "only these states, comma separated"},
	{"older-than", "olderThan", "only flows created at least this long ago (10m, 2h)"},
	{"user", "user", "only the flows of users with this subject"},
	{"kind", "kind", "only secret or oauth flows"},
	{"target", "target", "only flows for this slot or provider"},
	{"service", "service", "only flows this delegating service asked for"},
	{"client", "client", "only flows of MCP clients with this name"},
	{"era", "era", "only flows asked for this way: 2025-11-25, 2026-07-28 or api"},
	{"replica", "replica", "only flows started on this replica"},
}

func newFlowsListCommand(getenv env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list",
		Short: "the flows, oldest first; stuck ones marked",
		Args:  wantArgs(0),
	}
	for _, f := range listFilters {
		cmd.Flags().String(f.flag, "", f.usage)
	}
	stuck := cmd.Flags().Bool("stuck", false, "only stuck flows")
	owed := cmd.Flags().Bool("owed", false, "only ended flows whose completion notification is owed")
	wide := cmd.Flags().Bool("wide", false, "whole IDs, and every column: kind, service, era, replica")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		q := url.Values{}
		for _, f := range listFilters {
			if v := cmd.Flags().Lookup(f.flag).Value.String(); v != "" {
				q.Set(f.param, v)
			}
		}
		if *stuck {
			q.Set("stuck", "true")
		}
		if *owed {
			q.Set("owed", "true")
		}
		op, err := newOperatorCall(cmd, getenv)
		if err != nil {
			return err
		}
		items, err := op.client.List(cmd.Context(), q)
		if err != nil {
			return err
		}
		return op.print(items, func() error { return op.term.flowTable(items, time.Now(), *wide) })
	}
	return cmd
}

func newFlowsSummaryCommand(getenv env) *cobra.Command {
	return &cobra.Command{
		Use:   "summary",
		Short: "running flows by state, owed notifications, stuck counts",
		Args:  wantArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			op, err := newOperatorCall(cmd, getenv)
			if err != nil {
				return err
			}
			sum, err := op.client.Summary(cmd.Context())
			if err != nil {
				return err
			}
			return op.print(sum, func() error { return op.term.summary(sum) })
		},
	}
}

func newFlowsShowCommand(getenv env) *cobra.Command {
	return &cobra.Command{
		Use:   "show ID",
		Short: "one flow and its timeline",
		Args:  wantArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			op, err := newOperatorCall(cmd, getenv)
			if err != nil {
				return err
			}
			e, err := op.client.Get(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return op.timeline(e)
		},
	}
}

// newFlowsEndCommand returns urlflow flows cancel or retry, which act on a flow with a
// reason for its history.
func newFlowsEndCommand(verb string, getenv env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cancel ID --reason R",
		Short: "end a running flow as cancelled",
		Args:  wantArgs(1),
	}
	reason := cmd.Flags().String("reason", "", "why, for the flow's history (required)")
	newAttempt := false
	if verb == "retry" {
		cmd.Use, cmd.Short = "retry ID --reason R", "resend an ended flow's notification, or start a new attempt"
		cmd.Flags().BoolVar(&newAttempt, "new", false, "start a new attempt of a flow that ended without success")
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if strings.TrimSpace(*reason) == "" {
			return &usageError{cmd: cmd, err: errors.New("--reason is required: say why, for the flow's history")}
		}
		op, err := newOperatorCall(cmd, getenv)
		if err != nil {
			return err
		}
		var e *opsclient.Elicitation
		if verb == "cancel" {
			e, err = op.client.Cancel(cmd.Context(), args[0], *reason)
		} else {
			e, err = op.client.Retry(cmd.Context(), args[0], newAttempt, *reason)
		}
		var refused *opsclient.Error
		if errors.As(err, &refused) && verb == "retry" && !newAttempt && refused.Status == http.StatusConflict &&
			refused.State.Terminal() && refused.State != flow.Complete {
			return fmt.Errorf("%w; to ask the user again in a new flow, add --new", err)
		}
		if err != nil {
			return err
		}
		return op.timeline(e)
	}
	return cmd
}

// operatorCall is what a command for operators works with: the client of the server with
// the token its settings name, and where and how it prints.
type operatorCall struct {
	client *opsclient.Client
	output string   // table, json or yaml
	fields []string // the fields json and yaml keep; all when empty
	stdout io.Writer
	term   *terminal
}

// newOperatorCall reads the settings of cmd (the server, the token) and returns its call.
func newOperatorCall(cmd *cobra.Command, getenv env) (*operatorCall, error) {
	v, err := commandSettings(cmd, getenv)
	if err != nil {
		return nil, err
	}
	client, err := opsclient.New(v.raw("server"), v.raw("token"))
	if err != nil {
		return nil, err
	}
	op := &operatorCall{client: client, stdout: cmd.OutOrStdout(), output: "table"}
	if f := cmd.Flags().Lookup("output"); f != nil {
		op.output = f.Value.String()
	}
	if json, _ := cmd.Flags().GetBool("json"); json {
		op.output = "json"
	}
	if op.output != "table" && op.output != "json" && op.output != "yaml" {
		return nil, &usageError{cmd: cmd, err: fmt.Errorf("--output %s: want table, json or yaml", op.output)}
	}
	op.fields, _ = cmd.Flags().GetStringSlice("fields")
	if len(op.fields) > 0 && op.output == "table" {
		return nil, &usageError{cmd: cmd, err: errors.New("--fields selects what json and yaml print: add --output json or --output yaml")}
	}
	op.term = newTerminal(op.stdout, v["no_color"].given())
	return op, nil
}

// timeline prints e: its timeline, or JSON or YAML.
func (op *operatorCall) timeline(e *opsclient.Elicitation) error {
	return op.print(e, func() error { return op.term.timeline(e, time.Now()) })
}

// print prints v as the output the command was asked for: table draws it for people; JSON
// and YAML print what the API answered, only the fields asked for when some were.
func (op *operatorCall) print(v any, table func() error) error {
	if op.output == "table" {
		return table()
	}
	doc, err := selectFields(v, op.fields)
	if err != nil {
		return err
	}
	if op.output == "yaml" {
		enc := yaml.NewEncoder(op.stdout)
		enc.SetIndent(2)
		return enc.Encode(doc)
	}
	enc := json.NewEncoder(op.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}

// selectFields returns v as plain JSON values, an object or each object of a list keeping
// only fields (all when fields is empty). A field no object has is an error naming those
// there are.
func selectFields(v any, fields []string) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	if len(fields) == 0 {
		return doc, nil
	}
	objects, isList := doc.([]any)
	if !isList {
		objects = []any{doc}
	}
	known := map[string]bool{}
	for i, o := range objects {
		m, _ := o.(map[string]any)
		kept := map[string]any{}
		for k, val := range m {
			known[k] = true
			if slices.Contains(fields, k) {
				kept[k] = val
			}
		}
		objects[i] = kept
	}
	for _, f := range fields {
		if len(objects) > 0 && !known[f] {
			return nil, fmt.Errorf("--fields: no field %q; the fields are %s", f, strings.Join(slices.Sorted(maps.Keys(known)), ", "))
		}
	}
	if !isList {
		return objects[0], nil
	}
	return objects, nil
}

// terminal writes tables for people, in colour when it is a terminal and NO_COLOR is unset.
type terminal struct {
	w      io.Writer
	colour bool
}

// newTerminal returns the terminal of w: in colour when w is a terminal, unless noColour.
func newTerminal(w io.Writer, noColour bool) *terminal {
	t := &terminal{w: w}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			t.colour = !noColour
		}
	}
	return t
}

// paint returns s in the ANSI colour code when t writes in colour.
func (t *terminal) paint(code, s string) string {
	if !t.colour || s == "" {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

const (
	red    = "31"
	yellow = "33"
	green  = "32"
	dim    = "2"
)

// stateColour is the colour of a state: green for complete, yellow for the running ones,
// dim for the others that ended.
func stateColour(st flow.State) string {
	switch {
	case st == flow.Complete:
		return green
	case !st.Terminal():
		return yellow
	}
	return dim
}

// shortID is how many characters of an ID the table shows: enough to name it (urlflow
// takes the beginning of an ID wherever it takes one), short enough to fit.
const shortID = 12

// cellWidth bounds the narrow table's cells of text others chose (user, target, client),
// so that a row fits 100 columns.
const cellWidth = 14

// flowTable prints items as a table: narrow (short IDs, the columns an operator scans,
// long cells cut) unless wide.
func (t *terminal) flowTable(items []opsclient.Listed, now time.Time, wide bool) error {
	if len(items) == 0 {
		_, err := fmt.Fprintln(t.w, "no flows")
		return err
	}
	tw := tabwriter.NewWriter(t.w, 0, 0, 2, ' ', 0)
	cut := func(s string) string { return cutTo(orDash(s), cellWidth) }
	if wide {
		fmt.Fprintln(tw, "ID\tSTATE\tFOR\tAGE\tSTUCK\tUSER\tKIND\tTARGET\tSERVICE\tCLIENT\tERA\tREPLICA")
		cut = orDash
	} else {
		fmt.Fprintln(tw, "ID\tSTATE\tFOR\tSTUCK\tUSER\tTARGET\tCLIENT")
	}
	for _, e := range items {
		user := ""
		if e.User != nil {
			user = e.User.Subject
		}
		state := t.paint(stateColour(e.State), string(e.State))
		stuck, held := t.paint(red, orDash(string(e.Stuck))), ages.Of(now.Sub(e.UpdatedAt))
		if wide {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.ID, state, held, ages.Of(now.Sub(e.CreatedAt)), stuck,
				cut(user), e.Kind, cut(e.Target), cut(e.Service), cut(e.Client.Name), e.Era, orDash(e.Replica))
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.ID[:min(len(e.ID), shortID)], state, held, stuck, cut(user), cut(e.Target), cut(e.Client.Name))
	}
	return tw.Flush()
}

// cutTo returns s cut to n runes, the last of them an ellipsis when it was longer.
func cutTo(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func (t *terminal) summary(s *opsclient.Summary) error {
	tw := tabwriter.NewWriter(t.w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STATE\tRUNNING\tSTUCK\tSTUCK AFTER")
	for _, st := range opsclient.RunningStates {
		stuck := fmt.Sprint(s.Stuck[st])
		if s.Stuck[st] > 0 {
			stuck = t.paint(red, stuck)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", st, s.Running[flow.State(st)], stuck, ages.Of(time.Duration(s.StuckAfterSeconds[st]*float64(time.Second))))
	}
	stuck := fmt.Sprint(s.Stuck["notification"])
	if s.Stuck["notification"] > 0 {
		stuck = t.paint(red, stuck)
	}
	fmt.Fprintf(tw, "notification owed\t%d\t%s\t%s\n", s.OwedNotifications, stuck,
		ages.Of(time.Duration(s.StuckAfterSeconds["notification"]*float64(time.Second))))
	return tw.Flush()
}

func (t *terminal) timeline(e *opsclient.Elicitation, now time.Time) error {
	tw := tabwriter.NewWriter(t.w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "ID\t%s\n", e.ID)
	fmt.Fprintf(tw, "State\t%s (for %s)\n", t.paint(stateColour(e.State), string(e.State)), ages.Of(now.Sub(e.UpdatedAt)))
	if why := stuckWhy(e, now); why != "" {
		fmt.Fprintf(tw, "Stuck\t%s\n", t.paint(red, why))
	}
	fmt.Fprintf(tw, "Kind\t%s %s\n", e.Kind, e.Target)
	if e.User != nil {
		fmt.Fprintf(tw, "User\t%s (issuer %s)\n", e.User.Subject, e.User.Issuer)
	}
	fmt.Fprintf(tw, "Client\t%s\n", clientOf(e))
	if e.Service != "" {
		fmt.Fprintf(tw, "Service\t%s (verified by its key)\n", e.Service)
	}
	fmt.Fprintf(tw, "Era\t%s\n", orDash(e.Era))
	for _, f := range []struct{ name, value string }{{"Replica", e.Replica}, {"Session", e.Session}} {
		if f.value != "" {
			fmt.Fprintf(tw, "%s\t%s\n", f.name, f.value)
		}
	}
	fmt.Fprintf(tw, "Created\t%s (%s ago)\n", e.CreatedAt.Format(time.RFC3339), ages.Of(now.Sub(e.CreatedAt)))
	fmt.Fprintf(tw, "Deadline\t%s\n", e.ExpiresAt.Format(time.RFC3339))
	if e.URL != "" {
		fmt.Fprintf(tw, "URL\t%s\n", e.URL)
	}
	fmt.Fprintf(tw, "Notification\t%s\n", e.Delivery.Describe(now))
	for _, link := range []struct{ name, id string }{{"Retry of", e.RetryOf}, {"Retried by", e.RetriedBy}} {
		if link.id != "" {
			fmt.Fprintf(tw, "%s\t%s\n", link.name, link.id)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(t.w)
	tw = tabwriter.NewWriter(t.w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tEVENT\tACTOR\tFROM → TO\tREASON")
	for _, h := range e.History {
		actor := string(h.Actor)
		if h.By != "" {
			actor += " (" + h.By + ")"
		}
		event := string(h.Event)
		if h.Count > 1 {
			event += fmt.Sprintf(" ×%d", h.Count)
		}
		change := string(h.From) + " → " + string(h.To)
		if h.From == "" {
			change = "→ " + string(h.To)
		} else if h.From == h.To {
			change = t.paint(dim, string(h.To)+" (no change)")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", h.At.Local().Format("2006-01-02 15:04:05"), event, actor, change, orDash(h.Reason))
	}
	return tw.Flush()
}

// clientOf says which MCP client asked for e, as it reported itself: its name, title and
// version.
func clientOf(e *opsclient.Elicitation) string {
	c := e.Client
	name := strings.TrimSpace(c.Name + " " + c.Version)
	if c.Title != "" && c.Title != c.Name {
		name += " (" + c.Title + ")"
	}
	if name == "" {
		return "- (none reported)"
	}
	return name
}

// stuckWhy says why e is stuck and what an operator can do (docs/operating.md, "Finding
// stuck flows"), or "" when it is not stuck.
func stuckWhy(e *opsclient.Elicitation, now time.Time) string {
	held := ages.Of(now.Sub(e.UpdatedAt))
	switch e.Stuck {
	case "":
		return ""
	case flow.StuckNotification:
		return "its completion notification is owed: urlflow flows retry " + e.ID + " --reason R sends it again while the session lives"
	case flow.Stuck(flow.Pending):
		return "pending for " + held + ": the client has not answered; it may never have shown the link"
	case flow.Stuck(flow.Consented):
		return "consented for " + held + ": the user has not opened the link (see other_user_opened below)"
	case flow.Stuck(flow.InProgress):
		return "in_progress for " + held + ": the user opened the page and has not finished"
	case flow.Stuck(flow.Failed):
		return "failed for " + held + ": verification or the provider failed; see the reasons below"
	case flow.Stuck(flow.Unknown):
		return "unknown for " + held + ": the client never answered; the link still works (urlflow flows retry " + e.ID + " --reason R answers it)"
	}
	return string(e.Stuck) + " for " + held
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
