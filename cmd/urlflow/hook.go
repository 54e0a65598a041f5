package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/urlflow/urlflow/hook"
)

const hookLong = `urlflow's policy for Claude Code's Elicitation hooks: URL mode only to allowed origins, no
secrets asked for or answered in form mode (docs/claude-code.md).

elicitation, elicitation-result, test and serve take --policy FILE (default
~/.config/urlflow/hook.yaml) and --allow-origin URL (repeatable).`

// refusedStatus is the exit status by which a hook refuses a request or declines an answer.
const refusedStatus exitStatus = 2

// newHookCommand returns urlflow hook and its commands.
func newHookCommand(getenv env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "hook",
		Short: "on a user's machine: the policy for Claude Code's Elicitation hooks that keeps secrets out of form mode",
		Long:  hookLong,
		RunE:  runGroup,
	}
	cmd.AddCommand(
		newHookInstallCommand(getenv), newHookUninstallCommand(getenv), newHookTestCommand(getenv),
		newHookEventCommand("elicitation", hook.EventElicitation, "run by Claude Code before an elicitation reaches the user: exit 2 refuses it", getenv),
		newHookEventCommand("elicitation-result", hook.EventElicitationResult, "run by Claude Code after the user answered: exit 2 declines the answer", getenv),
		newHookServeCommand(getenv))
	return cmd
}

// policyFlags are the flags of the commands that decide.
type policyFlags struct {
	policy  string
	origins []string
}

func (p *policyFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&p.policy, "policy", "", "the policy file (default ~/.config/urlflow/hook.yaml)")
	fs.StringArrayVar(&p.origins, "allow-origin", nil, "an origin URL-mode requests may go to (repeatable)")
}

// judge loads the policy and returns its Judge and audit log. lookupEnv answers for
// Claude Code's variables (the settings read).
func (p *policyFlags) judge(lookupEnv func(string) (string, bool)) (*hook.Judge, *hook.Log, error) {
	path, optional := p.policy, false
	if path == "" {
		var err error
		if path, err = hook.DefaultPolicyPath(); err != nil {
			return nil, nil, err
		}
		optional = true
	}
	policy, err := hook.LoadPolicy(path, optional)
	if err != nil {
		return nil, nil, err
	}
	config, err := hook.ClaudeCodeConfigFromEnv(lookupEnv)
	if err != nil {
		return nil, nil, err
	}
	j, err := hook.NewJudge(policy, hook.Options{AllowedOrigins: p.origins, Servers: config})
	if err != nil {
		return nil, nil, err
	}
	logPath := policy.AuditLog
	switch {
	case logPath == "":
		log, err := defaultAuditLog()
		return j, log, err
	case !filepath.IsAbs(logPath) && !strings.HasPrefix(logPath, "~/"):
		// Relative to the policy file, not to wherever Claude Code runs the hook.
		logPath = filepath.Join(filepath.Dir(path), logPath)
	}
	log, err := hook.NewLog(logPath)
	return j, log, err
}

// newHookEventCommand returns the entry point Claude Code runs for event: it decides the
// input on stdin, logs the decision, and exits 2 with the reason on stderr to refuse.
// Whatever goes wrong (a flag, an unreadable input or policy) refuses too: a hook that
// fails must not let a request through, so it parses its flags itself, where a wrong one
// (or --help) refuses instead of exiting 0. Claude Code shows neither stdout nor stderr
// for these events; the audit log is where a refusal is explained.
func newHookEventCommand(name, event, short string, getenv env) *cobra.Command {
	var pf policyFlags
	cmd := &cobra.Command{Use: name, Short: short, DisableFlagParsing: true}
	pf.register(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		stderr := cmd.ErrOrStderr()
		if err := cmd.Flags().Parse(args); err != nil {
			fmt.Fprintf(stderr, "urlflow hook %s: %v\n", name, err)
			return refusedStatus
		}
		if help, _ := cmd.Flags().GetBool("help"); help {
			fmt.Fprint(stderr, cmd.UsageString())
			return refusedStatus
		}
		e, log := decideEvent(cmd, event, &pf, getenv)
		return finishEvent(e, log, stderr)
	}
	return cmd
}

// decideEvent decides the input of event on cmd's stdin, and returns the decision and the
// audit log to write it to (nil when the policy could not be read). Any error refuses.
func decideEvent(cmd *cobra.Command, event string, pf *policyFlags, getenv env) (hook.Entry, *hook.Log) {
	var j *hook.Judge
	var log *hook.Log
	v, err := commandSettings(cmd, getenv)
	if err == nil {
		j, log, err = pf.judge(v.lookupEnv)
	}
	var in *hook.Input
	if err == nil {
		in, err = hook.ReadInput(cmd.InOrStdin())
	}
	if err == nil && in.HookEventName != event {
		err = fmt.Errorf("the hook for %s was given %q's input", event, in.HookEventName)
	}
	if err == nil {
		return j.Decide(in), log
	}
	e := hook.Entry{Time: time.Now().UTC(), Event: event, Decision: hook.Refuse, Reason: err.Error()}
	if event == hook.EventElicitationResult {
		e.Decision = hook.Decline
	}
	return e, log
}

