package main

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/urlflow/urlflow/state/credentials"
	"github.com/urlflow/urlflow/state/vault"
)

const keysLong = `For operators: the key ring of URLFLOW_KEYS and the keys of delegating services.

The first key of URLFLOW_KEYS is active: it encrypts credentials and signs browser
sessions, forms, requestStates and elicitation IDs. Every other key is verify-only: it still
decrypts and verifies what it made. Rotate in this order (docs/production.md#keys-and-rotation): generate a key and
add it at the end on every replica; move it to the front on every replica; run reseal;
remove the old key once status says it protects nothing and the longest-lived signed
artifact (a browser session, 12 hours) has expired.`

const keysGenerateLong = `Prints a new entry of URLFLOW_KEYS on stdout: a key ID, a colon and 32 random bytes in
base64. Add it at the end of URLFLOW_KEYS on every replica (verify-only), then move it to
the front (active). Keep a copy of the key ring in a safe place: without it, every stored
credential is lost.`

const keysStatusLong = `Prints how many stored credentials (secrets and sealed OAuth tokens) each key still
protects, from the counts urlflow keeps in Redis as it stores, reseals and deletes them
(no scan), and which keys of URLFLOW_KEYS are active and verify-only. A key that protects
something and is not in URLFLOW_KEYS is marked missing: urlflow dev and serve refuse to
start then. Counts of credentials stored by versions before the counts existed appear once
reseal or recount has run.`

const keysResealLong = `Re-encrypts every stored credential and sealed OAuth token that is not under the active
key (the first of URLFLOW_KEYS) with it, and makes the counts of keys status exact. Only
each credential's data key is unwrapped and wrapped again; values are never decrypted.
Each credential is replaced with a compare-and-set, so a write made meanwhile is never
overwritten. It is safe to interrupt and to run again: what is under the active key
already is skipped. Run it once every replica has the new key at the front. Exits 1 if a
credential did not open, naming its key.`

const keysRecountLong = `Makes the counts of keys status exact with one pass over the stored credentials, changing
none of them: for credentials stored before urlflow kept the counts. reseal does it too.`

// newKeysCommand returns urlflow keys and its commands.
func newKeysCommand(getenv env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "for operators: generate, rotate and inspect the key ring; make service keys",
		Long:  keysLong,
		RunE:  runGroup,
	}
	cmd.AddCommand(newKeysGenerateCommand(), newServiceKeyCommand(),
		newKeysStatusCommand(getenv), newKeysResealCommand(getenv), newKeysRecountCommand(getenv))
	return cmd
}

// newServiceKeyAlias returns urlflow service-key, the name of urlflow keys service-key
// before the keys family: hidden, and still working.
func newServiceKeyAlias() *cobra.Command {
	cmd := newServiceKeyCommand()
	cmd.Hidden = true
	cmd.Short += " (now urlflow keys service-key)"
	return cmd
}

func newKeysGenerateCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "generate",
		Short: "print a new entry for URLFLOW_KEYS (a key ID and 32 random bytes)",
		Long:  keysGenerateLong,
		Args:  noArgs,
	}
	kid := cmd.Flags().String("kid", "", "the key ID: 1 to 32 of A-Z a-z 0-9 _ - (default k, today's date and 4 random hex digits)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		id := *kid
		if id == "" {
			id = vault.NewKeyID(time.Now())
		}
		if !vault.ValidKeyID(id) {
			return &usageError{cmd: cmd, err: fmt.Errorf("--kid %q: want 1 to 32 of A-Z a-z 0-9 _ -", id)}
		}
		if _, err := fmt.Fprintln(cmd.OutOrStdout(), vault.GenerateKeyRing(id)); err != nil {
			return err
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "Add it at the end of URLFLOW_KEYS (comma separated) on every replica, then move it to the front to make it active; back it up (docs/production.md#keys-and-rotation).\n")
		return nil
	}
	return cmd
}

