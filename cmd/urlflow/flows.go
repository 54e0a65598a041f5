package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urlflow/urlflow/internal/ages"
	"github.com/urlflow/urlflow/internal/opsclient"
	"github.com/urlflow/urlflow/state/flow"
)

const flowsUsage = `usage: urlflow flows <command> [flags]

commands, against a running urlflow (--server, or URLFLOW_SERVER; default http://127.0.0.1:8080)
with an operator token (--token, or URLFLOW_TOKEN):
  list [--state S] [--stuck] [--older-than D] [--user U] [filters] [--json]
                              the flows, oldest first; stuck ones marked
  summary [--json]            running flows by state, owed notifications, stuck counts
  show ID [--json]            one flow and its timeline
  cancel ID --reason R        end a running flow as cancelled
  retry ID [--new] --reason R resend an ended flow's notification, or start a new attempt
`

// runFlows runs "urlflow flows ...".
func runFlows(ctx context.Context, args []string, getenv env, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, flowsUsage)
		return flag.ErrHelp
	}
	cmd, args := args[0], args[1:]
	fs := flag.NewFlagSet("urlflow flows "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	conn := connectionFlags(fs, getenv)
	asJSON := fs.Bool("json", false, "print JSON for scripts instead of a table")
	out := newTerminal(stdout, getenv)
	switch cmd {
	case "list":
		filters := map[string]*string{}
		for _, f := range []struct{ name, param, usage string }{
			{"state", "state", "only these states, comma separated"},
			{"older-than", "olderThan", "only flows created at least this long ago (10m, 2h)"},
			{"user", "user", "only the flows of users with this subject"},
			{"kind", "kind", "only secret or oauth flows"},
			{"target", "target", "only flows for this slot or provider"},
			{"service", "service", "only flows this delegating service asked for"},
			{"client", "client", "only flows of MCP clients with this name"},
			{"era", "era", "only flows asked for this way: 2025-11-25, 2026-07-28 or api"},
			{"replica", "replica", "only flows started on this replica"},
		} {
			filters[f.param] = fs.String(f.name, "", f.usage)
		}
		stuck := fs.Bool("stuck", false, "only stuck flows")
		if _, err := parseFlags(fs, args, 0); err != nil {
			return err
		}
		q := url.Values{}
		for param, v := range filters {
			if *v != "" {
				q.Set(param, *v)
			}
		}
		if *stuck {
			q.Set("stuck", "true")
		}
		cl, err := conn.client()
		if err != nil {
			return err
		}
		items, err := cl.List(ctx, q)
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(stdout, items)
		}
		return out.flowTable(items, time.Now())
	case "summary":
		if _, err := parseFlags(fs, args, 0); err != nil {
			return err
		}
		cl, err := conn.client()
		if err != nil {
			return err
		}
		sum, err := cl.Summary(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(stdout, sum)
		}
		return out.summary(sum)
	case "show":
		id, err := parseFlags(fs, args, 1)
		if err != nil {
			return err
		}
		cl, err := conn.client()
		if err != nil {
			return err
		}
		e, err := cl.Get(ctx, id[0])
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(stdout, e)
		}
		return out.timeline(e, time.Now())
	case "cancel", "retry":
		reason := fs.String("reason", "", "why, for the flow's history (required)")
		newAttempt := false
		if cmd == "retry" {
			fs.BoolVar(&newAttempt, "new", false, "start a new attempt of a flow that ended without success")
		}
		id, err := parseFlags(fs, args, 1)
		if err != nil {
			return err
		}
		if strings.TrimSpace(*reason) == "" {
			return errors.New("--reason is required: say why, for the flow's history")
		}
		cl, err := conn.client()
		if err != nil {
			return err
		}
		var e *opsclient.Elicitation
		if cmd == "cancel" {
			e, err = cl.Cancel(ctx, id[0], *reason)
		} else {
			e, err = cl.Retry(ctx, id[0], newAttempt, *reason)
		}
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(stdout, e)
		}
		return out.timeline(e, time.Now())
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, flowsUsage)
		return nil
	}
	fmt.Fprint(stderr, flowsUsage)
	return fmt.Errorf("unknown command %q of urlflow flows", cmd)
}

