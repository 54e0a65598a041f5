package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/urlflow/urlflow/ask"
	"github.com/urlflow/urlflow/forget"
	"github.com/urlflow/urlflow/internal/embedded"
	"github.com/urlflow/urlflow/internal/tracing"
	"github.com/urlflow/urlflow/mcp"
	"github.com/urlflow/urlflow/metrics"
	"github.com/urlflow/urlflow/oauth/identity"
	"github.com/urlflow/urlflow/oauth/providers"
	"github.com/urlflow/urlflow/recovery"
	"github.com/urlflow/urlflow/services"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/audit"
	"github.com/urlflow/urlflow/state/authorizations"
	"github.com/urlflow/urlflow/state/browsersession"
	"github.com/urlflow/urlflow/state/counters"
	"github.com/urlflow/urlflow/state/credentials"
	"github.com/urlflow/urlflow/state/flow"
	"github.com/urlflow/urlflow/state/languages"
	"github.com/urlflow/urlflow/state/mcpsessions"
	"github.com/urlflow/urlflow/state/once"
	"github.com/urlflow/urlflow/state/ratelimit"
	"github.com/urlflow/urlflow/state/servicecreds"
	"github.com/urlflow/urlflow/state/serviceevents"
	"github.com/urlflow/urlflow/state/vault"
	"github.com/urlflow/urlflow/state/webhooks"
	"github.com/urlflow/urlflow/upstream"
	"github.com/urlflow/urlflow/web"
	"github.com/urlflow/urlflow/web/admin"
	"github.com/urlflow/urlflow/web/api"
	"github.com/urlflow/urlflow/web/browser"
	"github.com/urlflow/urlflow/web/limits"
	"github.com/urlflow/urlflow/web/pages"
	"github.com/urlflow/urlflow/webhook"
)

// serviceUsers returns, per service, the verifier of the user tokens it forwards. A
// service whose resource is urlflow's own is refused: a token for urlflow would be
// evidence for it.
func serviceUsers(catalog *services.Catalog, own string, forService func(string) (identity.Verifier, error)) (map[string]identity.Verifier, error) {
	out := map[string]identity.Verifier{}
	for _, svc := range catalog.List() {
		if svc.Resource == own {
			return nil, fmt.Errorf("service %s: its resource is urlflow's own MCP URL; give the service's own", svc.Name)
		}
		v, err := forService(svc.Resource)
		if err != nil {
			return nil, fmt.Errorf("service %s: %w", svc.Name, err)
		}
		out[svc.Name] = v
	}
	return out, nil
}

// webhookTargets returns where each service's webhooks go.
func webhookTargets(catalog *services.Catalog) func(string) (webhook.Target, bool) {
	return func(name string) (webhook.Target, bool) {
		svc, ok := catalog.Lookup(name)
		if !ok || svc.Webhook == nil {
			return webhook.Target{}, false
		}
		return webhook.Target{URL: svc.Webhook.URL, Keys: svc.Webhook.Keys}, true
	}
}

// defaultShutdownGrace is the default of URLFLOW_SHUTDOWN_GRACE: the longest wait of a
// push-style tool call, and time to answer.
const defaultShutdownGrace = mcp.DefaultPushWait + 10*time.Second

// webhookSchedule is the webhook schedule: the default, or with every retry after wait
// (URLFLOW_TEST_WEBHOOK_RETRY).
func webhookSchedule(wait time.Duration) []time.Duration {
	if wait == 0 {
		return webhook.DefaultSchedule
	}
	schedule := make([]time.Duration, len(webhook.DefaultSchedule))
	for i := 1; i < len(schedule); i++ {
		schedule[i] = wait
	}
	return schedule
}

