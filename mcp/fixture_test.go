package mcp

// The fixture of the package's in-process tests: urlflow's MCP server built as `urlflow dev`
// builds it (cmd/urlflow runService), on its own real redis-server, with the demo API
// behind a slot and a third-party provider, MCP clients of the go-sdk connected through
// in-memory transports, and a "browser" that moves flows the way package web does. Every
// wiring that depends on other packages lives in this file, so that their refactors touch
// one place.

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/ask"
	"github.com/urlflow/urlflow/demoapi"
	"github.com/urlflow/urlflow/internal/redistest"
	"github.com/urlflow/urlflow/oauth/identity"
	"github.com/urlflow/urlflow/oauth/providers"
	"github.com/urlflow/urlflow/recovery"
	"github.com/urlflow/urlflow/slots"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/audit"
	"github.com/urlflow/urlflow/state/counters"
	"github.com/urlflow/urlflow/state/credentials"
	"github.com/urlflow/urlflow/state/flow"
	"github.com/urlflow/urlflow/state/languages"
	"github.com/urlflow/urlflow/state/mcpsessions"
	"github.com/urlflow/urlflow/state/once"
	"github.com/urlflow/urlflow/state/vault"
	"github.com/urlflow/urlflow/upstream"
)

// waitLimit bounds every wait of a test for something that should happen at once.
const waitLimit = 10 * time.Second

// Test values.
var (
	alice = state.User{Issuer: "https://id.example", Subject: "alice"}
	bob   = state.User{Issuer: "https://id.example", Subject: "bob"}
)

const (
	demoSlot  = "demo_api_key" // a slot with the demo API behind it
	notesSlot = "notes_token"  // a slot that only stores
	acme      = "acme"         // a third-party provider with the demo API behind it
	demoKey   = "demo_0123456789abcdefXYZ"
	otherKey  = "demo_fedcba9876543210QRS"
)

// testOptions are the Options of a fixture's server and the deadline of its flows (the
// Asker's TTL), which tests change.
type testOptions struct {
	Options
	TTL time.Duration
}

// fixture is one urlflow MCP server on its own Redis.
type fixture struct {
	t           *testing.T
	ctx         context.Context
	store       *flow.Store
	mcpSessions *mcpsessions.Registry
	creds       *credentials.Store
	trail       *audit.Trail
	hub         *flow.Hub
	vault       *vault.Vault
	keeper      *providers.Keeper
	providers   *providers.Set
	server      *Server
	opts        testOptions
	logs        *logRecorder
	redis       *redistest.Server
	sessions    atomic.Int64 // numbers the in-memory sessions
	// skew is how far the store's clock is ahead of the real one (passDeadline).
	skew *atomic.Int64
	// shutdown ends Server.Run and waits until it has returned.
	shutdown func()
}