// finishEvent appends e to log (the default audit log when nil) and answers Claude Code:
// refusedStatus with the reason on stderr, or nothing.
func finishEvent(e hook.Entry, log *hook.Log, stderr io.Writer) error {
	if log == nil {
		// The policy could not be read: the refusal goes to the default log.
		var err error
		if log, err = defaultAuditLog(); err != nil {
			fmt.Fprintf(stderr, "urlflow hook: %v\n", err)
			fmt.Fprintf(stderr, "urlflow hook: %s: %s\n", e.Decision, e.Reason)
			return refusedStatus
		}
	}
	if err := log.Append(e); err != nil {
		fmt.Fprintf(stderr, "urlflow hook: %v\n", err)
	}
	if e.Refused() {
		fmt.Fprintf(stderr, "urlflow hook: %s: %s\n", e.Decision, e.Reason)
		return refusedStatus
	}
	return nil
}

// defaultAuditLog returns the audit log at its default place.
func defaultAuditLog() (*hook.Log, error) {
	path, err := hook.DefaultAuditLog()
	if err != nil {
		return nil, err
	}
	return hook.NewLog(path)
}

// newHookTestCommand returns urlflow hook test, which prints the decision for a hook
// input, and what the hook would answer, and logs nothing.
func newHookTestCommand(getenv env) *cobra.Command {
	var pf policyFlags
	cmd := &cobra.Command{
		Use:   "test FILE",
		Short: "print the decision for a hook input (- for standard input); logs nothing",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return &usageError{cmd: cmd, err: fmt.Errorf("want one file, the hook's input (- for standard input); got %d arguments", len(args))}
			}
			return nil
		},
	}
	pf.register(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		r := cmd.InOrStdin()
		if name := args[0]; name != "-" {
			f, err := os.Open(name)
			if err != nil {
				return err
			}
			defer f.Close()
			r = f
		}
		v, err := commandSettings(cmd, getenv)
		if err != nil {
			return err
		}
		j, _, err := pf.judge(v.lookupEnv)
		if err != nil {
			return err
		}
		in, err := hook.ReadInput(r)
		if err != nil {
			return err
		}
		e := j.Decide(in)
		status := 0
		if e.Refused() {
			status = int(refusedStatus)
		}
		line, _ := json.Marshal(e)
		_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\nexit status %d\naudit line: %s\n", e.Decision, e.Reason, status, line)
		return err
	}
	return cmd
}

// newHookServeCommand returns urlflow hook serve, which serves the Elicitation policy to
// Claude Code's http hooks.
func newHookServeCommand(getenv env) *cobra.Command {
	var pf policyFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "the Elicitation policy for Claude Code's http hooks, with the shared token URLFLOW_HOOK_TOKEN",
		Long: `urlflow hook serve decides Elicitation requests POSTed to /elicitation with the shared
token URLFLOW_HOOK_TOKEN, for Claude Code's http hooks. It fails open when unreachable:
install the command hook where the policy must hold.`,
		Args: cobra.ArbitraryArgs, // ignored, as they always were
	}
	listen := cmd.Flags().String("listen", "127.0.0.1:8788", "the address to listen on")
	pf.register(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		v, err := commandSettings(cmd, getenv)
		if err != nil {
			return err
		}
		token := v.raw("hook_token")
		if len(token) < 16 {
			return errors.New("set URLFLOW_HOOK_TOKEN to a shared token of at least 16 characters; Claude Code's http hook sends it as its Authorization header")
		}
		j, log, err := pf.judge(v.lookupEnv)
		if err != nil {
			return err
		}
		return serveHook(cmd.Context(), *listen, j, log, token, cmd.OutOrStdout(), cmd.ErrOrStderr())
	}
	return cmd
}

// serveHook serves j's decisions on listen until ctx ends.
func serveHook(ctx context.Context, listen string, j *hook.Judge, log *hook.Log, token string, stdout, stderr io.Writer) error {
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	reg := prometheus.NewRegistry()
	mux := http.NewServeMux()
	mux.Handle("/elicitation", hook.NewHandler(j, hook.HandlerOptions{Token: token, Log: log, Registerer: reg, Logger: logger}))
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second}
	fmt.Fprintf(stdout, "urlflow hook serve: http://%s/elicitation (metrics at /metrics); audit log %s\n", ln.Addr(), log.Path())
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