const auditUsage = `usage: urlflow audit export --since T [--until T]

Writes the audit trail of a running urlflow (--server, or URLFLOW_SERVER) from T to T as
JSON Lines, with an operator token (URLFLOW_TOKEN). T is an RFC 3339 time
(2026-12-01T00:00:00Z) or a duration before now (24h).
`

// runAudit runs "urlflow audit export".
func runAudit(ctx context.Context, args []string, getenv env, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "export" {
		fmt.Fprint(stderr, auditUsage)
		if len(args) == 0 {
			return flag.ErrHelp
		}
		return fmt.Errorf("unknown command %q of urlflow audit", args[0])
	}
	fs := flag.NewFlagSet("urlflow audit export", flag.ContinueOnError)
	fs.SetOutput(stderr)
	conn := connectionFlags(fs, getenv)
	since := fs.String("since", "", "from this time (RFC 3339) or this long ago (24h); required")
	until := fs.String("until", "", "to this time or this long ago; default now")
	if _, err := parseFlags(fs, args[1:], 0); err != nil {
		return err
	}
	if *since == "" {
		return errors.New("--since is required: a time (2026-12-01T00:00:00Z) or a duration before now (24h)")
	}
	cl, err := conn.client()
	if err != nil {
		return err
	}
	return cl.ExportAudit(ctx, *since, *until, stdout)
}

// connection is where the commands for operators send their requests, and with what token.
type connection struct {
	server, token *string
	getenv        env
}

// connectionFlags defines --server and --token on fs, defaulting to URLFLOW_SERVER and
// URLFLOW_TOKEN.
func connectionFlags(fs *flag.FlagSet, getenv env) *connection {
	server, _ := getenv("URLFLOW_SERVER")
	if server == "" {
		server = "http://127.0.0.1:8080"
	}
	return &connection{
		server: fs.String("server", server, "urlflow's public URL (URLFLOW_SERVER)"),
		token:  fs.String("token", "", "an operator token (prefer URLFLOW_TOKEN: a flag shows in the process list)"),
		getenv: getenv,
	}
}

// client returns the client of the connection, with the token of --token, or else of
// URLFLOW_TOKEN (or the file URLFLOW_TOKEN_FILE names).
func (c *connection) client() (*opsclient.Client, error) {
	token := *c.token
	if token == "" {
		var err error
		if token, _, err = c.getenv.secret("URLFLOW_TOKEN"); err != nil {
			return nil, err
		}
	}
	return opsclient.New(*c.server, token), nil
}

// parseFlags parses args into fs, flags and arguments in any order, and returns the
// arguments, of which it wants exactly n.
func parseFlags(fs *flag.FlagSet, args []string, n int) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	switch {
	case len(positional) == n:
		return positional, nil
	case n == 1:
		return nil, fmt.Errorf("%s: want one elicitation ID, got %d arguments", fs.Name(), len(positional))
	}
	return nil, fmt.Errorf("%s: unexpected arguments: %s", fs.Name(), strings.Join(positional, " "))
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// terminal writes tables for people, in colour when it is a terminal and NO_COLOR is unset.
type terminal struct {
	w      io.Writer
	colour bool
}

func newTerminal(w io.Writer, getenv env) *terminal {
	t := &terminal{w: w}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			_, noColour := getenv("NO_COLOR")
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

func (t *terminal) flowTable(items []opsclient.Listed, now time.Time) error {
	if len(items) == 0 {
		_, err := fmt.Fprintln(t.w, "no flows")
		return err
	}
	tw := tabwriter.NewWriter(t.w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tFOR\tAGE\tSTUCK\tUSER\tKIND\tTARGET\tSERVICE\tCLIENT")
	for _, e := range items {
		user := ""
		if e.User != nil {
			user = e.User.Subject
		}
		stuck := ""
		if e.Stuck != "" {
			stuck = t.paint(red, string(e.Stuck))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.ID, t.paint(stateColour(e.State), string(e.State)),
			ages.Of(now.Sub(e.UpdatedAt)), ages.Of(now.Sub(e.CreatedAt)), stuck, orDash(user), e.Kind, e.Target,
			orDash(e.Service), orDash(e.Client.Name))
	}
	return tw.Flush()
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
	fmt.Fprintf(tw, "Kind\t%s %s\n", e.Kind, e.Target)
	if e.Service != "" {
		fmt.Fprintf(tw, "Service\t%s\n", e.Service)
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

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