// keysConfig reads what the keys commands need: where Redis is and the key ring.
func keysConfig(cmd *cobra.Command, getenv env) (*config, error) {
	command := cmd.CommandPath()[len(cmd.Root().Name())+1:]
	l := &loading{mode: command}
	cfg := &config{}
	var problems []error
	l.v, problems = readSettings(command, cmd.Flags(), getenv, nil)
	l.problems = append(problems, l.problems...)
	cfg.loadRedis(l)
	cfg.loadKeys(l)
	if err := l.err(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// onKeyStore returns the RunE of a keys command that works on the stored credentials: it
// reads the command's settings, connects to Redis, and runs fn with the store on it.
func onKeyStore(getenv env, fn func(*cobra.Command, *config, *credentials.Store) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		cfg, err := keysConfig(cmd, getenv)
		if err != nil {
			return err
		}
		store, done, err := keysStore(cmd, cfg)
		if err != nil {
			return err
		}
		defer done()
		return fn(cmd, cfg, store)
	}
}

// keysStore connects to Redis for a keys command and returns the credential store on it.
func keysStore(cmd *cobra.Command, cfg *config) (*credentials.Store, func(), error) {
	log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	rdb, _, closeRedis, err := connectRedis(cmd.Context(), cfg.RedisURL, cfg.RedisTopology, log)
	if err != nil {
		return nil, nil, err
	}
	return credentials.NewStore(rdb, credentials.Options{Logger: log}), closeRedis, nil
}

func newKeysStatusCommand(getenv env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status",
		Short: "how many stored credentials each key still protects",
		Long:  keysStatusLong,
		Args:  noArgs,
	}
	addFlags(cmd.Flags(), cmdKeysStatus)
	cmd.RunE = onKeyStore(getenv, func(cmd *cobra.Command, cfg *config, store *credentials.Store) error {
		counts, err := store.KeyCounts(cmd.Context())
		if err != nil {
			return err
		}
		writeKeyStatus(cmd.OutOrStdout(), cfg.Keys, counts)
		return counts.Missing(cfg.Keys)
	})
	return cmd
}

// writeKeyStatus writes one line per key of ring and per key the counts know: its ID, its
// role, and how many credentials it protects.
func writeKeyStatus(w io.Writer, ring *vault.KeyRing, counts credentials.KeyCounts) {
	fmt.Fprintf(w, "%-24s %-12s %s\n", "KEY", "ROLE", "CREDENTIALS")
	for i, id := range ring.IDs() {
		role := "verify-only"
		if i == 0 {
			role = "active"
		}
		fmt.Fprintf(w, "%-24s %-12s %d\n", id, role, counts.Count(id))
	}
	for _, u := range counts.Keys {
		if !ring.Has(u.KeyID) && u.Items > 0 {
			fmt.Fprintf(w, "%-24s %-12s %d\n", u.KeyID, "MISSING", u.Items)
		}
	}
	if counts.CountedAt == nil {
		fmt.Fprintln(w, "Counts include only credentials stored since urlflow kept them: run urlflow keys recount once to count the older ones.")
	} else {
		fmt.Fprintf(w, "Counted in full at %s, kept since.\n", counts.CountedAt.Format(time.RFC3339))
	}
}

func newKeysResealCommand(getenv env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "reseal",
		Short: "re-encrypt every stored credential under the active key; safe to interrupt and run again",
		Long:  keysResealLong,
		Args:  noArgs,
	}
	addFlags(cmd.Flags(), cmdKeysReseal)
	cmd.RunE = onKeyStore(getenv, func(cmd *cobra.Command, cfg *config, store *credentials.Store) error {
		stderr := cmd.ErrOrStderr()
		p, err := store.Reseal(cmd.Context(), vault.NewVault(cfg.Keys), credentials.ResealOptions{
			Progress: func(p credentials.ResealProgress) { fmt.Fprintf(stderr, "\r%s", resealLine(p, cfg.Keys.ActiveID())) },
		})
		fmt.Fprintf(stderr, "\r%s\n", resealLine(p, cfg.Keys.ActiveID()))
		if err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "resealed %d credentials under key %s; %d were under it already; %d were deleted meanwhile\n",
			p.Resealed, cfg.Keys.ActiveID(), p.Current, p.Gone)
		return nil
	})
	return cmd
}

// resealLine is the progress line of a pass.
func resealLine(p credentials.ResealProgress, active string) string {
	of := ""
	if p.ToReseal > 0 {
		of = fmt.Sprintf(" of about %d", p.ToReseal)
	}
	return fmt.Sprintf("resealed %d%s under %s; %d seen, %d under it already, %d gone, %d failed",
		p.Resealed, of, active, p.Seen, p.Current, p.Gone, p.Failed)
}

func newKeysRecountCommand(getenv env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "recount",
		Short: "count again, in full, which key protects each stored credential",
		Long:  keysRecountLong,
		Args:  noArgs,
	}
	addFlags(cmd.Flags(), cmdKeysRecount)
	cmd.RunE = onKeyStore(getenv, func(cmd *cobra.Command, cfg *config, store *credentials.Store) error {
		if _, err := store.Recount(cmd.Context(), credentials.ResealOptions{}); err != nil {
			return err
		}
		counts, err := store.KeyCounts(cmd.Context())
		if err != nil {
			return err
		}
		writeKeyStatus(cmd.OutOrStdout(), cfg.Keys, counts)
		return nil
	})
	return cmd
}
