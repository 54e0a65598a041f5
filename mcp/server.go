// Package mcp is urlflow's MCP server, built on the official Go SDK: the tools, the ways a
// tool asks for a secret in each protocol era, and the notifier that tells the originating
// session when a flow has ended.
//
// One endpoint serves both eras. Requests of protocol 2026-07-28 (and server/discover) go
// to a stateless server whose tools ask through multi round-trip results with a signed
// requestState; everything else (initialize and 2025-11-25 sessions) goes to a stateful
// server whose tools ask by push (elicitation/create), by the −32042 error, or, for a
// client without URL mode, with a plain result that tells the user to open the link.
//
// The one idea to hold: an accept is consent, never success. A tool that needs a
// credential reads the credential store; it never takes a client's answer for the outcome.
package mcp

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/urlflow/urlflow/ask"
	"github.com/urlflow/urlflow/internal/every"
	"github.com/urlflow/urlflow/internal/locale"
	"github.com/urlflow/urlflow/internal/tracing"
	"github.com/urlflow/urlflow/metrics"
	"github.com/urlflow/urlflow/oauth/identity"
	"github.com/urlflow/urlflow/oauth/providers"
	"github.com/urlflow/urlflow/proxy"
	"github.com/urlflow/urlflow/recovery"
	"github.com/urlflow/urlflow/slots"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/counters"
	"github.com/urlflow/urlflow/state/credentials"
	"github.com/urlflow/urlflow/state/flow"
	"github.com/urlflow/urlflow/state/languages"
	"github.com/urlflow/urlflow/state/mcpsessions"
	"github.com/urlflow/urlflow/state/vault"
	"github.com/urlflow/urlflow/upstream"
)

// Style is how a tool asks a 2025-11-25 client with URL mode for a secret.
type Style string

// The elicitation styles.
const (
	// StylePush sends elicitation/create and waits, bounded, for the flow to end.
	StylePush Style = "push"
	// StyleError answers −32042 (URL elicitation required); the client retries after the
	// completion notification.
	StyleError Style = "error"
)

// Defaults of Options.
const (
	DefaultPushWait         = 50 * time.Second
	DefaultProgressInterval = 15 * time.Second
	// DefaultSessionIdleTimeout closes an MCP session (2025-11-25) that sends no request for
	// this long.
	DefaultSessionIdleTimeout = time.Hour
	// DefaultSessionsPerUser caps the live MCP sessions (2025-11-25) of one user on all
	// replicas. Each costs about 20 KiB while it lives; a person runs a few clients.
	DefaultSessionsPerUser = 20
)

// Options configure a Server.
type Options struct {
	// Flows keeps the elicitations; Credentials what they stored; Counters counts
	// notification attempts (nothing is counted if nil).
	Flows       *flow.Store
	Credentials *credentials.Store
	// Sessions registers the live 2025-11-25 sessions, for every replica to see.
	Sessions *mcpsessions.Registry
	Counters *counters.Counters
	// Metrics receive how long completion notifications wait; nothing is measured if nil.
	Metrics *metrics.Process
	Hub     *flow.Hub
	Vault   *vault.Vault
	Slots   *slots.Catalog
	// Catalog holds the words of results in every language (nil: locale.Default), and
	// Languages the language each user last read urlflow's pages in: results come in it,
	// else in the catalog's default (nil: always the default).
	Catalog   *locale.Catalog
	Languages *languages.Store
	// Providers are the third-party OAuth providers of connect; Keeper keeps their tokens.
	Providers *providers.Set
	Keeper    *providers.Keeper
	// Upstream makes call_api's requests.
	Upstream *upstream.Caller
	// PublicURL starts every elicitation URL.
	PublicURL *url.URL
	Style     Style
	// Replica names this process in elicitation records.
	Replica string
	// Version is urlflow's version, reported to clients.
	Version string
	// PushWait bounds a push-style wait when the call carries no progress token
	// (DefaultPushWait if zero).
	PushWait time.Duration
	// RetryWait bounds how long a multi round-trip retry (2026-07-28) without a progress
	// token waits for the flow to end before it answers input_required again
	// (DefaultRetryWait if zero).
	RetryWait time.Duration
	// A tool call that carries a progress token (push style, or a multi round-trip retry)
	// waits until the flow ends, at most until its deadline and ProgressWaitLimit
	// (DefaultProgressWaitLimit if zero), with a progress notification every
	// ProgressInterval (DefaultProgressInterval if zero).
	ProgressWaitLimit time.Duration
	ProgressInterval  time.Duration
	// StatusWaitLimit caps the waitSeconds of elicitation_status (DefaultStatusWaitLimit if
	// zero).
	StatusWaitLimit time.Duration
	// SessionIdleTimeout closes a 2025-11-25 session that sends no request for this long
	// (DefaultSessionIdleTimeout if zero).
	SessionIdleTimeout time.Duration
	// SessionsPerUser caps a user's live 2025-11-25 sessions on all replicas
	// (DefaultSessionsPerUser if zero). A new session beyond it closes the least recently
	// used session that no request waits on and no notification is owed to, or is refused.
	SessionsPerUser int
	// ReplicaHeartbeat is how long this replica's heartbeat lasts unless refreshed
	// (DefaultReplicaHeartbeat if zero): the other replicas count its sessions as ended
	// about this long after it dies or loses Redis.
	ReplicaHeartbeat time.Duration
	// Asker opens elicitations and signs and checks multi round-trip requestStates.
	Asker *ask.Asker
	// Recovery cancels flows (cancel_elicitation).
	Recovery *recovery.Recovery
	Logger   *slog.Logger
}

