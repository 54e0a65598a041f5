package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/urlflow/urlflow/oauth"
	"github.com/urlflow/urlflow/state"
)

const configCheckLong = `urlflow config check reads the configuration file and the environment exactly as urlflow
serve would (urlflow dev with --mode dev) and checks every setting, without starting
anything and without connecting anywhere unless --connect asks it to.

It prints the configuration in effect on stdout, whatever it found: one line per setting
with its value and where the value came from (a flag, a variable, a line of the file, or
the default), secrets masked, then what the file's sections name. Every problem is
printed on stderr, each once, as urlflow serve would print them, and the exit status is 1
when there is one.

With --connect, once the configuration has no problem, it also connects to Redis and
reads the discovery document of the OpenID issuer; a failure is a problem too.`

// connectTimeout bounds each connection of urlflow config check --connect.
const connectTimeout = 10 * time.Second

// newConfigCommand returns urlflow config, which holds urlflow config check.
func newConfigCommand(getenv env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "check the configuration of urlflow serve or dev without starting it",
		Long:  "The configuration of urlflow serve and urlflow dev (docs/configuration.md).",
		RunE:  runGroup,
	}
	cmd.AddCommand(newConfigCheckCommand(getenv))
	return cmd
}

func newConfigCheckCommand(getenv env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "check",
		Short: "check the configuration file and the environment as urlflow serve would, and print the configuration in effect",
		Long:  configCheckLong,
		Args:  noArgs,
	}
	addFlags(cmd.Flags(), cmdServe) // dev has the same flags
	mode := cmd.Flags().String("mode", cmdServe, "check as urlflow serve or as urlflow dev would")
	connect := cmd.Flags().Bool("connect", false, "also connect to Redis and read the OpenID issuer's discovery document")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if *mode != cmdServe && *mode != cmdDev {
			return &usageError{cmd: cmd, err: fmt.Errorf("--mode: want serve or dev, got %q", *mode)}
		}
		cfg, l := load(*mode, cmd.Flags(), getenv)
		if err := writeEffectiveConfig(cmd.OutOrStdout(), cfg, l); err != nil {
			return err
		}
		if err := l.err(); err != nil {
			return err
		}
		if *connect {
			if err := checkConnections(cmd.Context(), cfg, l, cmd.OutOrStdout(), cmd.ErrOrStderr()); err != nil {
				return err
			}
		}
		_, err := fmt.Fprintf(cmd.OutOrStdout(), "\nThe configuration of urlflow %s has no problem.\n", *mode)
		return err
	}
	return cmd
}

// checkConnections connects to what cfg names, as urlflow serve would at start: Redis,
// and the OpenID issuer (serve only). It says on stdout what answered, and returns every
// failure as a problem of the setting. go-redis's own messages go to the log on stderr.
func checkConnections(ctx context.Context, cfg *config, l *loading, stdout, stderr io.Writer) error {
	newLogger(cfg, stderr)
	var problems []error
	fmt.Fprintln(stdout)
	if cfg.RedisURL == "" {
		fmt.Fprintln(stdout, "Redis: none configured, so none to connect to (urlflow dev embeds one)")
	} else {
		redisCtx, cancel := context.WithTimeout(ctx, connectTimeout)
		rdb, err := state.Connect(redisCtx, cfg.RedisURL, cfg.RedisTopology)
		cancel()
		if err != nil {
			problems = append(problems, fmt.Errorf("%s: %w", l.named("redis_url"), err))
		} else {
			rdb.Close()
			fmt.Fprintf(stdout, "Redis at %s: answers\n", state.RedisAddrs(cfg.RedisURL, cfg.RedisTopology))
		}
	}
	if cfg.OIDC.Issuer != "" {
		issuerCtx, cancel := context.WithTimeout(ctx, connectTimeout)
		_, err := oauth.Discover(issuerCtx, cfg.OIDC.Issuer, nil)
		cancel()
		if err != nil {
			problems = append(problems, fmt.Errorf("%s: %w", l.named("oidc_issuer"), err))
		} else {
			fmt.Fprintf(stdout, "OpenID issuer %s: discovery document read\n", cfg.OIDC.Issuer)
		}
	}
	return errors.Join(problems...)
}