// newFixture starts a server configured as `urlflow dev` configures it, in push style, with
// waits long enough that no test waits one out by accident; configure changes the options
// before the server starts.
func newFixture(t *testing.T, configure ...func(*testOptions)) *fixture {
	t.Helper()
	ctx := t.Context()
	api := httptest.NewServer(demoapi.Handler())
	t.Cleanup(api.Close)
	apiURL := api.URL + demoapi.Prefix

	rs := redistest.Start(t)
	// Without go-redis' retries, a stopped Redis fails a call at once rather than after
	// a second and a half of backoff.
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr, MaxRetries: -1, DialerRetryTimeout: time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	ring, err := vault.ParseKeyRing(vault.GenerateKeyRing("k1"))
	if err != nil {
		t.Fatal(err)
	}
	logs := &logRecorder{changed: make(chan struct{})}
	log := slog.New(logs.handler())
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log:\n%s", logs.text())
		}
	})
	publicURL, _ := url.Parse("https://urlflow.test")
	catalog, err := slots.NewCatalog([]slots.Slot{
		{
			Name: demoSlot, Label: "Demo API key",
			Validation: slots.Validation{MinLength: 21, MaxLength: 128, Pattern: "demo_[A-Za-z0-9]{16,}"},
			API: &upstream.API{
				BaseURL: apiURL, Methods: []string{"GET", "POST"},
				Inject:          upstream.Injection{Header: "Authorization", Template: "Bearer {secret}"},
				ResponseHeaders: []string{"Content-Type", "X-Demo-Account"},
			},
		},
		{Name: notesSlot, Label: "Notes token"},
	}, publicURL.String())
	if err != nil {
		t.Fatal(err)
	}
	known, err := providers.New(ctx, []providers.Config{{
		Name: acme, Label: "Acme", ClientID: "urlflow", ClientSecretEnv: "ACME_SECRET",
		AuthorizationURL: "https://acme.test/authorize", TokenURL: "https://acme.test/token",
		UserinfoURL: "https://acme.test/userinfo", Scopes: []string{"read"},
		API: &upstream.API{BaseURL: apiURL, Methods: []string{"GET"}},
	}}, providers.Options{
		PublicURL: publicURL.String(),
		Getenv:    func(string) (string, bool) { return "acme-client-secret", true },
	})
	if err != nil {
		t.Fatal(err)
	}

	skew := new(atomic.Int64)
	now := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	count := counters.New(rdb, log)
	trail := audit.New(rdb, audit.Options{Logger: log, Now: now})
	store := flow.NewStore(rdb, flow.StoreOptions{Logger: log, Now: now, Counters: count, Audit: trail})
	creds := credentials.NewStore(rdb, credentials.Options{Logger: log, Now: now, Audit: trail})
	hub := flow.NewHub(rdb, log)
	vault := vault.NewVault(ring)
	keeper := providers.NewKeeper(creds, vault, count, log)
	sessions := mcpsessions.New(rdb, now)
	opts := testOptions{TTL: 10 * time.Minute, Options: Options{
		Flows: store, Sessions: sessions, Credentials: creds, Counters: count, Hub: hub, Vault: vault, Slots: catalog, Providers: known, Keeper: keeper,
		Upstream: upstream.New(nil), PublicURL: publicURL, Style: StylePush,
		Replica: "test-replica", Version: "test", Logger: log,
		PushWait: 15 * time.Second, RetryWait: 15 * time.Second, Languages: languages.New(rdb),
	}}
	for _, c := range configure {
		c(&opts)
	}
	opts.Recovery = recovery.New(recovery.Options{Flows: store, Sessions: sessions, Hub: hub, Audit: trail, TTL: opts.TTL})
	opts.Asker = ask.New(ask.Options{Flows: store, Credentials: creds, Keys: once.New(rdb), Vault: vault, Slots: catalog,
		TTL: opts.TTL, ToolStateKeys: ring.DeriveAll("mcp request state"), ServiceStateKeys: ring.DeriveAll("service request state"),
		Logger: log})
	server := New(opts.Options)
	runCtx, stopRun := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() {
		server.Run(runCtx)
		close(ran)
	}()
	go hub.Run(ctx)
	select {
	case <-hub.Connected():
	case <-time.After(waitLimit):
		t.Fatal("the hub did not subscribe to Redis")
	}
	f := &fixture{t: t, ctx: ctx, store: store, mcpSessions: sessions, creds: creds, trail: trail, hub: hub, vault: vault, keeper: keeper, providers: known,
		server: server, opts: opts, logs: logs, redis: rs, skew: skew}
	f.shutdown = func() {
		stopRun()
		select {
		case <-ran:
		case <-time.After(waitLimit):
			t.Fatal("Server.Run did not return after its context ended")
		}
	}
	// Before the Redis client closes (cleanups run last in, first out), as in urlflow.
	t.Cleanup(f.shutdown)
	return f
}

// withStyle, withPushWait and the like are the options tests change.
func withStyle(s Style) func(*testOptions) { return func(o *testOptions) { o.Style = s } }

// withReplicaHeartbeat makes replica liveness lapse, and the sweep for ended sessions run,
// within a fraction of a second.
func withReplicaHeartbeat(d time.Duration) func(*testOptions) {
	return func(o *testOptions) { o.ReplicaHeartbeat = d }
}

func withPushWait(d time.Duration) func(*testOptions) { return func(o *testOptions) { o.PushWait = d } }

func withProgressInterval(d time.Duration) func(*testOptions) {
	return func(o *testOptions) { o.ProgressInterval = d }
}

