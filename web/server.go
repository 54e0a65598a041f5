// Package web serves urlflow over HTTP with echo: the elicitation pages a user opens from an
// MCP client, urlflow's own browser sign-in, the recovery API, health checks, and the MCP
// endpoint behind bearer authentication (served beside echo, with the same headers, log and
// limits: serveMCPOutsideEcho).
//
// The one idea to hold: every page checks who is signed in against the elicitation's user
// before it shows or changes anything, and every state change is asked of package state,
// never decided here.
package web

import (
	"cmp"
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/urlflow/urlflow/internal/brand"
	"github.com/urlflow/urlflow/internal/locale"
	"github.com/urlflow/urlflow/internal/tracing"
	"github.com/urlflow/urlflow/metrics"
	"github.com/urlflow/urlflow/oauth/identity"
	"github.com/urlflow/urlflow/services"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/audit"
	"github.com/urlflow/urlflow/state/counters"
	"github.com/urlflow/urlflow/state/flow"
	"github.com/urlflow/urlflow/state/ratelimit"
	"github.com/urlflow/urlflow/state/vault"
	"github.com/urlflow/urlflow/templates"
	"github.com/urlflow/urlflow/web/admin"
	"github.com/urlflow/urlflow/web/api"
	"github.com/urlflow/urlflow/web/limits"
	"github.com/urlflow/urlflow/web/pages"
)

// Options configure a Server. All fields but Dev, DemoAPI, BodyReadTimeout, Brand and Catalog are
// required.
type Options struct {
	// PublicURL is where users reach urlflow; every URL handed out starts with it.
	PublicURL *url.URL
	// Pages, Admin and API are the three audiences: the end users' pages, the operators'
	// pages and the JSON API. MCP is the MCP endpoint, served at /mcp behind bearer
	// authentication and Limits' rate limit.
	Pages  *pages.Pages
	Admin  *admin.Admin
	API    *api.API
	MCP    http.Handler
	Limits *limits.Limits
	// Identity says who may call /mcp and the API.
	Identity Identity
	// TrustedProxies are the reverse proxies whose X-Forwarded-For names the client address
	// that Identity.BadTokens counts by; with none, it is the TCP peer.
	TrustedProxies TrustedProxies
	// Dev turns on a loopback-only Host check on every request and marks the pages as
	// development's; DemoAPI, when set, is served under /demo/api.
	Dev     bool
	DemoAPI http.Handler
	// Brand is the deployment's look of the end users' pages (nil: urlflow's own).
	Brand *brand.Brand
	// Catalog is the pages' wording in every language (nil: the embedded catalogs,
	// locale.Default).
	Catalog *locale.Catalog
	// BodyReadTimeout is the time a request has to deliver its body, on every route
	// (DefaultBodyReadTimeout when zero). It bounds reading only: answers, event streams
	// and tool calls that wait take as long as they need.
	BodyReadTimeout time.Duration
	// Health: Flows (Redis answers) and Vault (the keys seal and open) make /readyz, and
	// with Counters the figures /metrics shows beside this process's Metrics (New makes
	// its own if nil). Audit receives the refused bearer tokens.
	Flows    *flow.Store
	Vault    *vault.Vault
	Counters *counters.Counters
	Metrics  *metrics.Process
	Audit    *audit.Trail
	Logger   *slog.Logger
}

// Identity says who may call /mcp and the API, and how MCP clients learn to sign in.
type Identity struct {
	// Verifier checks users' bearer tokens; Operators the operators' tokens; Services
	// the delegating services' keys and client credentials tokens. Only the API takes
	// operators and services: an MCP session belongs to a user.
	Verifier  identity.Verifier
	Operators *identity.Operators
	Services  *services.Catalog
	// RequiredScopes must all be in a user's access token.
	RequiredScopes []string
	// Issuer is the authorization server that MCP clients sign in with, named in the
	// protected resource metadata; empty in development.
	Issuer string
	// BadTokens bounds the bearer tokens that do not verify from one client address (each
	// may make urlflow ask the issuer); the zero value limits nothing.
	BadTokens ratelimit.Limit
}

// DefaultBodyReadTimeout is the time a request has to deliver its body when
// Options.BodyReadTimeout is zero.
const DefaultBodyReadTimeout = 30 * time.Second

// Server is urlflow's HTTP surface.
type Server struct {
	opts Options
	echo *echo.Echo
	// handler serves /mcp itself and the rest through echo (serveMCPOutsideEcho).
	handler http.Handler
	metrics *metrics.Process
	// verifier is Identity.Verifier remembering the tokens it accepted
	// (identity.Remember): a client sends one token with every request.
	verifier identity.Verifier
	log      *slog.Logger
	// draining is set once the process stops (Drain); posts counts the POST requests in
	// progress, which Idle waits for.
	draining atomic.Bool
	posts    atomic.Int64
}

// Drain makes /readyz answer 503 from now on, so that load balancers send new requests
// elsewhere; everything else is served as before.
func (s *Server) Drain() { s.draining.Store(true) }

