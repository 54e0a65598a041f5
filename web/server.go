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
	"time"

	"github.com/labstack/echo/v4"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/urlflow/urlflow/ask"
	"github.com/urlflow/urlflow/metrics"
	"github.com/urlflow/urlflow/oauth/identity"
	"github.com/urlflow/urlflow/oauth/thirdparty"
	"github.com/urlflow/urlflow/proxy"
	"github.com/urlflow/urlflow/recovery"
	"github.com/urlflow/urlflow/services"
	"github.com/urlflow/urlflow/slots"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/audit"
	"github.com/urlflow/urlflow/state/authorizations"
	"github.com/urlflow/urlflow/state/browsersession"
	"github.com/urlflow/urlflow/state/counters"
	"github.com/urlflow/urlflow/state/credentials"
	"github.com/urlflow/urlflow/state/flow"
	"github.com/urlflow/urlflow/state/mcpsessions"
	"github.com/urlflow/urlflow/state/ratelimit"
	"github.com/urlflow/urlflow/state/serviceevents"
	"github.com/urlflow/urlflow/state/vault"
	"github.com/urlflow/urlflow/state/webhooks"
	"github.com/urlflow/urlflow/upstream"
)

// Options configure a Server. All fields but Dev are required.
type Options struct {
	// PublicURL is where users reach urlflow; every URL handed out starts with it.
	PublicURL *url.URL
	// Flows keeps the elicitations and Hub wakes those who wait for them; Credentials keeps
	// what they stored, sealed by Vault.
	Flows *flow.Store
	Hub   *flow.Hub
	// MCPSessions tells whether the MCP session of a flow still lives (the retry API).
	MCPSessions *mcpsessions.Registry
	// Authorizations keeps the third-party authorizations in progress.
	Authorizations *authorizations.Store
	// ServiceEvents are the services' event streams (GET /api/v1/events); Webhooks the
	// records of their webhook deliveries.
	ServiceEvents *serviceevents.Streams
	Webhooks      *webhooks.Queue
	Credentials   *credentials.Store
	Vault         *vault.Vault
	// Sessions keeps the browser sessions; Limiter counts against RateLimits; Counters
	// counts what /metrics shows.
	Sessions *browsersession.Store
	Limiter  *ratelimit.Limiter
	Counters *counters.Counters
	// OperatorSubjects are the subjects of the signed-in users who are operators in the
	// browser (the /admin pages).
	OperatorSubjects []string
	// Metrics are this process's instruments, which /metrics shows with the deployment's
	// figures; New makes its own if nil.
	Metrics *metrics.Process
	// Audit receives sign-ins, refused identities, rate-limit refusals and operators'
	// actions; nothing is audited if nil.
	Audit *audit.Trail
	// Keys derives the cookie and CSRF keys.
	Keys      *vault.KeyRing
	Slots     *slots.Catalog
	Verifier  identity.Verifier
	Operators *identity.Operators
	// Services are the delegating MCP servers that may use the API with their keys;
	// ServiceUsers verifies, per service name, the user tokens a service forwards (aud =
	// the service's resource).
	Services     *services.Catalog
	ServiceUsers map[string]identity.Verifier
	// Dev, when set, turns on the development identity: the development sign-in page,
	// /dev/token, and a loopback-only Host check on every request.
	Dev *identity.Dev
	// DevServiceKeys are the keys of development services by name, served on
	// /dev/service-key with Dev (the example server fetches the demo service's).
	DevServiceKeys map[string]string
	// SignIn is the browser sign-in with the deployment's issuer; used when Dev is nil.
	SignIn *identity.BrowserSignIn
	// Issuer is the authorization server that MCP clients sign in with, named in the
	// protected resource metadata; empty in development.
	Issuer string
	// RequiredScopes must all be in an MCP or API access token.
	RequiredScopes []string
	// MCP is the MCP endpoint, served at /mcp behind bearer authentication.
	MCP http.Handler
	// Upstream checks a new secret with its slot's API before it is stored.
	Upstream *upstream.Caller
	// Providers are the third-party OAuth providers; Keeper seals their tokens.
	Providers *thirdparty.Providers
	Keeper    *thirdparty.Keeper
	// DemoAPI, when set, is served under /demo/api (development only).
	DemoAPI http.Handler
	// RateLimits bound what one user can make urlflow do; the zero value limits nothing.
	RateLimits RateLimits
	// TrustedProxies are the reverse proxies whose X-Forwarded-For names the client address
	// that RateLimits.BadTokens counts by; with none, it is the TCP peer.
	TrustedProxies TrustedProxies
	// Asker opens the elicitations that services ask for, and signs and checks their
	// requestStates.
	Asker *ask.Asker
	// Recovery cancels flows, sends their notification again and starts new attempts,
	// for the API and the operators' pages.
	Recovery *recovery.Recovery
	// StatusWaitLimit bounds the wait of GET /api/v1/elicitations/{id}?wait=
	// (DefaultStatusWaitLimit when zero; tests shorten it).
	StatusWaitLimit time.Duration
	// EventsKeepAlive is how often an idle event stream sends a comment
	// (DefaultEventsKeepAlive when zero; tests shorten it).
	EventsKeepAlive time.Duration
	// BodyReadTimeout is the time a request has to deliver its body, on every route
	// (DefaultBodyReadTimeout when zero). It bounds reading only: answers, event streams
	// and tool calls that wait take as long as they need.
	BodyReadTimeout time.Duration
	Logger          *slog.Logger
}