func withRetryWait(d time.Duration) func(*testOptions) {
	return func(o *testOptions) { o.RetryWait = d }
}

func withProgressWaitLimit(d time.Duration) func(*testOptions) {
	return func(o *testOptions) { o.ProgressWaitLimit = d }
}

func withStatusWaitLimit(d time.Duration) func(*testOptions) {
	return func(o *testOptions) { o.StatusWaitLimit = d }
}

// serveHTTP serves the MCP endpoint over real HTTP as package web does: Server.Handler
// behind identity.RequireBearer with the development identity. It returns the endpoint
// URL and a function that issues a bearer token for the development user called name.
func (f *fixture) serveHTTP() (endpoint string, token func(name string) string) {
	f.t.Helper()
	return f.serveHTTPOf(f.server)
}

// serveHTTPOf is serveHTTP for server, which may be another replica (startReplica).
func (f *fixture) serveHTTPOf(server *Server) (endpoint string, token func(name string) string) {
	f.t.Helper()
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	f.t.Cleanup(srv.Close)
	endpoint = srv.URL + "/mcp"
	dev := identity.NewDev([]byte(strings.Repeat("d", 32)), endpoint)
	mux.Handle("/mcp", identity.RequireBearer(dev, identity.BearerOptions{
		ResourceMetadataURL: srv.URL + "/.well-known/oauth-protected-resource/mcp",
	})(identity.ForSDK(server.Handler())))
	return endpoint, func(name string) string {
		tok, err := dev.Issue(name)
		if err != nil {
			f.t.Fatal(err)
		}
		return tok
	}
}

// devUser is the user of the development tokens of serveHTTP.
func devUser(name string) state.User { return state.User{Issuer: identity.DevIssuer, Subject: name} }

// Clients

// clientConfig says what an MCP client declares and how it answers elicitation/create.
type clientConfig struct {
	// urlMode declares URL-mode elicitation; without it the client declares form mode only.
	urlMode bool
	// noElicitation declares no elicitation at all.
	noElicitation bool
	// answer answers elicitation/create; accept if nil.
	answer func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error)
	// clientInfo is what the client says about itself; test-client 1.0.0 if nil.
	clientInfo *sdk.Implementation
}

// answerWith answers every elicitation/create with action.
func answerWith(action string) func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
	return func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
		return &sdk.ElicitResult{Action: action}, nil
	}
}

// neverAnswer leaves elicitation/create unanswered until the server gives up on it.
func neverAnswer(ctx context.Context, _ *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// testClient is a go-sdk client, connected in memory or over HTTP as one user, that
// records what the server sends it.
type testClient struct {
	*sdk.ClientSession
	t    *testing.T
	info *sdk.Implementation
	opts *sdk.ClientOptions
	// user is the user of the token that requests carry (in memory).
	user *atomic.Pointer[state.User]
	// sessionID is the MCP session ID the server sees ("" in the 2026-07-28 era).
	sessionID string
	// elicitations receives every elicitation/create; completions the ID of every
	// notifications/elicitation/complete; progress every progress notification.
	elicitations chan *sdk.ElicitParams
	completions  chan string
	progress     chan *sdk.ProgressNotificationParams
}

// connect connects a client of the 2025-11-25 era as user, in a session of its own.
func (f *fixture) connect(user state.User, cfg clientConfig) *testClient {
	f.t.Helper()
	return f.connectTo(f.server.legacy, fmt.Sprintf("session-%d", f.sessions.Add(1)), "2025-11-25", user, cfg)
}

// connectModern connects a client of the 2026-07-28 era as user. It retries multi
// round-trip results by hand (testClient.retry), so that tests see every round.
func (f *fixture) connectModern(user state.User, cfg clientConfig) *testClient {
	f.t.Helper()
	return f.connectTo(f.server.modern, "", "2026-07-28", user, cfg)
}

// connectTo connects a client to srv through in-memory transports; the server sees
// sessionID and user's verified token (bearerTransport).
func (f *fixture) connectTo(srv *sdk.Server, sessionID, version string, user state.User, cfg clientConfig) *testClient {
	f.t.Helper()
	c := newTestClient(f.t, cfg)
	c.sessionID = sessionID
	c.user.Store(&user)
	serverEnd, clientEnd := sdk.NewInMemoryTransports()
	ss, err := srv.Connect(f.ctx, &bearerTransport{Transport: serverEnd, sessionID: sessionID, user: c.user}, nil)
	if err != nil {
		f.t.Fatalf("server side of the connection: %v", err)
	}
	f.t.Cleanup(func() { ss.Close() })
	c.open(clientEnd, version)
	return c
}

// connectHTTP connects a client that speaks version to the endpoint of serveHTTP with a
// bearer token. Without standaloneSSE it never opens the stream for server-initiated
// messages (a GET), as the specification allows.
func (f *fixture) connectHTTP(endpoint, token, version string, cfg clientConfig, standaloneSSE bool) *testClient {
	f.t.Helper()
	c := newTestClient(f.t, cfg)
	c.open(&sdk.StreamableClientTransport{
		Endpoint: endpoint, HTTPClient: &http.Client{Transport: bearer(token)}, DisableStandaloneSSE: !standaloneSSE,
	}, version)
	c.sessionID = c.ID()
	return c
}

// bearer is an http.RoundTripper that adds a bearer token to every request.
type bearer string

func (b bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+string(b))
	return testTransport.RoundTrip(req)
}

