package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/urlflow/urlflow/demoapi"
	"github.com/urlflow/urlflow/oauth/identity"
	"github.com/urlflow/urlflow/services"
	"github.com/urlflow/urlflow/state/vault"
	"github.com/urlflow/urlflow/userref"
)

// devUser is the development user of the printed bearer token.
const devUser = "dev"

// demoService is the development delegating service that urlflow dev adds (unless the
// configuration names a service "demo" itself): it may ask for every configured slot and
// provider, and its users' tokens name its resource (URLFLOW_DEV_DEMO_RESOURCE, by
// default defaultDemoResource).
const (
	demoService         = "demo"
	defaultDemoResource = "http://127.0.0.1:8090/mcp"
)

// sweepInterval is how often deadlines are enforced when nobody reads.
const sweepInterval = time.Second

// newDevCommand returns urlflow dev.
func newDevCommand(getenv env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "run everything on this machine: embedded Redis (unless URLFLOW_REDIS_URL is set), a development identity, loopback only",
		Long: `urlflow dev runs everything on this machine: an embedded Redis (unless URLFLOW_REDIS_URL is
set), a development identity, the demo API and a demo service, on loopback only. It prints
the MCP URL, a bearer token and an operator token once, with ready-to-paste client
configuration.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(cmdDev, cmd.Flags(), getenv)
			if err != nil {
				return err
			}
			return runDev(cmd.Context(), cfg, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	addFlags(cmd.Flags(), cmdDev)
	return cmd
}

// runDev runs urlflow dev with cfg until ctx ends: the development state fills in what
// the settings leave open, and the banner is printed once everything is in place.
func runDev(ctx context.Context, cfg *config, stdout, stderr io.Writer) error {
	log, stopTracing, err := startTracing(ctx, cfg, newLogger(cfg, stderr))
	if err != nil {
		return err
	}
	defer stopTracing()
	statePath, err := devStatePath()
	if err != nil {
		return err
	}
	dev, err := loadDevState(statePath)
	if err != nil {
		return err
	}
	demo, err := cfg.useDevState(dev, statePath)
	if err != nil {
		return err
	}

	rdb, redisNote, closeRedis, err := openRedis(ctx, cfg.RedisURL, cfg.RedisTopology, log)
	if err != nil {
		return err
	}
	defer closeRedis()
	listener, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w (choose another with --addr, e.g. --addr 127.0.0.1:0 for any free port)", cfg.Addr, err)
	}
	defer listener.Close()
	if err := cfg.resolvePublicURL(listener.Addr()); err != nil {
		return err
	}

	resource := cfg.PublicURL.JoinPath("mcp").String()
	devID := identity.NewDev(dev.SigningKey, resource)
	token, err := devID.Issue(devUser)
	if err != nil {
		return err
	}
	serviceKeys := map[string]string{}
	if demo != nil {
		demo.API = cfg.PublicURL.JoinPath("api", "v1", "elicitations").String()
		serviceKeys[demo.Name] = demo.Key
	}
	banner := cfg.devBanner(resource, listener.Addr().String(), token, redisNote, statePath)
	banner.DemoService = demo
	return runService(ctx, cfg, rdb, listener, users{
		verifier: devID, dev: devID, demoAPI: demoapi.Handler(), serviceKeys: serviceKeys,
		forService: func(resource string) (identity.Verifier, error) { return devID.ForAudience(resource), nil },
	}, log, func() { printDevBanner(stdout, banner) })
}

// useDevState fills in from the development state what the settings leave open: the key
// ring, an operator token, and the demo service, unless the configuration file names a
// service "demo" itself. It returns the demo service for the banner, or nil when the file
// has its own.
func (c *config) useDevState(dev *devState, statePath string) (*demoServiceBanner, error) {
	if !c.keysGiven {
		var err error
		if c.Keys, err = vault.ParseKeyRing(dev.Keys); err != nil {
			return nil, fmt.Errorf("development keys in %s: %w", statePath, err)
		}
	}
	if c.UserRefs == nil {
		var err error
		if c.UserRefs, err = userref.Parse(dev.UserReferenceKey); err != nil {
			return nil, fmt.Errorf("development user reference key in %s: %w", statePath, err)
		}
	}
	if len(c.OperatorTokens) == 0 {
		c.OperatorTokens = []string{dev.OperatorToken}
	}
	if _, named := c.Services.Lookup(demoService); named {
		return nil, nil
	}
	if err := c.buildServices(map[string][]string{demoService: {services.Digest(dev.DemoServiceKey)}}, c.demoService()); err != nil {
		return nil, err
	}
	return &demoServiceBanner{Name: demoService, Key: dev.DemoServiceKey, Resource: c.DemoResource}, nil
}

// devBanner is the banner of urlflow dev at resource, listening on listen, with the bearer
// token of the development user.
func (c *config) devBanner(resource, listen, token, redisNote, statePath string) devBanner {
	return devBanner{
		MCPURL: resource, Listen: listen, Token: token, OperatorToken: c.OperatorTokens[0],
		SignIn: c.PublicURL.JoinPath("auth", "login").String(), Redis: redisNote,
		Slots: c.Slots.Names(), Style: c.Style, TTL: c.TTL, StatePath: statePath,
		TokenURL: c.PublicURL.JoinPath("dev", "token").String(),
		DemoAPI:  c.PublicURL.JoinPath("demo", "api").String(),
	}
}

// users is how a mode knows its users, and what it serves besides the product.
type users struct {
	verifier identity.Verifier
	// dev is the development identity (urlflow dev); signIn and issuer the production one.
	dev     *identity.Dev
	signIn  *identity.BrowserSignIn
	issuer  string
	scopes  []string
	demoAPI http.Handler
	// serviceKeys are the keys of development services (the demo service's), by name.
	serviceKeys map[string]string
	// forService returns the verifier of the user tokens a delegating service forwards:
	// tokens of this deployment's users for the service's resource.
	forService func(resource string) (identity.Verifier, error)
}

// demoService is the configuration of urlflow dev's demo service.
func (c *config) demoService() services.Config {
	demo := services.Config{Name: demoService, Label: "Demo MCP server (development)", Resource: c.DemoResource}
	for _, s := range c.secrets {
		demo.Slots = append(demo.Slots, s.Name)
	}
	for _, p := range c.providers {
		demo.Providers = append(demo.Providers, p.Name)
	}
	return demo
}