// parts are the stores and use cases of the service, made once and shared by the MCP
// server, the HTTP surface and the background work.
type parts struct {
	cfg         *config
	log         *slog.Logger
	replica     string
	count       *counters.Counters
	limiter     *ratelimit.Limiter
	instruments *metrics.Process
	trail       *audit.Trail
	streams     *serviceevents.Streams
	deliveries  *webhooks.Queue
	svcCreds    *servicecreds.Index
	flows       *flow.Store
	creds       *credentials.Store
	hub         *flow.Hub
	seals       *vault.Vault
	keeper      *providers.Keeper
	caller      *upstream.Caller
	asker       *ask.Asker
	mcpSessions *mcpsessions.Registry
	recoveries  *recovery.Recovery
	providers   *providers.Set
	forgetter   *forget.Forgetter
	languages   *languages.Store
}

// newParts makes the parts of the service on rdb.
func newParts(cfg *config, rdb redis.UniversalClient, known *providers.Set, log *slog.Logger) *parts {
	p := &parts{cfg: cfg, replica: replicaName(), providers: known, caller: upstream.New(nil), instruments: metrics.New()}
	p.log = log.With("replica", p.replica)
	p.count = counters.New(rdb, p.log)
	p.limiter = ratelimit.NewLimiter(rdb, nil)
	p.trail = audit.New(rdb, audit.Options{Retention: cfg.AuditRetention, MaxEntries: cfg.AuditMaxEntries, Replica: p.replica, Logger: p.log})
	p.streams = serviceevents.New(rdb, cfg.UserRefs, nil, p.log)
	p.deliveries = webhooks.New(rdb, cfg.Services.WebhookWants, cfg.UserRefs)
	p.svcCreds = servicecreds.New(rdb, cfg.UserRefs)
	p.flows = flow.NewStore(rdb, flow.StoreOptions{Logger: p.log, Counters: p.count, IDKeys: cfg.Keys.DeriveAll("elicitation id"), Retention: cfg.FlowRetention,
		Outboxes: []flow.Outbox{p.streams, p.deliveries, p.svcCreds}, StuckAfter: cfg.StuckAfter, Audit: p.trail, Metrics: p.instruments})
	p.creds = credentials.NewStore(rdb, credentials.Options{Logger: p.log, Audit: p.trail,
		Lifecycles: []credentials.Lifecycle{p.streams, p.deliveries, p.svcCreds}})
	p.hub = flow.NewHub(rdb, p.log)
	p.seals = vault.NewVault(cfg.Keys)
	p.keeper = providers.NewKeeper(p.creds, p.seals, p.count, p.log)
	p.asker = ask.New(ask.Options{Flows: p.flows, Credentials: p.creds, Keys: once.New(rdb), Vault: p.seals, Slots: cfg.Slots,
		TTL: cfg.TTL, ToolStateKeys: cfg.Keys.DeriveAll("mcp request state"), ServiceStateKeys: cfg.Keys.DeriveAll("service request state"),
		Logger: p.log})
	p.mcpSessions = mcpsessions.New(rdb, nil)
	p.languages = languages.New(rdb)
	p.recoveries = recovery.New(recovery.Options{Flows: p.flows, Sessions: p.mcpSessions, Hub: p.hub, Audit: p.trail, TTL: cfg.TTL})
	p.forgetter = forget.New(forget.Options{Redis: rdb, Flows: p.flows, Credentials: p.creds, Sessions: p.mcpSessions,
		ServiceCredentials: p.svcCreds, Services: cfg.Services.Names(), Audit: p.trail, Logger: p.log})
	return p
}