// newTestClient returns a client configured by cfg, not yet connected.
func newTestClient(t *testing.T, cfg clientConfig) *testClient {
	c := &testClient{
		t: t, user: new(atomic.Pointer[state.User]), info: cmp.Or(cfg.clientInfo, &sdk.Implementation{Name: "test-client", Version: "1.0.0"}),
		elicitations: make(chan *sdk.ElicitParams, 16),
		completions:  make(chan string, 16),
		progress:     make(chan *sdk.ProgressNotificationParams, 64),
	}
	answer := cfg.answer
	if answer == nil {
		answer = answerWith("accept")
	}
	c.opts = &sdk.ClientOptions{
		ElicitationCompleteHandler: func(_ context.Context, req *sdk.ElicitationCompleteNotificationRequest) {
			c.completions <- req.Params.ElicitationID
		},
		ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
			c.progress <- req.Params
		},
		MultiRoundTrip: &sdk.MultiRoundTripOptions{Disabled: true},
		Capabilities:   &sdk.ClientCapabilities{},
	}
	if !cfg.noElicitation {
		c.opts.Capabilities.Elicitation = &sdk.ElicitationCapabilities{Form: &sdk.FormElicitationCapabilities{}}
		if cfg.urlMode {
			c.opts.Capabilities.Elicitation.URL = &sdk.URLElicitationCapabilities{}
		}
		c.opts.ElicitationHandler = func(ctx context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			c.elicitations <- req.Params
			return answer(ctx, req)
		}
	}
	return c
}

// open connects c over transport, speaking version.
func (c *testClient) open(transport sdk.Transport, version string) {
	c.t.Helper()
	cl := sdk.NewClient(c.info, c.opts)
	cs, err := cl.Connect(c.t.Context(), transport, &sdk.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		c.t.Fatalf("connect a %s client: %v", version, err)
	}
	c.t.Cleanup(func() { cs.Close() })
	if got := cs.InitializeResult().ProtocolVersion; got != version {
		c.t.Fatalf("the client speaks %s, want %s", got, version)
	}
	c.ClientSession = cs
}

// actAs makes the client's next requests carry the verified token of user.
func (c *testClient) actAs(user state.User) { c.user.Store(&user) }

// bearerTransport does in memory what the streamable HTTP transport does behind
// auth.RequireBearerToken: every request the server reads carries the verified token of
// the client's user (RequestExtra.TokenInfo), and the connection has the session ID the
// server gave it.
type bearerTransport struct {
	sdk.Transport
	sessionID string
	user      *atomic.Pointer[state.User]
}

func (bt *bearerTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	conn, err := bt.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &bearerConn{Connection: conn, bt: bt}, nil
}

type bearerConn struct {
	sdk.Connection
	bt *bearerTransport
}

