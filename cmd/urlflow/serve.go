package main

import (
	"context"
	"fmt"
	"io"
	"net"

	"github.com/spf13/cobra"

	"github.com/urlflow/urlflow/oauth"
	"github.com/urlflow/urlflow/oauth/identity"
)

// newServeCommand returns urlflow serve: production. Everything comes from configuration,
// and it refuses to start, naming every missing or invalid setting, rather than fall back
// to a development default: a real Redis, the public URL, the key ring, and the
// deployment's OpenID issuer for MCP access tokens and the browser sign-in.
func newServeCommand(getenv env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "run in production: a real Redis, your OpenID issuer for identity; every setting from flags, the environment or the configuration file",
		Long: `urlflow serve runs urlflow in production: a real Redis, your OpenID issuer for identity,
every setting from flags, the environment or the configuration file (docs/configuration.md).
It refuses to start, naming every missing or invalid setting.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(cmdServe, cmd.Flags(), getenv)
			if err != nil {
				return err
			}
			return runServe(cmd.Context(), cfg, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	addFlags(cmd.Flags(), cmdServe)
	return cmd
}

// runServe runs urlflow serve with cfg until ctx ends.
func runServe(ctx context.Context, cfg *config, stdout, stderr io.Writer) error {
	log, stopTracing, err := startTracing(ctx, cfg, newLogger(cfg, stderr))
	if err != nil {
		return err
	}
	defer stopTracing()

	rdb, _, closeRedis, err := openRedis(ctx, cfg.RedisURL, cfg.RedisTopology, log)
	if err != nil {
		return err
	}
	defer closeRedis()

	issuer, err := oauth.Discover(ctx, cfg.OIDC.Issuer, nil)
	if err != nil {
		return fmt.Errorf("URLFLOW_OIDC_ISSUER: %w", err)
	}
	credentials := identity.ClientCredentials{ClientID: cfg.OIDC.ClientID, ClientSecret: cfg.OIDC.ClientSecret}
	rsCfg := identity.ResourceServerConfig{Resource: cfg.PublicURL.JoinPath("mcp").String()}
	if cfg.OIDC.Introspection {
		rsCfg.Introspection = &credentials
	}
	verifier, err := identity.NewResourceServer(issuer, rsCfg)
	if err != nil {
		return fmt.Errorf("URLFLOW_OIDC_INTROSPECTION: %w", err)
	}
	signIn := identity.NewBrowserSignIn(issuer, credentials, cfg.PublicURL.JoinPath("auth", "callback").String())
	if cfg.OperatorClaim != "" {
		signIn.RecogniseOperators(cfg.OperatorClaim, cfg.OperatorClaimValue)
	}

	listener, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	defer listener.Close()
	if err := cfg.resolvePublicURL(listener.Addr()); err != nil {
		return err
	}
	if len(cfg.Slots.Names()) == 0 {
		log.Warn("no secret slots configured: set_secret and call_api have nothing to ask for; name them in the file of URLFLOW_CONFIG")
	}
	forService := func(resource string) (identity.Verifier, error) {
		forResource := rsCfg
		forResource.Resource = resource
		return identity.NewResourceServer(issuer, forResource)
	}
	return runService(ctx, cfg, rdb, listener, users{
		verifier: verifier, signIn: signIn, issuer: issuer.URL, scopes: cfg.OIDC.Scopes, forService: forService,
	}, log, func() {
		fmt.Fprintf(stdout, "urlflow serve: MCP endpoint %s, listening on %s\n", rsCfg.Resource, listener.Addr())
	})
}