// mcpServer is the MCP server of the service.
func (p *parts) mcpServer() *mcp.Server {
	cfg := p.cfg
	return mcp.New(mcp.Options{
		Flows: p.flows, Sessions: p.mcpSessions, Recovery: p.recoveries, Credentials: p.creds, Counters: p.count,
		Metrics: p.instruments, Hub: p.hub, Vault: p.seals, Upstream: p.caller, Slots: cfg.Slots, Providers: p.providers,
		Keeper: p.keeper, Asker: p.asker, PublicURL: cfg.PublicURL, Style: cfg.Style, Replica: p.replica, Version: version(),
		Logger: p.log, PushWait: cfg.Waits.Push, ProgressInterval: cfg.Waits.Progress, RetryWait: cfg.Waits.Retry,
		StatusWaitLimit: cfg.Waits.StatusLimit, SessionsPerUser: cfg.MCPSessions.PerUser, SessionIdleTimeout: cfg.MCPSessions.IdleTimeout,
		ReplicaHeartbeat: cfg.Waits.ReplicaHeartbeat, Catalog: cfg.Catalog, Languages: p.languages,
	})
}

// webServer is the HTTP surface of the service, with mcp at /mcp and the identity of id;
// users verifies the user tokens that each service forwards.
func (p *parts) webServer(rdb redis.UniversalClient, id users, users map[string]identity.Verifier, mcp http.Handler) *web.Server {
	cfg := p.cfg
	verifier := identity.Remember(id.verifier) // one memory of accepted tokens, for /mcp and the API
	browsers := browser.New(browser.Options{Sessions: browsersession.NewStore(rdb), CookieKeys: cfg.Keys.DeriveAll("session cookie"),
		CSRFKeys: cfg.Keys.DeriveAll("csrf"), Secure: cfg.PublicURL.Scheme == "https", Dev: id.dev != nil, Flows: p.flows, Languages: p.languages,
		Audit: p.trail, Metrics: p.instruments, ClientAddr: cfg.TrustedProxies.ClientAddr, Logger: p.log})
	rates := limits.New(limits.Options{Limiter: p.limiter, Rates: cfg.RateLimits, Services: cfg.Services, Counters: p.count,
		Audit: p.trail, Logger: p.log})
	return web.New(web.Options{
		PublicURL: cfg.PublicURL, MCP: mcp, Limits: rates,
		Pages: pages.New(pages.Options{Browser: browsers, Limits: rates, Flows: p.flows, Credentials: p.creds, Vault: p.seals,
			Slots: cfg.Slots, Providers: p.providers, Keeper: p.keeper, Authorizations: authorizations.New(rdb), Upstream: p.caller,
			Services: cfg.Services, Dev: id.dev, DevServiceKeys: id.serviceKeys, SignIn: id.signIn, Counters: p.count, Logger: p.log}),
		Admin: admin.New(admin.Options{Browser: browsers, Flows: p.flows, Recovery: p.recoveries, OperatorSubjects: cfg.OperatorSubjects,
			ReadOnlySubjects: cfg.OperatorReadOnlySubjects,
			Dev:              id.dev != nil}),
		API: api.New(api.Options{PublicURL: cfg.PublicURL, Flows: p.flows, Hub: p.hub, Asker: p.asker, Recovery: p.recoveries,
			Credentials: p.creds, Vault: p.seals, Keeper: p.keeper, Upstream: p.caller, Slots: cfg.Slots, Providers: p.providers,
			Services: cfg.Services, ServiceUsers: users, Verifier: verifier, Dev: id.dev, Issuer: id.issuer,
			ServiceEvents: p.streams, Webhooks: p.deliveries, ServiceCredentials: p.svcCreds, UserRefs: cfg.UserRefs, Audit: p.trail, Counters: p.count,
			Forget: p.forgetter, StatusWaitLimit: cfg.Waits.StatusLimit, Logger: p.log}),
		Identity: web.Identity{Verifier: verifier, Operators: identity.NewOperators(cfg.OperatorTokens, cfg.OperatorReadOnlyTokens),
			Services: cfg.Services, RequiredScopes: id.scopes, Issuer: id.issuer, BadTokens: cfg.RateLimits.BadTokens},
		TrustedProxies: cfg.TrustedProxies, Dev: id.dev != nil, DemoAPI: id.demoAPI, BodyReadTimeout: cfg.BodyReadTimeout, Brand: cfg.Brand, Catalog: cfg.Catalog,
		Flows: p.flows, Vault: p.seals, Counters: p.count, Metrics: p.instruments, Audit: p.trail, Logger: p.log,
	})
}