func (c *bearerConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if req, ok := msg.(*jsonrpc.Request); ok {
		id := identity.Claims{User: *c.bt.user.Load(), Expiry: time.Now().Add(time.Hour)}
		req.Extra = &sdk.RequestExtra{TokenInfo: identity.TokenInfo(id)}
	}
	return msg, err
}

func (c *bearerConn) SessionID() string { return c.bt.sessionID }

// call calls tool name with args and returns the result, failing the test on a protocol
// error.
func (c *testClient) call(name string, args map[string]any) *sdk.CallToolResult {
	c.t.Helper()
	res, err := c.CallTool(c.t.Context(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		c.t.Fatalf("call %s: %v", name, err)
	}
	return res
}

// callOutcome is what a call started with start ends with.
type callOutcome struct {
	res *sdk.CallToolResult
	err error
}

// start calls tool name in the background; the outcome arrives on the channel.
func (c *testClient) start(params *sdk.CallToolParams) <-chan callOutcome {
	out := make(chan callOutcome, 1)
	go func() {
		res, err := c.CallTool(c.t.Context(), params)
		out <- callOutcome{res, err}
	}()
	return out
}

// retry calls tool name again with the requestState of an input_required result and the
// client's answer to its input request.
func (c *testClient) retry(name string, args map[string]any, requestState string, action string) *sdk.CallToolResult {
	c.t.Helper()
	params := &sdk.CallToolParams{Name: name, Arguments: args, RequestState: requestState}
	if action != "" {
		params.InputResponses = sdk.InputResponseMap{inputKey: &sdk.ElicitResult{Action: action}}
	}
	res, err := c.CallTool(c.t.Context(), params)
	if err != nil {
		c.t.Fatalf("retry %s: %v", name, err)
	}
	return res
}

// receive returns the next value of ch, failing the test if none comes in time.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitLimit):
		t.Fatalf("no %s within %s", what, waitLimit)
		panic("unreachable")
	}
}

// nothingIn fails the test if ch holds a value now.
func nothingIn[T any](t *testing.T, ch <-chan T, what string) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("unexpected %s: %+v", what, v)
	default:
	}
}

// Results

// flowOf returns the structuredContent of a tool that asked for a credential.
func flowOf(t *testing.T, res *sdk.CallToolResult) flowResult {
	t.Helper()
	return structured[flowResult](t, res)
}

// viewOf returns the structuredContent of elicitation_status and cancel_elicitation.
func viewOf(t *testing.T, res *sdk.CallToolResult) flow.View {
	t.Helper()
	return structured[flow.View](t, res)
}

func structured[T any](t *testing.T, res *sdk.CallToolResult) T {
	t.Helper()
	var v T
	doc, err := json.Marshal(res.StructuredContent)
	if err == nil {
		err = json.Unmarshal(doc, &v)
	}
	if err != nil || res.StructuredContent == nil {
		t.Fatalf("structuredContent %s of %s: %v", doc, textOf(res), err)
	}
	return v
}

