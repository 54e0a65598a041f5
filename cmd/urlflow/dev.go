package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/urlflow/urlflow/demoapi"
	"github.com/urlflow/urlflow/oauth/identity"
	"github.com/urlflow/urlflow/services"
	"github.com/urlflow/urlflow/state/vault"
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

func runDev(ctx context.Context, args []string, getenv env, stdout, stderr io.Writer) error {
	cfg, err := loadConfig("dev", args, getenv, stderr)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))

	statePath, err := devStatePath()
	if err != nil {
		return err
	}
	dev, err := loadDevState(statePath)
	if err != nil {
		return err
	}
	if !cfg.keysGiven {
		if cfg.Keys, err = vault.ParseKeyRing(dev.Keys); err != nil {
			return fmt.Errorf("development keys in %s: %w", statePath, err)
		}
	}
	if len(cfg.OperatorTokens) == 0 {
		cfg.OperatorTokens = []string{dev.OperatorToken}
	}

	var demo *demoServiceBanner
	if _, named := cfg.Services.Lookup(demoService); !named {
		if err := cfg.buildServices(map[string][]string{demoService: {services.Digest(dev.DemoServiceKey)}}, cfg.demoService()); err != nil {
			return err
		}
		demo = &demoServiceBanner{Name: demoService, Key: dev.DemoServiceKey, Resource: cfg.DemoResource}
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
	return runService(ctx, cfg, rdb, listener, users{
		verifier: devID, dev: devID, demoAPI: demoapi.Handler(), serviceKeys: serviceKeys,
		forService: func(resource string) (identity.Verifier, error) { return devID.ForAudience(resource), nil },
	}, log, func() {
		printDevBanner(stdout, devBanner{
			MCPURL: resource, Listen: listener.Addr().String(), Token: token, OperatorToken: cfg.OperatorTokens[0],
			SignIn: cfg.PublicURL.JoinPath("auth", "login").String(), Redis: redisNote,
			Slots: cfg.Slots.Names(), Style: cfg.Style, TTL: cfg.TTL, StatePath: statePath,
			TokenURL: cfg.PublicURL.JoinPath("dev", "token").String(),
			DemoAPI:  cfg.PublicURL.JoinPath("demo", "api").String(), DemoService: demo,
		})
	})
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