// DefaultRetryWait is under common client HTTP timeouts.
const DefaultRetryWait = 25 * time.Second

// DefaultStatusWaitLimit is the longest wait elicitation_status accepts: about the time
// after which many clients give up on a request.
const DefaultStatusWaitLimit = 60 * time.Second

// DefaultProgressWaitLimit caps one tool call's wait for a flow while it reports progress:
// the default deadline of a flow, so that a client that keeps a call open for as long as it
// hears progress asks the user once.
const DefaultProgressWaitLimit = 10 * time.Minute

// Server is urlflow's MCP server.
type Server struct {
	opts Options
	// legacy serves 2025-11-25 sessions; modern serves 2026-07-28 requests.
	legacy, modern               *sdk.Server
	legacyHandler, modernHandler *sdk.StreamableHTTPHandler
	sessions                     *sessionRegistry
	notifier                     *notifier
	background                   *background
	proxy                        *proxy.Proxy
	catalog                      *locale.Catalog // opts.Catalog, or the embedded one
	log                          *slog.Logger
	// draining is set once the process stops: no new 2025-11-25 session is started.
	draining atomic.Bool
}

// Drain refuses new 2025-11-25 sessions from now on (503), so that a client starts its
// next one on a replica that is not stopping; the sessions already open go on.
func (s *Server) Drain() { s.draining.Store(true) }

// New returns a Server with every tool registered. Run must be called for completion
// notifications to flow.
func New(opts Options) *Server {
	if opts.PushWait <= 0 {
		opts.PushWait = DefaultPushWait
	}
	if opts.ProgressInterval <= 0 {
		opts.ProgressInterval = DefaultProgressInterval
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	if opts.RetryWait <= 0 {
		opts.RetryWait = DefaultRetryWait
	}
	if opts.StatusWaitLimit <= 0 {
		opts.StatusWaitLimit = DefaultStatusWaitLimit
	}
	if opts.ProgressWaitLimit <= 0 {
		opts.ProgressWaitLimit = DefaultProgressWaitLimit
	}
	if opts.SessionIdleTimeout <= 0 {
		opts.SessionIdleTimeout = DefaultSessionIdleTimeout
	}
	if opts.SessionsPerUser <= 0 {
		opts.SessionsPerUser = DefaultSessionsPerUser
	}
	if opts.ReplicaHeartbeat <= 0 {
		opts.ReplicaHeartbeat = DefaultReplicaHeartbeat
	}
	s := &Server{opts: opts, log: log, catalog: cmp.Or(opts.Catalog, locale.Default()),
		proxy: proxy.New(opts.Credentials, opts.Vault, opts.Keeper, opts.Upstream, opts.Counters, log)}
	s.background = newBackground()
	s.sessions = newSessionRegistry(opts.Sessions, opts.Replica, opts.SessionsPerUser, opts.ReplicaHeartbeat,
		func() iter.Seq[*sdk.ServerSession] { return s.legacy.Sessions() }, log)
	s.notifier = newNotifier(opts.Flows, opts.Counters, opts.Metrics, s.sessions, s.background, log)
	s.sessions.ended = s.notifier.sessionEnded
	opts.Hub.OnNotice(s.notifier.onNotice)
	opts.Hub.OnNotice(s.offerNewAttempt)
	opts.Hub.OnNotice(s.sessions.closeEvicted)
	opts.Hub.OnConnect(s.notifier.recheckAll)

	s.legacy = s.newSDKServer(era2025)
	s.legacy.AddReceivingMiddleware(s.trackSessions)
	s.modern = s.newSDKServer(era2026)
	if tracing.Enabled() {
		for _, srv := range []*sdk.Server{s.legacy, s.modern} {
			srv.AddReceivingMiddleware(traceReceived)
			srv.AddSendingMiddleware(traceSent)
		}
	}
	s.legacyHandler = sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.legacy },
		&sdk.StreamableHTTPOptions{Logger: sdkLogger(log), SessionTimeout: opts.SessionIdleTimeout})
	s.modernHandler = sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.modern },
		&sdk.StreamableHTTPOptions{Logger: sdkLogger(log), Stateless: true, PropagateRequestCancellation: true})
	return s
}