// textOf returns the text content of res.
func textOf(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// wholeOf returns everything a client sees of res, to check what it must never contain.
func wholeOf(res *sdk.CallToolResult) string {
	doc, _ := json.Marshal(res)
	return string(doc)
}

// idOf returns the elicitation ID in a URL that urlflow handed out.
func (f *fixture) idOf(rawURL string) string {
	f.t.Helper()
	id, ok := strings.CutPrefix(rawURL, f.opts.PublicURL.String()+"/e/")
	if !ok || !flow.ValidID(id) {
		f.t.Fatalf("%q is not an elicitation URL of this server", rawURL)
	}
	return id
}

// The browser: what package web does when the user acts on urlflow's pages.

// browserOpens records that the elicitation's own user opened its URL.
func (f *fixture) browserOpens(id string) {
	f.t.Helper()
	if _, err := f.store.Apply(f.ctx, id, flow.BrowserOpen, state.ActorUser, "opened in the browser"); err != nil {
		f.t.Fatalf("open %s in the browser: %v", id, err)
	}
}

// browserStores submits secret on the page of elicitation id: sealed for its user and slot,
// stored in the same step that completes the flow (web's submitSecret and complete).
func (f *fixture) browserStores(id, secret string) flow.Change {
	f.t.Helper()
	e := f.get(id)
	sealed, err := f.vault.Seal(e.User, e.CredentialName(), state.NewSecret(secret))
	if err != nil {
		f.t.Fatal(err)
	}
	cred := &credentials.Credential{Name: e.CredentialName(), Kind: state.KindSecret, ElicitationID: id,
		StoredAt: f.store.Now().UTC(), Sealed: sealed}
	change, err := f.store.Apply(f.ctx, id, flow.Verified, state.ActorUser, "secret received and validated",
		flow.WithCredential(cred))
	if err != nil && !errors.Is(err, flow.ErrImpossible) {
		f.t.Fatalf("store the secret of %s: %v", id, err)
	}
	return change
}

// browserCompletes opens elicitation id and stores secret.
func (f *fixture) browserCompletes(id, secret string) {
	f.t.Helper()
	f.browserOpens(id)
	if change := f.browserStores(id, secret); change.To != flow.Complete {
		f.t.Fatalf("the flow %s did not complete: %s", id, change.To)
	}
}

// browserConnects completes connection id to provider name as the OAuth callback does,
// with the account and the access token the provider gave.
func (f *fixture) browserConnects(id, name, account, accessToken string) {
	f.t.Helper()
	f.browserOpens(id)
	p, _ := f.providers.Lookup(name)
	e := f.get(id)
	tok := &providers.Token{AccessToken: accessToken, TokenType: "Bearer", Scopes: e.Scopes,
		Account: providers.Account{ID: account, Name: account}}
	cred, err := f.keeper.Seal(e.User, credentials.Name(e.Service, p.Name), id, tok, f.store.Now().UTC())
	if err != nil {
		f.t.Fatal(err)
	}
	change, err := f.store.Apply(f.ctx, id, flow.Verified, state.ActorUser, "connected", flow.WithCredential(cred))
	if err != nil || change.To != flow.Complete {
		f.t.Fatalf("connect %s: %s %v", id, change.To, err)
	}
}

// passDeadline moves the store's clock past the deadline of elicitation id and lets the
// sweeper run, as if the time had passed (for the flows created before it too).
func (f *fixture) passDeadline(id string) {
	f.t.Helper()
	e := f.get(id)
	f.skew.Store(int64(time.Until(e.ExpiresAt) + time.Second))
	if n, err := f.store.Sweep(f.ctx); err != nil || n == 0 {
		f.t.Fatalf("sweep: %d expired, %v", n, err)
	}
}

// The record

// create starts a flow for user's target directly in the store, outside any tool call.
func (f *fixture) create(user state.User, kind state.Kind, target string) *flow.Elicitation {
	f.t.Helper()
	e, err := f.store.Create(f.ctx, flow.NewElicitation{User: user, Kind: kind, Target: target, Purpose: "a test", TTL: f.opts.TTL})
	if err != nil {
		f.t.Fatal(err)
	}
	return e
}

// apply records events on elicitation id, failing the test if one cannot happen.
func (f *fixture) apply(id string, events ...flow.Event) {
	f.t.Helper()
	for _, ev := range events {
		if _, err := f.store.Apply(f.ctx, id, ev, state.ActorSystem, "a test"); err != nil {
			f.t.Fatalf("%s on %s: %v", ev, id, err)
		}
	}
}

func (f *fixture) get(id string) *flow.Elicitation {
	f.t.Helper()
	e, err := f.store.Read(f.ctx, id)
	if err != nil {
		f.t.Fatalf("get %s: %v", id, err)
	}
	return e
}

func (f *fixture) history(id string) []flow.Entry {
	f.t.Helper()
	h, err := f.store.History(f.ctx, id)
	if err != nil {
		f.t.Fatalf("history of %s: %v", id, err)
	}
	return h
}

// secretOf returns user's stored secret name in clear, or "" if none is stored.
func (f *fixture) secretOf(user state.User, name string) string {
	f.t.Helper()
	c, err := f.creds.Get(f.ctx, user, name)
	if errors.Is(err, state.ErrNotFound) {
		return ""
	}
	if err != nil {
		f.t.Fatal(err)
	}
	secret, err := f.vault.Open(user, name, c.Sealed)
	if err != nil {
		f.t.Fatal(err)
	}
	return secret.Reveal()
}

// waitFor waits until elicitation id satisfies cond, woken by its change notices.
func (f *fixture) waitFor(id, what string, cond func(*flow.Elicitation) bool) *flow.Elicitation {
	f.t.Helper()
	wake, stop := f.hub.Wait(id)
	defer stop()
	deadline := time.After(waitLimit)
	for {
		e := f.get(id)
		if cond(e) {
			return e
		}
		select {
		case <-wake:
		case <-deadline:
			f.t.Fatalf("elicitation %s: not %s within %s (state %s, delivery %+v)", id, what, waitLimit, e.State, e.Delivery)
		}
	}
}

// waitForState waits until elicitation id is in state want.
func (f *fixture) waitForState(id string, want flow.State) *flow.Elicitation {
	f.t.Helper()
	return f.waitFor(id, string(want), func(e *flow.Elicitation) bool { return e.State == want })
}

// eventually waits until cond holds, for what has no event to wait on.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not %s within %s", what, waitLimit)
		}
		time.Sleep(10 * time.Millisecond) // polling: there is no event for this
	}
}

