package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
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

	"github.com/urlflow/urlflow/hook"
	"github.com/urlflow/urlflow/hook/settings"
)

const hookUsage = `usage: urlflow hook <command> [flags]

urlflow's policy for Claude Code's Elicitation hooks: URL mode only to allowed origins, no
secrets asked for or answered in form mode (README, "Using urlflow with Claude Code").

  install [--scope user|project|local|managed] [--server URL] [--matcher SERVERS]
          [--policy FILE] [--command PATH] [--settings FILE]
                      add the two hooks to Claude Code's settings, leaving the rest as it is
  uninstall [--scope ...] [--settings FILE]
                      take them out again
  test FILE           print the decision for a hook input (- for standard input); logs nothing
  elicitation         run by Claude Code before an elicitation reaches the user: exit 2 refuses it
  elicitation-result  run by Claude Code after the user answered: exit 2 declines the answer
  serve [--listen ADDR]
                      the Elicitation policy for Claude Code's http hooks, with the shared token
                      URLFLOW_HOOK_TOKEN; fails open when unreachable: install the command hook
                      where the policy must hold

elicitation, elicitation-result, test and serve take --policy FILE (default
~/.config/urlflow/hook.yaml) and --allow-origin URL (repeatable).
`

// exitStatus is an error that makes main exit with that status and print nothing more: what
// there was to say has been said.
type exitStatus int

func (s exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(s)) }

// refusedStatus is the exit status by which a hook refuses a request or declines an answer.
const refusedStatus exitStatus = 2

// runHook runs "urlflow hook ...".
func runHook(ctx context.Context, args []string, getenv env, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, hookUsage)
		return flag.ErrHelp
	}
	cmd, args := args[0], args[1:]
	switch cmd {
	case "elicitation", "elicitation-result":
		return runHookEvent(cmd, args, getenv, stdin, stderr)
	case "test":
		return runHookTest(args, getenv, stdin, stdout, stderr)
	case "install", "uninstall":
		return runHookInstall(cmd, args, getenv, stdout, stderr)
	case "serve":
		return runHookServe(ctx, args, getenv, stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, hookUsage)
		return nil
	}
	fmt.Fprint(stderr, hookUsage)
	return fmt.Errorf("unknown hook command %q", cmd)
}

// policyFlags are the flags of the commands that decide.
type policyFlags struct {
	policy  string
	origins stringList
}

func (p *policyFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&p.policy, "policy", "", "the policy file (default ~/.config/urlflow/hook.yaml)")
	fs.Var(&p.origins, "allow-origin", "an origin URL-mode requests may go to (repeatable)")
}