// newSDKServer returns an SDK server with urlflow's tools for protocol era e.
func (s *Server) newSDKServer(e era) *sdk.Server {
	srv := sdk.NewServer(&sdk.Implementation{Name: "urlflow", Title: "urlflow", Version: s.opts.Version}, &sdk.ServerOptions{
		Instructions: instructions,
		Logger:       sdkLogger(s.log),
		Capabilities: &sdk.ServerCapabilities{Tools: &sdk.ToolCapabilities{}},
	})
	s.addTools(srv, e)
	return srv
}

const instructions = `urlflow collects secrets (API keys, tokens) from the user in their own browser, so that ` +
	`no secret passes through this conversation, and uses them for you. Call set_secret to ask for one; ` +
	`the user gets a link to open. call_api makes an HTTP request to the secret's API with the secret ` +
	`added by urlflow (it asks for the secret first if it is missing). list_connections and disconnect ` +
	`manage what is stored. Tools never return secret values. Use elicitation_status to check on a ` +
	`request and cancel_elicitation to withdraw one.`

// Handler returns the MCP endpoint for both protocol eras (streamable HTTP). It expects a
// bearer token verified by the caller (auth.RequireBearerToken).
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if modernRequest(r) {
			s.modernHandler.ServeHTTP(w, r)
			return
		}
		id := r.Header.Get("Mcp-Session-Id")
		if r.Method == http.MethodGet && id != "" {
			// The client (re)opened its stream: what could not be written before can be now.
			s.notifier.streamOpened(r.Context(), id)
		}
		if r.Method == http.MethodPost && id == "" && s.draining.Load() {
			w.Header().Set("Retry-After", "1")
			writeJSONRPCError(w, r, http.StatusServiceUnavailable, "urlflow is restarting and starts no new session here; try again.")
			return
		}
		if r.Method == http.MethodPost && id == "" {
			// A new session starts (or the SDK refuses the request): it must find a place
			// among its user's sessions first.
			s.admitSession(w, r)
			return
		}
		s.legacyHandler.ServeHTTP(w, r)
		if r.Method == http.MethodDelete && id != "" {
			s.sessions.endIfGone(r.Context(), id) // the client ended its session
		}
	})
}

// admitSession serves r, which starts a 2025-11-25 session, once the session has a place
// among its user's (see sessionRegistry.admit); otherwise it answers 429 with a JSON-RPC
// error, or 503 when Redis cannot count the sessions.
func (s *Server) admitSession(w http.ResponseWriter, r *http.Request) {
	user, ok := identity.UserOf(auth.TokenInfoFromContext(r.Context()))
	if !ok {
		s.legacyHandler.ServeHTTP(w, r) // unauthenticated: the SDK refuses it
		return
	}
	a, err := s.sessions.admit(r.Context(), user)
	switch {
	case errors.Is(err, errTooManySessions):
		s.log.WarnContext(r.Context(), "new mcp session refused: the user has too many", "user", user.Key(), "limit", s.opts.SessionsPerUser)
		writeJSONRPCError(w, r, http.StatusTooManyRequests, fmt.Sprintf("urlflow refused a new MCP session: you have %d open, "+
			"the most it allows, and each has a tool call in progress or a notification to receive. "+
			"Close a client you no longer use, or wait until one finishes or idles out.", s.opts.SessionsPerUser))
		return
	case err != nil:
		s.log.ErrorContext(r.Context(), "mcp sessions not counted", "user", user.Key(), "err", err)
		writeJSONRPCError(w, r, http.StatusServiceUnavailable, "urlflow cannot start a session just now (its storage does not answer); try again shortly.")
		return
	}
	// The session, if it started, is registered before its answer is written, and counts by
	// itself from then on: give the place back before the client can see the answer and
	// start another.
	release := sync.OnceFunc(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Second)
		defer cancel()
		if err := s.opts.Sessions.Release(ctx, a); err != nil {
			s.log.WarnContext(ctx, "mcp session admission not released; it expires", "err", err)
		}
	})
	defer release()
	s.legacyHandler.ServeHTTP(&releasingWriter{ResponseWriter: w, release: release}, r)
}