// hasEntry reports whether history holds event ev by actor from one state to another.
func hasEntry(history []flow.Entry, ev flow.Event, actor state.Actor, from, to flow.State) bool {
	for _, h := range history {
		if h.Event == ev && h.Actor == actor && h.From == from && h.To == to {
			return true
		}
	}
	return false
}

// Logs

// logRecorder keeps the server's log records, so that a test can wait for one that is the
// only trace of what it checks (a withheld notification), and print them when it fails.
type logRecorder struct {
	mu      sync.Mutex
	records []logRecord
	changed chan struct{} // closed and replaced on every record
}

type logRecord struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func (l *logRecorder) handler() slog.Handler { return &recordingHandler{rec: l} }

// seen returns a channel that receives the first record with message msg and attribute
// key = value, once it is logged.
func (l *logRecorder) seen(msg, key, value string) <-chan logRecord {
	found := make(chan logRecord, 1)
	go func() {
		seen := 0
		for {
			l.mu.Lock()
			changed, records := l.changed, l.records[seen:]
			seen = len(l.records)
			l.mu.Unlock()
			for _, r := range records {
				if r.msg == msg && r.attrs[key] == value {
					found <- r
					return
				}
			}
			select {
			case <-changed:
			case <-time.After(waitLimit):
				return
			}
		}
	}()
	return found
}

func (l *logRecorder) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, r := range l.records {
		fmt.Fprintf(&b, "%s %s %v\n", r.level, r.msg, r.attrs)
	}
	return b.String()
}

type recordingHandler struct {
	rec   *logRecorder
	attrs []slog.Attr
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	attrs := map[string]string{}
	for _, a := range h.attrs {
		attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		attrs[a.Key] = a.Value.String()
		return true
	})
	h.rec.mu.Lock()
	defer h.rec.mu.Unlock()
	h.rec.records = append(h.rec.records, logRecord{level: r.Level, msg: r.Message, attrs: attrs})
	close(h.rec.changed)
	h.rec.changed = make(chan struct{})
	return nil
}

func (h *recordingHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &recordingHandler{rec: h.rec, attrs: append(append([]slog.Attr(nil), h.attrs...), attrs...)}
}

func (h *recordingHandler) WithGroup(string) slog.Handler { return h }

// markSessionStream sends a progress notification with the token "marker" on the own
// stream (GET) of c's session, and waits until c has received it: what the server wrote on
// that stream before has reached c by then.
func (c *testClient) markSessionStream(f *fixture) {
	c.t.Helper()
	var ss *sdk.ServerSession
	for s := range f.server.legacy.Sessions() {
		if s.ID() == c.sessionID {
			ss = s
		}
	}
	if ss == nil {
		c.t.Fatalf("no server session %s", c.sessionID)
	}
	eventually(c.t, "the marker written on the session's stream", func() bool {
		return ss.NotifyProgress(c.t.Context(), &sdk.ProgressNotificationParams{ProgressToken: "marker", Progress: 1}) == nil
	})
	for {
		if p := receive(c.t, c.progress, "the marker"); p.ProgressToken == "marker" {
			return
		}
	}
}