// runService assembles urlflow on rdb and listener and serves until ctx ends. started runs
// once everything is in place, before the first request is served.
func runService(ctx context.Context, cfg *config, rdb redis.UniversalClient, listener net.Listener, id users, log *slog.Logger, started func()) error {
	known, err := providers.New(ctx, cfg.providers, providers.Options{PublicURL: cfg.PublicURL.String()})
	if err != nil {
		return fmt.Errorf("configuration file %s: %w", describeFile(cfg.ConfigFile), err)
	}
	users, err := serviceUsers(cfg.Services, cfg.PublicURL.JoinPath("mcp").String(), id.forService)
	if err != nil {
		return fmt.Errorf("configuration file %s: %w", describeFile(cfg.ConfigFile), err)
	}
	p := newParts(cfg, rdb, known, log)
	log = p.log
	// A credential whose key left the ring would never open again: refuse now, naming it.
	if err := p.creds.CheckKeys(ctx, cfg.Keys); err != nil {
		return err
	}
	mcpServer := p.mcpServer()
	webServer := p.webServer(rdb, id, users, mcpServer.Handler())
	sender := webhook.NewSender(webhook.Options{Queue: p.deliveries, Targets: webhookTargets(cfg.Services),
		Schedule: webhookSchedule(cfg.Waits.WebhookRetry), Counters: p.count, Logger: log})
	var debug net.Listener
	if cfg.DebugAddr != "" {
		if debug, err = net.Listen("tcp", cfg.DebugAddr); err != nil {
			return fmt.Errorf("URLFLOW_DEBUG_ADDR: listen on %s: %w", cfg.DebugAddr, err)
		}
		log.Warn("profiling listener (net/http/pprof) is on: it shows the process's memory and stacks to anyone who can reach it",
			"addr", debug.Addr().String())
	}

	// Every goroutine of the service runs in the group and is joined before runService
	// returns, so that the caller closes Redis only once nothing uses it. The first one to
	// fail (the HTTP server) stops the others. When ctx ends (SIGTERM), the HTTP server
	// drains first (drainer), and the background work (notifications, the event
	// subscription that wakes waiting tool calls) runs until it has.
	background, stopBackground := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBackground()
	g, gctx := errgroup.WithContext(background)
	p.runBackground(gctx, g)
	g.Go(func() error { mcpServer.Run(gctx); return nil })
	g.Go(func() error { sender.Run(gctx); return nil })
	httpCtx, stopHTTP := context.WithCancel(ctx)
	defer context.AfterFunc(gctx, stopHTTP)()
	g.Go(func() error {
		defer stopBackground()
		return serveHTTP(httpCtx, listener, webServer.Handler(), log, drainer(mcpServer, webServer, cfg.ShutdownGrace, log))
	})
	if debug != nil {
		g.Go(func() error { return serveHTTP(gctx, debug, profiling(), log, nil) })
	}

	started()
	log.Info("urlflow listening", "addr", listener.Addr().String(), "public_url", cfg.PublicURL.String(),
		"style", cfg.Style, "ttl", cfg.TTL.String(), "development", id.dev != nil)
	err = g.Wait()
	log.Info("urlflow stopped")
	return err
}

// drainer returns what serveHTTP does before it shuts down: /readyz turns 503, new MCP
// sessions are refused, and the POST requests in progress get up to grace to finish while
// everything else is still served.
func drainer(mcpServer *mcp.Server, webServer *web.Server, grace time.Duration, log *slog.Logger) func() {
	return func() {
		log.Info("stopping: /readyz answers 503 and no new MCP session starts; requests in progress may finish",
			"grace", grace.String())
		mcpServer.Drain()
		webServer.Drain()
		ctx, cancel := context.WithTimeout(context.Background(), grace)
		defer cancel()
		if !webServer.Idle(ctx) {
			log.Warn("stopping with requests still in progress: the shutdown grace ran out", "grace", grace.String())
		}
	}
}