// releasingWriter calls release before anything is written to its ResponseWriter.
type releasingWriter struct {
	http.ResponseWriter
	release func()
}

func (w *releasingWriter) WriteHeader(status int) {
	w.release()
	w.ResponseWriter.WriteHeader(status)
}

func (w *releasingWriter) Write(b []byte) (int, error) {
	w.release()
	return w.ResponseWriter.Write(b)
}

func (w *releasingWriter) Flush() {
	w.release()
	http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the connection.
func (w *releasingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// writeJSONRPCError answers the JSON-RPC request r with an error of message, and status.
// The body is read to find the request's ID; when it has none, the ID is null.
func writeJSONRPCError(w http.ResponseWriter, r *http.Request, status int, message string) {
	var req struct {
		ID json.RawMessage `json:"id"`
	}
	if json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req) != nil || len(req.ID) == 0 {
		req.ID = json.RawMessage("null")
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": req.ID,
		"error": map[string]any{"code": -32000, "message": message}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body)
}

// Run keeps the session registry fresh and runs the background work (completion
// notifications among it) until ctx ends. Then it closes the sessions this process holds
// and returns once all of that work has stopped, so that the caller can close Redis. Start
// it before the hub (state.Hub.Run), whose first connection triggers a re-check.
func (s *Server) Run(ctx context.Context) {
	s.sessions.beat(ctx) // before any session of this replica is judged by it
	var wg sync.WaitGroup
	wg.Go(func() { s.sessions.run(ctx) })
	wg.Go(func() { every.Run(ctx, s.opts.ReplicaHeartbeat/3, s.notifier.settleEnded) })
	wg.Go(func() { s.background.run(ctx) })
	<-ctx.Done()
	s.sessions.closeAll(ctx)
	wg.Wait()
}

// trackSessions registers each session at initialize with its user (from the verified
// token of the initialize request) and the client's self-description, and marks a session
// busy while a request of it is served (the cap on a user's sessions closes only idle ones).
//
// It also pins the session to 2025-11-25 when the client asked initialize for a newer
// version. The stateful handler negotiates such a client down to 2025-11-25, but the SDK
// keeps the requested version and gates on it: it would refuse elicitation/create and turn
// input requests into input_required for a client that now speaks 2025-11-25.
func (s *Server) trackSessions(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		if p, ok := req.GetParams().(*sdk.InitializeParams); ok && method == "initialize" && p.ProtocolVersion >= firstModernVersion {
			s.log.InfoContext(ctx, "client asked initialize for a sessionless protocol version; serving it as 2025-11-25",
				"requested", p.ProtocolVersion)
			p.ProtocolVersion = lastLegacyVersion
		}
		if ss, ok := req.GetSession().(*sdk.ServerSession); ok && method != "initialize" && !strings.HasPrefix(method, "notifications/") {
			defer s.sessions.busy(ss.ID())()
		}
		res, err := next(ctx, method, req)
		if method != "initialize" || err != nil {
			return res, err
		}
		ss, ok := req.GetSession().(*sdk.ServerSession)
		if !ok || ss.ID() == "" {
			return res, err
		}
		user, ok := userOf(req.GetExtra())
		if !ok {
			return res, err
		}
		var client state.ClientInfo
		if p, ok := req.GetParams().(*sdk.InitializeParams); ok {
			client = clientInfo(p.ClientInfo)
		}
		s.sessions.add(ctx, ss, user, client)
		return res, err
	}
}

// sdkLogger passes on the SDK's warnings and errors only: at info level it logs every
// sessionless request twice, and urlflow logs what matters itself.
func sdkLogger(log *slog.Logger) *slog.Logger {
	return slog.New(minLevel{Handler: log.Handler(), min: slog.LevelWarn})
}

// minLevel is a slog.Handler that drops records below min.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(attrs []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(attrs), h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{h.Handler.WithGroup(name), h.min}
}