// Idle waits until no POST request begun before Drain is in progress (a tool call waiting
// for its user, a secret being checked with its API) or ctx ends, and reports whether none
// is. Requests begun after Drain are served but not waited for: under steady traffic a
// drain would otherwise always last its whole grace.
func (s *Server) Idle(ctx context.Context) bool {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for s.posts.Load() > 0 {
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
	return true
}

// New returns a Server with every route in place.
func New(opts Options) *Server {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	s := &Server{opts: opts, echo: echo.New(), log: log, metrics: newMetrics(opts.Metrics, opts.Counters, opts.Flows, log),
		verifier: identity.Remember(opts.Identity.Verifier)}
	s.routes()
	return s
}

// Handler returns the http.Handler to serve.
func (s *Server) Handler() http.Handler { return s.handler }

// URL returns the public URL of path.
func (s *Server) URL(path string) string { return s.opts.PublicURL.JoinPath(path).String() }

func (s *Server) resourceURL() string { return s.URL("/mcp") }

func (s *Server) resourceMetadataURL() string {
	return s.URL("/.well-known/oauth-protected-resource/mcp")
}

func (s *Server) routes() {
	e := s.echo
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.handleError
	bodyTimeout := cmp.Or(s.opts.BodyReadTimeout, DefaultBodyReadTimeout)
	e.Pre(bodyReadDeadline(bodyTimeout))
	e.Use(s.recoverPanics, s.logRequests, securityHeaders(s.opts.PublicURL.Scheme == "https"), withBrand(s.opts.Brand), withLanguage(cmp.Or(s.opts.Catalog, locale.Default()), s.opts.PublicURL.Scheme == "https"))
	if s.opts.Dev {
		e.Use(loopbackHostOnly)
	}

	e.GET("/static/*", echo.WrapHandler(http.StripPrefix("/static/", staticFiles())))
	e.GET(templates.LapseStylesheetPath, echo.WrapHandler(http.HandlerFunc(templates.ServeLapseStylesheet)))
	e.GET(brand.LogoPath, echo.WrapHandler(http.HandlerFunc(s.opts.Brand.ServeLogo)))
	e.GET(brand.StylesheetPath, echo.WrapHandler(http.HandlerFunc(s.opts.Brand.ServeStylesheet)))
	e.GET("/healthz", s.healthz)
	e.GET("/metrics", s.serveMetrics)
	e.GET("/readyz", s.readyz)

	metadata := auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource:               s.resourceURL(),
		ResourceName:           "urlflow",
		BearerMethodsSupported: []string{"header"},
		AuthorizationServers:   s.authorizationServers(),
		ScopesSupported:        s.opts.Identity.RequiredScopes,
	})
	e.Any("/.well-known/oauth-protected-resource", echo.WrapHandler(metadata))
	e.Any("/.well-known/oauth-protected-resource/mcp", echo.WrapHandler(metadata))

	// One bearer check for /mcp and the API, with one count of bad tokens. /mcp takes
	// users' tokens only (an MCP session belongs to a user): no operator, and no service,
	// neither by its key nor by its client credentials token. The API takes all three.
	id := s.opts.Identity
	badTokens := identity.NewBadTokens(identity.BadTokenLimit{Failures: id.BadTokens.Events, Window: id.BadTokens.Window},
		s.opts.TrustedProxies.ClientAddr)
	usersOnly := identity.BearerOptions{ResourceMetadataURL: s.resourceMetadataURL(), Scopes: id.RequiredScopes,
		BadTokens: badTokens, Refused: s.refusedToken, Logger: s.log}
	mcp := identity.RequireBearer(s.verifier, usersOnly)(s.opts.Limits.MCP(identity.ForSDK(s.opts.MCP)))
	s.handler = tracing.Handler(s.serveMCPOutsideEcho(mcp, bodyTimeout))
	apiOpts := usersOnly
	apiOpts.Operators = id.Operators
	if id.Services != nil {
		apiOpts.Services = id.Services
	}

	forms := e.Group("", limitBody(formBodyLimit), crossOriginProtection)
	s.opts.Pages.Mount(e, forms)
	s.opts.Admin.Mount(forms)
	s.opts.API.Mount(e.Group("/api/v1", echo.WrapMiddleware(identity.RequireBearer(s.verifier, apiOpts)),
		s.opts.Limits.Services, limitAPIBody()))
	if s.opts.DemoAPI != nil {
		e.Any("/demo/api/*", echo.WrapHandler(s.opts.DemoAPI))
	}
}

// authorizationServers lists the issuers clients sign in with. The development identity
// has none: clients send the printed token as a header.
func (s *Server) authorizationServers() []string {
	if s.opts.Identity.Issuer == "" {
		return nil
	}
	return []string{s.opts.Identity.Issuer}
}

func (s *Server) healthz(c echo.Context) error {
	return c.String(http.StatusOK, "ok\n")
}

// readyz answers 200 when Redis answers and the keys seal and open a value.
func (s *Server) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	checks := map[string]string{"redis": "ok", "keys": "ok"}
	status := http.StatusOK
	if s.draining.Load() {
		checks["process"] = "stopping"
		status = http.StatusServiceUnavailable
	}
	if err := s.opts.Flows.Ping(ctx); err != nil {
		checks["redis"] = "unavailable"
		status = http.StatusServiceUnavailable
		s.log.WarnContext(ctx, "not ready: Redis", "err", err)
	}
	probe := state.User{Issuer: "urn:urlflow:readyz", Subject: "probe"}
	sealed, err := s.opts.Vault.Seal(probe, "readyz", state.NewSecret("probe"))
	if err == nil {
		_, err = s.opts.Vault.Open(probe, "readyz", sealed)
	}
	if err != nil {
		checks["keys"] = "unusable"
		status = http.StatusServiceUnavailable
		s.log.WarnContext(ctx, "not ready: keys", "err", err)
	}
	return c.JSON(status, checks)
}