// runBackground starts the parts' background work in g: the sweeper, the event
// subscription, the counters', audit trail's and rate limits' syncs, and the one-time move
// of the users' audit logs of an earlier urlflow.
func (p *parts) runBackground(ctx context.Context, g *errgroup.Group) {
	g.Go(func() error { p.flows.RunSweeper(ctx, sweepInterval); return nil })
	g.Go(func() error { p.hub.Run(ctx); return nil })
	g.Go(func() error { p.count.Run(ctx); return nil })
	g.Go(func() error { p.trail.Run(ctx); return nil })
	g.Go(func() error { p.limiter.Run(ctx, p.log); return nil })
	g.Go(func() error {
		if moved, err := p.creds.MoveAuditLogs(ctx); err != nil && ctx.Err() == nil {
			p.log.Warn("moving the users' audit logs into the audit trail failed; the next start tries again", "err", err)
		} else if moved > 0 {
			p.log.Info("the users' audit logs of an earlier urlflow moved into the audit trail", "users", moved)
		}
		return nil
	})
}

// openRedis connects to url, or starts the embedded Redis when url is empty, with a span
// for each command when tracing is on. It returns a note for the banner that never holds a
// password.
func openRedis(ctx context.Context, rawURL string, topology state.Topology, log *slog.Logger) (redis.UniversalClient, string, func(), error) {
	rdb, note, closeRedis, err := connectRedis(ctx, rawURL, topology, log)
	if err != nil {
		return nil, "", nil, err
	}
	if err := tracing.InstrumentRedis(rdb); err != nil {
		closeRedis()
		return nil, "", nil, err
	}
	return rdb, note, closeRedis, nil
}

// connectRedis is openRedis without the tracing.
func connectRedis(ctx context.Context, rawURL string, topology state.Topology, log *slog.Logger) (redis.UniversalClient, string, func(), error) {
	if rawURL == "" {
		mem, err := embedded.Start()
		if err != nil {
			return nil, "", nil, err
		}
		log.Warn("URLFLOW_REDIS_URL is not set: using an embedded in-process Redis; everything stored is lost when urlflow stops")
		rdb, err := state.Connect(ctx, mem.URL(), state.Standalone)
		if err != nil {
			mem.Close()
			return nil, "", nil, err
		}
		return rdb, "embedded in this process (in memory: everything is lost when urlflow stops)",
			func() { rdb.Close(); mem.Close() }, nil
	}
	rdb, err := state.Connect(ctx, rawURL, topology)
	if err != nil {
		return nil, "", nil, fmt.Errorf("URLFLOW_REDIS_URL: %w", err)
	}
	note := state.RedisAddrs(rawURL, topology)
	if topology != state.Standalone {
		note = string(topology) + " " + note
	}
	return rdb, note, func() { rdb.Close() }, nil
}

func replicaName() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "urlflow"
	}
	return host + "-" + strings.ToLower(rand.Text()[:6])
}

// profiling returns the handlers of net/http/pprof, for the profiling listener.
func profiling() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// serveHTTP serves handler on listener until ctx ends, then drains (drain, when not nil,
// returns once the requests that matter have finished) and shuts down: open streams get a
// few seconds to finish. The server bounds the time to read a request's headers and an idle
// connection; the handler bounds the time to read a body (web.Options.BodyReadTimeout).
// Nothing bounds writing: push waits, long polls and event streams run for minutes.
func serveHTTP(ctx context.Context, listener net.Listener, handler http.Handler, log *slog.Logger, drain func()) error {
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(listener) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	if drain != nil {
		drain()
	}
	log.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		srv.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