// judge loads the policy and returns its Judge and audit log.
func (p *policyFlags) judge(getenv env) (*hook.Judge, *hook.Log, error) {
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
	config, err := hook.ClaudeCodeConfigFromEnv(getenv)
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

// runHookEvent is the entry point Claude Code runs for an event: it decides the input on
// stdin, logs the decision, and exits 2 with the reason on stderr to refuse. Whatever goes
// wrong (an unreadable input or policy) refuses too: a hook that fails must not let a
// request through. Claude Code shows neither stdout nor stderr for these events; the
// audit log is where a refusal is explained.
func runHookEvent(cmd string, args []string, getenv env, stdin io.Reader, stderr io.Writer) error {
	fs := flag.NewFlagSet("urlflow hook "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var pf policyFlags
	pf.register(fs)
	if err := fs.Parse(args); err != nil {
		return refusedStatus
	}
	event := hook.EventElicitation
	if cmd == "elicitation-result" {
		event = hook.EventElicitationResult
	}
	j, log, err := pf.judge(getenv)
	var in *hook.Input
	if err == nil {
		in, err = hook.ReadInput(stdin)
	}
	if err == nil && in.HookEventName != event {
		err = fmt.Errorf("the hook for %s was given %q's input", event, in.HookEventName)
	}
	var e hook.Entry
	if err != nil {
		e = hook.Entry{Time: time.Now().UTC(), Event: event, Decision: hook.Refuse, Reason: err.Error()}
		if event == hook.EventElicitationResult {
			e.Decision = hook.Decline
		}
	} else {
		e = j.Decide(in)
	}
	if log == nil {
		// The policy could not be read: the refusal goes to the default log.
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

// runHookTest prints the decision for a hook input, and what the hook would answer.
func runHookTest(args []string, getenv env, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("urlflow hook test", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var pf policyFlags
	pf.register(fs)
	file, err := parseFlags(fs, args, 1)
	if err != nil {
		return fmt.Errorf("hook test takes one file, the hook's input (- for standard input): %w", err)
	}
	r := stdin
	if name := file[0]; name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		r = f
	}
	j, _, err := pf.judge(getenv)
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
	fmt.Fprintf(stdout, "%s: %s\nexit status %d\n", e.Decision, e.Reason, status)
	line, _ := json.Marshal(e)
	fmt.Fprintf(stdout, "audit line: %s\n", line)
	return nil
}

// runHookInstall adds urlflow's two hooks to a Claude Code settings file, or removes them.
func runHookInstall(cmd string, args []string, getenv env, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("urlflow hook "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	scope := fs.String("scope", "user", "the settings file: user, project, local (the project's, not committed) or managed (system-wide)")
	file := fs.String("settings", "", "a settings file to edit instead of the scope's")
	var server, matcher, policy, command *string
	if cmd == "install" {
		server = fs.String("server", "", "urlflow's URL: its origin is allowed for URL mode")
		matcher = fs.String("matcher", "", "the MCP servers the hooks judge (a name, a|b, or a regular expression); default all")
		policy = fs.String("policy", "", "the policy file the hooks read (default ~/.config/urlflow/hook.yaml)")
		command = fs.String("command", "", "the urlflow binary Claude Code runs (default this one)")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("hook %s takes no arguments", cmd)
	}
	path := *file
	if path == "" {
		var err error
		if path, err = settingsPath(*scope, getenv); err != nil {
			return err
		}
	}
	if cmd == "uninstall" {
		if err := settings.Uninstall(path); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "removed urlflow's hooks from %s\n", path)
		return nil
	}
	if *scope == "managed" && *file == "" && *policy == "" {
		// The default policy file is the user's own: in managed settings it would let every
		// user widen what the organisation enforces.
		return errors.New("--scope managed needs --policy FILE, a policy file users cannot change (it may be empty)")
	}
	binary := *command
	if binary == "" {
		var err error
		if binary, err = installableExecutable(); err != nil {
			return err
		}
	}
	var flags []string
	if *server != "" {
		o, err := hook.ParseOrigin(*server)
		if err != nil {
			return fmt.Errorf("--server: %w", err)
		}
		if o.Scheme != "https" && !o.Loopback() {
			return fmt.Errorf("--server %s: urlflow must be on https, or on loopback", o)
		}
		flags = append(flags, "--allow-origin", o.String())
	}
	if *policy != "" {
		abs, err := filepath.Abs(*policy)
		if err != nil {
			return err
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
	hooks := []settings.Hook{
		{Event: hook.EventElicitation, Command: line("elicitation")},
		{Event: hook.EventElicitationResult, Command: line("elicitation-result")},
	}
	if err := settings.Install(path, *matcher, hooks); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "installed urlflow's Elicitation and ElicitationResult hooks in %s\n", path)
	if *server == "" {
		fmt.Fprintln(stdout, "no --server: URL-mode requests go only to the policy file's allowed_origins")
	}
	return nil
}

// settingsPath returns the Claude Code settings file of a scope.
func settingsPath(scope string, getenv env) (string, error) {
	switch scope {
	case "user":
		if dir, ok := getenv("CLAUDE_CONFIG_DIR"); ok && dir != "" {
			return filepath.Join(dir, "settings.json"), nil
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

// runHookServe serves the Elicitation policy to Claude Code's http hooks.
func runHookServe(ctx context.Context, args []string, getenv env, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("urlflow hook serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:8788", "the address to listen on")
	var pf policyFlags
	pf.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	token, _ := getenv("URLFLOW_HOOK_TOKEN")
	if len(token) < 16 {
		return errors.New("set URLFLOW_HOOK_TOKEN to a shared token of at least 16 characters; Claude Code's http hook sends it as its Authorization header")
	}
	j, log, err := pf.judge(getenv)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	reg := prometheus.NewRegistry()
	mux := http.NewServeMux()
	mux.Handle("/elicitation", hook.NewHandler(j, hook.HandlerOptions{Token: token, Log: log, Registerer: reg, Logger: logger}))
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	ln, err := net.Listen("tcp", *listen)
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

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(s string) error {
	*l = append(*l, s)
	return nil
}