// DefaultBodyReadTimeout is the time a request has to deliver its body when
// Options.BodyReadTimeout is zero.
const DefaultBodyReadTimeout = 30 * time.Second

// Server is urlflow's HTTP surface.
type Server struct {
	opts Options
	// serviceUsers are opts.ServiceUsers, each remembering the tokens it accepted
	// (identity.Remember): a service forwards its user's token with every proxy call.
	serviceUsers map[string]identity.Verifier
	echo         *echo.Echo
	// handler serves /mcp itself and the rest through echo (serveMCPOutsideEcho).
	handler  http.Handler
	sessions *sessionStore
	csrf     csrfKey
	metrics  *metrics.Process
	proxy    *proxy.Proxy
	// eventStreams counts the services' open event streams.
	eventStreams eventStreams
	// verifier is opts.Verifier remembering the tokens it accepted (identity.Remember): a
	// client sends one token with every request.
	verifier identity.Verifier
	log      *slog.Logger
}

// New returns a Server with every route in place.
func New(opts Options) *Server {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	s := &Server{
		opts:     opts,
		echo:     echo.New(),
		sessions: newSessionStore(opts.Sessions, opts.Keys.Derive("session cookie"), opts.PublicURL.Scheme == "https"),
		csrf:     csrfKey(opts.Keys.Derive("csrf")),
		log:      log,
		metrics:  newMetrics(opts.Metrics, opts.Counters, opts.Flows, log),
		proxy:    proxy.New(opts.Credentials, opts.Vault, opts.Keeper, opts.Upstream, opts.Counters, log),
	}
	s.verifier = identity.Remember(opts.Verifier)
	s.serviceUsers = make(map[string]identity.Verifier, len(opts.ServiceUsers))
	for name, v := range opts.ServiceUsers {
		s.serviceUsers[name] = identity.Remember(v)
	}
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
	e.Use(s.recoverPanics, s.logRequests, securityHeaders(s.opts.PublicURL.Scheme == "https"))
	if s.opts.Dev != nil {
		e.Use(loopbackHostOnly)
	}

	e.GET("/static/*", echo.WrapHandler(http.StripPrefix("/static/", staticFiles())))
	e.GET("/healthz", s.healthz)
	e.GET("/metrics", s.serveMetrics)
	e.GET("/readyz", s.readyz)
	e.GET("/", s.home)

	metadata := auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource:               s.resourceURL(),
		ResourceName:           "urlflow",
		BearerMethodsSupported: []string{"header"},
		AuthorizationServers:   s.authorizationServers(),
		ScopesSupported:        s.opts.RequiredScopes,
	})
	e.Any("/.well-known/oauth-protected-resource", echo.WrapHandler(metadata))
	e.Any("/.well-known/oauth-protected-resource/mcp", echo.WrapHandler(metadata))

	// One bearer check for /mcp and the API, with one count of bad tokens. /mcp takes
	// users' tokens only (an MCP session belongs to a user): no operator, and no service,
	// neither by its key nor by its client credentials token. The API takes all three.
	badTokens := identity.NewBadTokens(identity.BadTokenLimit{
		Failures: s.opts.RateLimits.BadTokens.Events, Window: s.opts.RateLimits.BadTokens.Window,
	}, s.opts.TrustedProxies.ClientAddr)
	usersOnly := identity.BearerOptions{ResourceMetadataURL: s.resourceMetadataURL(), Scopes: s.opts.RequiredScopes,
		BadTokens: badTokens, Refused: s.refusedToken, Logger: s.log}
	verifier := s.verifier
	mcp := identity.RequireBearer(verifier, usersOnly)(s.limitMCP(identity.ForSDK(s.opts.MCP)))
	s.handler = s.serveMCPOutsideEcho(mcp, bodyTimeout)
	apiOpts := usersOnly
	apiOpts.Operators = s.opts.Operators
	if s.opts.Services != nil {
		apiOpts.Services = s.opts.Services
	}
	apiBearer := echo.WrapMiddleware(identity.RequireBearer(verifier, apiOpts))

	pages := e.Group("", limitBody(formBodyLimit), crossOriginProtection)
	pages.GET("/e/:id", s.openElicitation)
	pages.POST("/e/:id/continue", s.continueElicitation)
	pages.GET("/e/:id/secret", s.secretForm)
	pages.POST("/e/:id/secret", s.submitSecret)
	pages.POST("/e/:id/decline", s.declineElicitation)
	pages.POST("/e/:id/authorize", s.authorize)
	pages.GET("/oauth/callback", s.oauthCallback)
	pages.GET("/auth/login", s.signInPage)
	pages.POST("/auth/login", s.signIn)
	pages.POST("/auth/logout", s.signOut)
	pages.GET("/auth/callback", s.signInCallback)
	pages.GET("/connections", s.connectionsPage)
	pages.GET("/admin", s.adminPage)
	pages.GET("/admin/flows/:id", s.adminFlowPage)
	pages.POST("/admin/flows/:id/:action", s.adminAct)
	pages.POST("/connections/remove", s.removeConnection)

	api := e.Group("/api/v1", apiBearer, s.limitServices, limitBody(apiBodyLimit))
	api.POST("/elicitations", s.apiCreate)
	api.GET("/elicitations", s.apiList)
	api.GET("/elicitations/summary", s.apiSummary)
	api.POST("/proxy", s.apiProxy)
	api.POST("/release", s.apiRelease)
	api.GET("/events", s.apiEvents)
	api.GET("/audit", s.apiAudit)
	api.GET("/elicitations/:id", s.apiStatus)
	api.POST("/elicitations/:id/cancel", s.apiCancel)
	api.POST("/elicitations/:id/retry", s.apiRetry)
	api.POST("/elicitations/:id/answer", s.apiAnswer)
	api.GET("/elicitations/:id/webhook", s.apiWebhook)

	if s.opts.Dev != nil {
		e.GET("/dev/token", s.devToken)
		e.GET("/dev/service-key", s.devServiceKey)
	}
	if s.opts.DemoAPI != nil {
		e.Any("/demo/api/*", echo.WrapHandler(s.opts.DemoAPI))
	}
}

// authorizationServers lists the issuers clients sign in with. The development identity
// has none: clients send the printed token as a header.
func (s *Server) authorizationServers() []string {
	if s.opts.Issuer == "" {
		return nil
	}
	return []string{s.opts.Issuer}
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
