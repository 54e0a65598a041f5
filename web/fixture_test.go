package web

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/urlflow/urlflow/ask"
	"github.com/urlflow/urlflow/demoapi"
	"github.com/urlflow/urlflow/forget"
	"github.com/urlflow/urlflow/internal/brand"
	"github.com/urlflow/urlflow/internal/issuertest"
	"github.com/urlflow/urlflow/internal/redistest"
	"github.com/urlflow/urlflow/internal/testhttp"
	"github.com/urlflow/urlflow/metrics"
	"github.com/urlflow/urlflow/oauth"
	"github.com/urlflow/urlflow/oauth/identity"
	"github.com/urlflow/urlflow/oauth/providers"
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
	"github.com/urlflow/urlflow/state/languages"
	"github.com/urlflow/urlflow/state/mcpsessions"
	"github.com/urlflow/urlflow/state/once"
	"github.com/urlflow/urlflow/state/ratelimit"
	"github.com/urlflow/urlflow/state/servicecreds"
	"github.com/urlflow/urlflow/state/serviceevents"
	"github.com/urlflow/urlflow/state/vault"
	"github.com/urlflow/urlflow/state/webhooks"
	"github.com/urlflow/urlflow/upstream"
	"github.com/urlflow/urlflow/userref"
	"github.com/urlflow/urlflow/web/admin"
	"github.com/urlflow/urlflow/web/api"
	"github.com/urlflow/urlflow/web/browser"
	"github.com/urlflow/urlflow/web/limits"
	"github.com/urlflow/urlflow/web/pages"
)

// This file is the one place that assembles urlflow's HTTP surface for the tests of this
// package, as `urlflow dev` does (cmd/urlflow/dev.go, runService): a real redis-server, the
// development identity, the demo slot checked against the demo API served by the same
// server, an operator token, and a probe in place of the MCP server. With the oidc option
// the identity is production's instead, as `urlflow serve` has it (cmd/urlflow/serve.go):
// an OpenID provider in the test process. Tests create elicitations through the store, as
// the MCP tools do, and act as the user through a browser with a cookie jar.

// demoSlot is the slot of `urlflow dev` (cmd/urlflow/demo.yaml): a demo key, checked with
// the demo API before it is stored.
const demoSlot = "demo_api_key"

// Values of the demo slot. The demo API accepts "demo_" and at least 16 letters or digits,
// except a revoked key.
const (
	validKey     = "demo_0123456789abcdef"
	invalidKey   = "not-a-demo-key-CANARY-4711"  // breaks the slot's pattern
	unverifiable = "demo_revokedCANARY4711x7Qk"  // passes the slot's rules, refused by the API
	otherKey     = "demo_fedcba9876543210CANARY" // valid, for posts that must store nothing
)

func demoSlots() []slots.Slot {
	return []slots.Slot{{
		Name:        demoSlot,
		Label:       "Demo API key",
		Description: "A key for urlflow's demo API.",
		Validation: slots.Validation{MinLength: 21, MaxLength: 128, Pattern: "demo_[A-Za-z0-9]{16,}",
			PatternHint: "It starts with demo_ followed by 16 or more letters or digits."},
		API: &upstream.API{
			BaseURL: upstream.PublicURLPlaceholder + demoapi.Prefix,
			Methods: []string{http.MethodGet, http.MethodPost},
			Inject:  upstream.Injection{Header: "Authorization", Template: "Bearer " + upstream.SecretPlaceholder},
			// A service may ask for these besides Content-Type.
			AllowResponseHeaders: []string{"X-Demo-*", "Date"},
		},
		Verify: &upstream.Verify{Method: http.MethodGet, Path: "/whoami", Status: []int{http.StatusOK}},
	}, {
		// The same key, used at an address made of the workspace the user enters with it.
		Name:       workspaceSlot,
		Label:      "Demo workspace key",
		Validation: slots.Validation{MinLength: 21, MaxLength: 128, Pattern: "demo_[A-Za-z0-9]{16,}"},
		API: &upstream.API{
			BaseURL: upstream.PublicURLPlaceholder + demoapi.Prefix + "/workspaces/{workspace}",
			Inject:  upstream.Injection{Header: "Authorization", Template: "Bearer " + upstream.SecretPlaceholder},
			Parameters: []upstream.Parameter{{Name: "workspace", Label: "Demo workspace", Description: "Its name is in your workspace's settings.",
				Pattern: "[a-z0-9-]{3,30}", PatternHint: "3 to 30 lower-case letters, digits or hyphens."}},
		},
		Verify: &upstream.Verify{Method: http.MethodGet, Path: "/whoami", Status: []int{http.StatusOK}},
	}}
}

// workspaceSlot is the demo slot whose API's address holds the user's workspace.
const workspaceSlot = "demo_workspace_key"

// fixtureOptions change the fixture where a test needs it.
type fixtureOptions struct {
	rateLimits limits.Rates
	// requiredScopes must be in every token; scopes grants them to development users by
	// name (development tokens carry none).
	requiredScopes []string
	scopes         map[string][]string
	// issuer is named in the protected resource metadata.
	issuer string
	// oidc replaces the development identity with production's: browsers sign in through
	// identity.BrowserSignIn and tokens are verified by identity.ResourceServer, both with an
	// OpenID provider started for the test (fixture.issuer), which also becomes the issuer
	// of the metadata. A user is then the issuer and their name as subject.
	oidc bool
	// introspection makes the resource server of the oidc option check opaque tokens at the
	// issuer's introspection endpoint.
	introspection bool
	// trustedProxies are the proxies whose X-Forwarded-For the server believes.
	trustedProxies TrustedProxies
	// provider is a third-party OAuth provider, configured as "acme".
	provider *provider
	// https makes the public URL https, as behind a proxy that terminates TLS; the test
	// server still speaks plain HTTP.
	https bool
	// redisQuery is added to the Redis URL: client options as go-redis parses them.
	redisQuery string
	// notifier stands in for the MCP server's completion notifier: it sees every notice
	// published on the hub.
	notifier func(context.Context, *flow.Store, flow.Notice)
	// bodyReadTimeout replaces the time a request has to deliver its body (30s).
	bodyReadTimeout time.Duration
	// brand is the deployment's look of the pages.
	brand *brand.Brand
}

// fixture is urlflow's HTTP surface, in process, on its own redis-server.
type fixture struct {
	// URL is where the server listens; also its public URL unless the options say https.
	URL           string
	server        *Server
	redis         *redistest.Server
	store         *flow.Store
	asker         *ask.Asker
	browsers      *browser.Browser
	creds         *credentials.Store
	trail         *audit.Trail
	sessions      *browsersession.Store
	counters      *counters.Counters
	vault         *vault.Vault
	dev           *identity.Dev // nil with the oidc option
	clock         *testClock
	mcp           *mcpProbe
	logs          *syncBuffer
	operatorToken string
	// readOnlyToken is an operator token that may only read.
	readOnlyToken string
	// services are the delegating services every fixture has (testServices), and
	// serviceKeys their keys by name.
	services    *services.Catalog
	serviceKeys map[string]string
	// userRefs make the user references of the services' answers.
	userRefs *userref.Refs
	// serviceVerifies counts the user tokens of services that were verified (not
	// remembered).
	serviceVerifies atomic.Int64
	// demoHook runs before the demo API answers (see whileVerifying).
	demoHook atomic.Pointer[func(*http.Request)]

	// issuer is the OpenID provider of the oidc option. It answers every authorization
	// request as its last SetAnswer says, so atIssuer holds issuerMu from SetAnswer to the
	// answer.
	issuer   *issuertest.Issuer
	issuerMu sync.Mutex
}

func newFixture(t *testing.T, opts fixtureOptions) *fixture {
	t.Helper()
	ctx := t.Context()
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})

	redis := redistest.Start(t)
	redisURL := redis.URL()
	if opts.redisQuery != "" {
		redisURL += "?" + opts.redisQuery
	}
	rdb, err := state.Connect(ctx, redisURL, state.Standalone)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	clock := &testClock{}
	count := counters.New(rdb, log)
	serviceCatalog, serviceKeys := testServices(t, opts.provider != nil)
	trail := audit.New(rdb, audit.Options{Now: clock.Now, Logger: log, Replica: "test-replica"})
	instruments := metrics.New()
	refs, err := userref.New([]byte("the user reference key of the web fixture"))
	if err != nil {
		t.Fatal(err)
	}
	streams := serviceevents.New(rdb, refs, clock.Now, log)
	deliveries := webhooks.New(rdb, serviceCatalog.WebhookWants, refs)
	held := servicecreds.New(rdb, refs)
	store := flow.NewStore(rdb, flow.StoreOptions{Now: clock.Now, Logger: log, Counters: count,
		Outboxes: []flow.Outbox{streams, deliveries, held}, Audit: trail, Metrics: instruments})
	creds := credentials.NewStore(rdb, credentials.Options{Now: clock.Now, Logger: log, Audit: trail,
		Lifecycles: []credentials.Lifecycle{streams, deliveries, held}})
	sessions := browsersession.NewStore(rdb)
	hub := flow.NewHub(rdb, log)
	if opts.notifier != nil {
		hub.OnNotice(func(ctx context.Context, n flow.Notice) { opts.notifier(ctx, store, n) })
	}
	keys, err := vault.ParseKeyRing(vault.GenerateKeyRing("k1"))
	if err != nil {
		t.Fatal(err)
	}
	vault := vault.NewVault(keys)

	srv := httptest.NewUnstartedServer(nil)
	baseURL := "http://" + srv.Listener.Addr().String()
	publicURL, err := url.Parse(baseURL)
	if err != nil {
		t.Fatal(err)
	}
	if opts.https {
		publicURL.Scheme = "https"
	}
	// The demo API is reached where the server listens, over plain HTTP.
	catalog, err := slots.NewCatalog(demoSlots(), baseURL)
	if err != nil {
		t.Fatal(err)
	}
	var configs []providers.Config
	if opts.provider != nil {
		configs = append(configs, opts.provider.config(publicURL.JoinPath("oauth", "callback").String()))
	}
	known, err := providers.New(ctx, configs, providers.Options{
		PublicURL: publicURL.String(),
		Getenv:    func(name string) (string, bool) { return "secret-of-" + name, true },
	})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{
		URL: baseURL, redis: redis, store: store, creds: creds, trail: trail, sessions: sessions, counters: count, vault: vault, clock: clock,
		mcp: &mcpProbe{}, logs: logs, operatorToken: "operator-" + rand.Text(), readOnlyToken: "reader-" + rand.Text(),
	}
	resource := publicURL.JoinPath("mcp").String()
	var (
		verifier identity.Verifier
		signIn   *identity.BrowserSignIn
		issuer   = opts.issuer
	)
	if opts.oidc {
		f.issuer = issuertest.Start(t)
		callback := publicURL.JoinPath("auth", "callback").String()
		f.issuer.AllowRedirect(callback)
		discovered, err := oauth.Discover(ctx, f.issuer.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		rsCfg := identity.ResourceServerConfig{Resource: resource}
		if opts.introspection {
			rsCfg.Introspection = &identity.ClientCredentials{ClientID: f.issuer.ClientID, ClientSecret: f.issuer.ClientSecret}
		}
		rs, err := identity.NewResourceServer(discovered, rsCfg)
		if err != nil {
			t.Fatal(err)
		}
		verifier, issuer = rs, cmp.Or(issuer, f.issuer.URL)
		signIn = identity.NewBrowserSignIn(discovered,
			identity.ClientCredentials{ClientID: f.issuer.ClientID, ClientSecret: f.issuer.ClientSecret}, callback)
		signIn.RecogniseOperators("groups", "urlflow-operators")
	} else {
		f.dev = identity.NewDev([]byte(rand.Text()), resource)
		verifier = f.dev
		if opts.scopes != nil {
			verifier = scopeGranter{f.dev, opts.scopes}
		}
	}
	f.services, f.serviceKeys, f.userRefs = serviceCatalog, serviceKeys, refs
	serviceUsers := map[string]identity.Verifier{}
	for _, svc := range f.services.List() {
		if f.dev != nil {
			serviceUsers[svc.Name] = countingVerifier{f.dev.ForAudience(svc.Resource), &f.serviceVerifies}
			continue
		}
		discovered, err := oauth.Discover(ctx, f.issuer.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		if serviceUsers[svc.Name], err = identity.NewResourceServer(discovered, identity.ResourceServerConfig{Resource: svc.Resource}); err != nil {
			t.Fatal(err)
		}
	}
	mcpSessions := mcpsessions.New(rdb, clock.Now)
	f.asker = ask.New(ask.Options{Flows: store, Credentials: creds, Keys: once.New(rdb), Vault: vault, Slots: catalog,
		TTL: 10 * time.Minute, Now: clock.Now, ToolStateKeys: keys.DeriveAll("mcp request state"),
		ServiceStateKeys: keys.DeriveAll("service request state"), Logger: log})
	operators := identity.NewOperators([]string{f.operatorToken}, []string{f.readOnlyToken})
	recoveries := recovery.New(recovery.Options{Flows: store, Sessions: mcpSessions, Hub: hub, Audit: trail, TTL: 10 * time.Minute})
	keeper := providers.NewKeeper(creds, vault, count, log)
	forgetter := forget.New(forget.Options{Redis: rdb, Flows: store, Credentials: creds, Sessions: mcpSessions,
		ServiceCredentials: held, Services: f.services.Names(), Audit: trail, Logger: log})
	f.browsers = browser.New(browser.Options{Sessions: sessions, CookieKeys: keys.DeriveAll("session cookie"), CSRFKeys: keys.DeriveAll("csrf"),
		Secure: publicURL.Scheme == "https", Dev: f.dev != nil, Flows: store, Languages: languages.New(rdb), Audit: trail, Metrics: instruments,
		ClientAddr: opts.trustedProxies.ClientAddr, Logger: log})
	rateLimits := limits.New(limits.Options{Limiter: ratelimit.NewLimiter(rdb, clock.Now), Rates: opts.rateLimits,
		Services: f.services, Counters: count, Audit: trail, Logger: log})
	f.server = New(Options{
		PublicURL: publicURL, MCP: f.mcp, Limits: rateLimits,
		Pages: pages.New(pages.Options{Browser: f.browsers, Limits: rateLimits, Flows: store, Credentials: creds, Vault: vault,
			Slots: catalog, Providers: known, Keeper: keeper, Authorizations: authorizations.New(rdb), Upstream: upstream.New(nil),
			Services: f.services, Dev: f.dev, DevServiceKeys: map[string]string{"demo": "urlflow_sk_DEMOKEYOFTHEFIXTURE", calendar: "urlflow_sk_CALENDARKEYOFTHEFIXTURE"},
			SignIn: signIn, Counters: count, Logger: log}),
		Admin: admin.New(admin.Options{Browser: f.browsers, Flows: store, Recovery: recoveries, OperatorSubjects: []string{"operator"},
			ReadOnlySubjects: []string{"viewer"}, Dev: f.dev != nil}),
		API: api.New(api.Options{PublicURL: publicURL, Flows: store, Hub: hub, Asker: f.asker, Recovery: recoveries,
			Credentials: creds, Vault: vault, Keeper: keeper, Upstream: upstream.New(nil), Slots: catalog, Providers: known,
			Services: f.services, ServiceUsers: serviceUsers, Verifier: verifier, Dev: f.dev, Issuer: issuer,
			ServiceEvents: streams, Webhooks: deliveries, ServiceCredentials: held, UserRefs: refs, Audit: trail, Counters: count,
			Forget: forgetter, EventsKeepAlive: 300 * time.Millisecond, Logger: log}),
		Identity: Identity{Verifier: verifier, Operators: operators, Services: f.services, RequiredScopes: opts.requiredScopes,
			Issuer: issuer, BadTokens: opts.rateLimits.BadTokens},
		TrustedProxies: opts.trustedProxies, Dev: f.dev != nil, DemoAPI: f.demoAPI(), BodyReadTimeout: opts.bodyReadTimeout,
		Brand: opts.brand, Flows: store, Vault: vault, Counters: count, Metrics: instruments, Audit: trail, Logger: log,
	})
	srv.Config.Handler = f.server.Handler()
	srv.Start()
	t.Cleanup(srv.Close)

	hubCtx, stopHub := context.WithCancel(context.Background())
	hubDone := make(chan struct{})
	go func() { defer close(hubDone); hub.Run(hubCtx) }()
	t.Cleanup(func() { stopHub(); <-hubDone })
	select {
	case <-hub.Connected():
	case <-time.After(10 * time.Second):
		t.Fatal("the hub did not subscribe within 10s")
	}
	return f
}

// The delegating services of every fixture: weather may ask for the demo slot and acme
// (when the fixture has it), calendar for the demo slot, and directory for the demo slot
// and may name users itself; keyholder, the demo slot and acme (when the fixture has it),
// may receive its credentials (release) and has a webhook (never sent: no sender runs).
const (
	weather   = "weather"
	calendar  = "calendar"
	directory = "directory"
	keyholder = "keyholder"
	// weatherClient is weather's OAuth client at the oidc option's issuer.
	weatherClient = "weather-client"
)

// testServices returns the fixture's services and their keys.
func testServices(t testing.TB, withProvider bool) (*services.Catalog, map[string]string) {
	keys, digests := map[string]string{}, map[string][]string{}
	configs := []services.Config{
		{Name: weather, Label: "Weather MCP", Resource: "https://weather.example/mcp", Slots: []string{demoSlot, workspaceSlot}, ClientID: weatherClient},
		{Name: calendar, Label: "Calendar MCP", Resource: "https://calendar.example/mcp", Slots: []string{demoSlot}},
		{Name: directory, Label: "Directory MCP", Resource: "https://directory.example/mcp", Slots: []string{demoSlot}, AssertUsers: true},
		{Name: keyholder, Label: "Keyholder MCP", Resource: "https://keyholder.example/mcp", Slots: []string{demoSlot}, Release: true,
			Webhook: &services.WebhookConfig{URL: "https://keyholder.example/webhook", SecretFile: "keyholder.secret"}},
	}
	opts := services.Options{Slots: []string{demoSlot, workspaceSlot}, Keys: digests, ReadFile: func(string) ([]byte, error) {
		return []byte("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"), nil
	}}
	if withProvider {
		configs[0].Providers, configs[3].Providers, opts.Providers = []string{"acme"}, []string{"acme"}, []string{"acme"}
	}
	for _, c := range configs {
		key, digest := services.NewKey()
		keys[c.Name], digests[c.Name] = key, []string{digest}
	}
	catalog, err := services.NewCatalog(configs, opts)
	if err != nil {
		t.Fatal(err)
	}
	return catalog, keys
}

// countingVerifier counts the tokens v is asked to verify.
type countingVerifier struct {
	v identity.Verifier
	n *atomic.Int64
}

func (c countingVerifier) Verify(ctx context.Context, token string) (identity.Claims, error) {
	c.n.Add(1)
	return c.v.Verify(ctx, token)
}

// userTokenFor returns the access token user name would send to service: for the
// service's resource, not urlflow's.
func (f *fixture) userTokenFor(t testing.TB, name, service string) string {
	t.Helper()
	svc, ok := f.services.Lookup(service)
	if !ok {
		t.Fatalf("no service %s", service)
	}
	if f.issuer != nil {
		return f.issuer.AccessToken(t, f.issuer.AccessClaims(name, svc.Resource))
	}
	tok, err := f.dev.ForAudience(svc.Resource).Issue(name)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// asService sends an API request as service (with its key) with userToken (none if empty)
// in the user token header and a JSON body (none if empty).
func (f *fixture) asService(t testing.TB, service, method, path, userToken, body string) answer {
	t.Helper()
	r := request{method: method, path: path, token: f.serviceKeys[service], header: http.Header{}}
	if userToken != "" {
		r.header.Set(api.UserTokenHeader, userToken)
	}
	if body != "" {
		r.body, r.contentType = strings.NewReader(body), "application/json"
	}
	return f.send(t, nil, r)
}

// demoAPI is the demo API, with the test's hook in front.
func (f *fixture) demoAPI() http.Handler {
	demo := demoapi.Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hook := f.demoHook.Load(); hook != nil {
			(*hook)(r)
		}
		demo.ServeHTTP(w, r)
	})
}

// whileVerifying makes fn run whenever the demo API is called, before it answers: while
// urlflow checks a secret with it.
func (f *fixture) whileVerifying(fn func(*http.Request)) { f.demoHook.Store(&fn) }

// waitReady waits until /readyz answers 200, as after Redis comes back: the Redis client
// probes a server that refused it about once a second.
func (f *fixture) waitReady(t testing.TB) {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(15 * time.Second)
	for {
		if got := f.send(t, nil, request{method: http.MethodGet, path: "/readyz"}); got.Status == http.StatusOK {
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatal("/readyz did not answer 200 within 15s")
		}
	}
}

// user returns the user called name: a development user, or with the oidc option the
// issuer's user whose subject is name.
func (f *fixture) user(name string) state.User {
	if f.issuer != nil {
		return state.User{Issuer: f.issuer.URL, Subject: name}
	}
	return f.dev.User(name)
}

// audited returns the events of the audit trail about development user name, in order.
func (f *fixture) audited(t testing.TB, name string) []audit.Event {
	t.Helper()
	all, err := f.trail.Read(t.Context(), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	var out []audit.Event
	for _, e := range all {
		if e.UserKey == f.user(name).Key() {
			out = append(out, e)
		}
	}
	return out
}

// token returns a bearer token for user name: a development token, or with the oidc
// option an access token of the issuer for urlflow's resource.
func (f *fixture) token(t testing.TB, name string) string {
	t.Helper()
	if f.issuer != nil {
		return f.issuer.AccessToken(t, f.issuer.AccessClaims(name, f.server.resourceURL()))
	}
	tok, err := f.dev.Issue(name)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// newFlow creates a pending elicitation of development user owner for the demo slot, as
// set_secret does. change, if given, adjusts what is created.
func (f *fixture) newFlow(t testing.TB, owner string, change ...func(*flow.NewElicitation)) *flow.Elicitation {
	t.Helper()
	n := flow.NewElicitation{
		User: f.user(owner), Kind: state.KindSecret, Target: demoSlot, Purpose: "to list your demo projects",
		Client: state.ClientInfo{Name: "probe-client", Version: "1.2.3"}, TTL: 10 * time.Minute,
	}
	for _, c := range change {
		c(&n)
	}
	e, err := f.store.Create(t.Context(), n)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// liveSession registers a live MCP session of development user owner and returns its ID.
func (f *fixture) liveSession(t testing.TB, owner string) string {
	t.Helper()
	id := "session-" + rand.Text()
	sessions := mcpsessions.New(f.redis.Client(t), f.clock.Now)
	err := sessions.Register(t.Context(), mcpsessions.Session{ID: id, User: f.user(owner), Replica: "test",
		StartedAt: f.clock.Now()}, time.Hour)
	if err == nil {
		err = sessions.Beat(t.Context(), "test", time.Hour)
	}
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// asConnection makes a new elicitation a connection to the stand-in provider.
func asConnection(n *flow.NewElicitation) {
	n.Kind, n.Target, n.Scopes = state.KindOAuth, "acme", []string{"profile"}
}

// inSession makes a new elicitation belong to MCP session id.
func inSession(id string) func(*flow.NewElicitation) {
	return func(n *flow.NewElicitation) { n.SessionID, n.Replica = id, "test" }
}

// apply applies event ev to elicitation id as actor, for tests that need a flow in a given
// state, and fails the test unless it changed the state.
func (f *fixture) apply(t testing.TB, id string, ev flow.Event, actor state.Actor) {
	t.Helper()
	change, err := f.store.Apply(t.Context(), id, ev, actor, "set up by the test")
	if err != nil || !change.Changed() {
		t.Fatalf("apply %s to %s: changed=%v, err=%v", ev, id, change.Changed(), err)
	}
}

// get returns elicitation id as stored.
func (f *fixture) get(t testing.TB, id string) *flow.Elicitation {
	t.Helper()
	e, err := f.store.Read(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// history returns the history of elicitation id.
func (f *fixture) history(t testing.TB, id string) []flow.Entry {
	t.Helper()
	h, err := f.store.History(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// snapshot is what a request that changes nothing must leave as it was. History is the
// number of events the history records.
type snapshot struct {
	State   flow.State
	History int
}

func (f *fixture) snapshot(t testing.TB, id string) snapshot {
	t.Helper()
	return snapshot{State: f.get(t, id).State, History: recorded(f.history(t, id))}
}

// recorded returns the number of events history h records: an entry may count several.
func recorded(h []flow.Entry) int {
	n := 0
	for _, e := range h {
		n += max(e.Count, 1)
	}
	return n
}

// wantState fails the test unless elicitation id is in state want.
func (f *fixture) wantState(t testing.TB, id string, want flow.State) {
	t.Helper()
	if got := f.get(t, id).State; got != want {
		t.Errorf("elicitation is %s, want %s", got, want)
	}
}

// wantUnchanged fails the test unless elicitation id is as in before: same state, no new
// event in the history.
func (f *fixture) wantUnchanged(t testing.TB, id string, before snapshot) {
	t.Helper()
	if after := f.snapshot(t, id); after != before {
		t.Errorf("the elicitation changed: %+v, want %+v; history: %s", after, before, events(f.history(t, id)))
	}
}

// lastEntry returns the newest history entry of elicitation id.
func (f *fixture) lastEntry(t testing.TB, id string) flow.Entry {
	t.Helper()
	h := f.history(t, id)
	if len(h) == 0 {
		t.Fatalf("elicitation %s has no history", id)
	}
	return h[len(h)-1]
}

// wantNoCredential fails the test if owner has a credential name.
func (f *fixture) wantNoCredential(t testing.TB, owner, name string) {
	t.Helper()
	if c, err := f.creds.Get(t.Context(), f.user(owner), name); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("%s has a credential %s (%+v, %v), want none", owner, name, c, err)
	}
}

// storedSecret returns owner's stored secret of slot name, opened.
func (f *fixture) storedSecret(t testing.TB, owner, name string) (*credentials.Credential, string) {
	t.Helper()
	c, err := f.creds.Get(t.Context(), f.user(owner), name)
	if err != nil {
		t.Fatalf("%s's credential %s: %v", owner, name, err)
	}
	secret, err := f.vault.Open(f.user(owner), name, c.Sealed)
	if err != nil {
		t.Fatalf("open %s's credential %s: %v", owner, name, err)
	}
	return c, secret.Reveal()
}

// counter returns the value of counter series ("name" or `name{label="value"}`), 0 if unset.
func (f *fixture) counter(t testing.TB, series string) int64 {
	t.Helper()
	counters, err := f.counters.All(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range counters {
		if c.Series == series {
			return c.Value
		}
	}
	return 0
}

// events lists the events of a history, for messages and comparisons.
func events(h []flow.Entry) []flow.Event {
	var evs []flow.Event
	for _, e := range h {
		evs = append(evs, e.Event)
	}
	return evs
}

// testClock is the store's clock: the real time, moved forward by the test.
type testClock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

// Advance moves the clock forward by d.
func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

// scopeGranter stands in for an issuer whose tokens carry scopes: development tokens carry
// none, so it adds the scopes of the user's name.
type scopeGranter struct {
	dev    *identity.Dev
	scopes map[string][]string
}

func (g scopeGranter) Verify(ctx context.Context, token string) (identity.Claims, error) {
	id, err := g.dev.Verify(ctx, token)
	if err == nil {
		id.Scopes = g.scopes[id.User.Subject]
	}
	return id, err
}

// mcpProbe stands in for the MCP server behind the bearer check: it records the user of
// every request that reaches it, and reads the body whole first, as the go-sdk does.
type mcpProbe struct {
	// panics makes the probe panic, as a handler with a bug would.
	panics atomic.Bool
	// streamFor, when set, makes the probe answer with an event stream that lasts this
	// long, as a tool call that waits does: an event every 50ms, then "done", or "cut" when
	// the request's context ends first.
	streamFor atomic.Int64

	mu    sync.Mutex
	users []state.User
}

func (p *mcpProbe) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p.panics.Load() {
		panic("the probe was told to panic")
	}
	if _, err := io.ReadAll(r.Body); err != nil {
		http.Error(w, "the probe could not read the body", http.StatusBadRequest)
		return
	}
	user, _ := identity.UserOf(auth.TokenInfoFromContext(r.Context()))
	p.mu.Lock()
	p.users = append(p.users, user)
	p.mu.Unlock()
	if d := time.Duration(p.streamFor.Load()); d > 0 {
		p.stream(w, r, d)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"probe":"reached"}`)
}

func (p *mcpProbe) stream(w http.ResponseWriter, r *http.Request, d time.Duration) {
	w.Header().Set("Content-Type", "text/event-stream")
	rc := http.NewResponseController(w)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	end := time.After(d)
	for {
		select {
		case <-r.Context().Done():
			io.WriteString(w, "data: cut\n\n")
			return
		case <-end:
			io.WriteString(w, "data: done\n\n")
			return
		case <-tick.C:
			io.WriteString(w, "data: waiting\n\n")
			rc.Flush()
		}
	}
}

// reached returns the users of the requests that reached the probe.
func (p *mcpProbe) reached() []state.User {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.users)
}

// syncBuffer is a bytes.Buffer that the server's logger and the test share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// answer is one HTTP answer of the server.
type answer struct {
	Status int
	Header http.Header
	Body   string
}

// Location returns the Location header.
func (a answer) Location() string { return a.Header.Get("Location") }

var (
	tagPattern   = regexp.MustCompile(`(?s)<[^>]*>`)
	spacePattern = regexp.MustCompile(`\s+`)
)

// Text returns an HTML page's text as a person reads it: tags removed, entities decoded,
// white space collapsed.
func (a answer) Text() string {
	return strings.TrimSpace(spacePattern.ReplaceAllString(html.UnescapeString(tagPattern.ReplaceAllString(a.Body, " ")), " "))
}

// field returns the value of the first input named name.
func (a answer) field(name string) (string, bool) {
	tag := regexp.MustCompile(`<input[^>]*\bname="` + regexp.QuoteMeta(name) + `"[^>]*>`).FindString(a.Body)
	if tag == "" {
		return "", false
	}
	m := regexp.MustCompile(`\bvalue="([^"]*)"`).FindStringSubmatch(tag)
	if m == nil {
		return "", true
	}
	return html.UnescapeString(m[1]), true
}

// formAction returns the action of the first form whose action contains part.
func (a answer) formAction(part string) (string, bool) {
	for _, m := range regexp.MustCompile(`<form[^>]*\baction="([^"]*)"`).FindAllStringSubmatch(a.Body, -1) {
		if action := html.UnescapeString(m[1]); strings.Contains(action, part) {
			return action, true
		}
	}
	return "", false
}

// link returns the target of the first link whose text is text, and false if none is.
func (a answer) link(text string) (string, bool) {
	for _, m := range regexp.MustCompile(`(?s)<a\b[^>]*\bhref="([^"]*)"[^>]*>(.*?)</a>`).FindAllStringSubmatch(a.Body, -1) {
		if strings.TrimSpace(html.UnescapeString(tagPattern.ReplaceAllString(m[2], ""))) == text {
			return html.UnescapeString(m[1]), true
		}
	}
	return "", false
}

// csrf returns the page's CSRF token, failing the test if it has none.
func (a answer) csrf(t testing.TB) string {
	t.Helper()
	v, ok := a.field("csrf")
	if !ok || v == "" {
		t.Fatalf("the page (status %d) has no CSRF field: %s", a.Status, a.Text())
	}
	return v
}

// want fails the test unless the answer has status and, for each of texts, contains it in
// its text (a page's words, or a JSON body).
func (a answer) want(t testing.TB, status int, texts ...string) {
	t.Helper()
	page := a.Text()
	if a.Status != status {
		t.Fatalf("status %d, want %d: %s", a.Status, status, page)
	}
	for _, text := range texts {
		if !strings.Contains(page, text) {
			t.Errorf("the answer does not say %q: %s", text, page)
		}
	}
}

// wantRefusedToken fails the test unless the answer refuses a bearer token that did not
// verify as RFC 6750 says: 401, an invalid_token challenge naming the resource metadata,
// and a JSON body that says why.
func (a answer) wantRefusedToken(t testing.TB, metadataURL string) {
	t.Helper()
	challenge := a.Header.Get("WWW-Authenticate")
	var body map[string]string
	a.decode(t, &body)
	if a.Status != http.StatusUnauthorized || !strings.HasPrefix(challenge, `Bearer error="invalid_token", error_description="`) ||
		!strings.HasSuffix(challenge, fmt.Sprintf(`, resource_metadata=%q`, metadataURL)) ||
		!strings.HasPrefix(body["error"], "the bearer token is not valid: ") {
		t.Errorf("%d %q %v, want 401 invalid_token with the resource metadata", a.Status, challenge, body)
	}
}

// decode decodes a JSON answer into v.
func (a answer) decode(t testing.TB, v any) {
	t.Helper()
	if ct := a.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("Content-Type %q, want JSON: %s", ct, a.Body)
	}
	if err := json.Unmarshal([]byte(a.Body), v); err != nil {
		t.Fatalf("decode %s: %v", a.Body, err)
	}
}

// request is one request to the server.
type request struct {
	method string
	path   string
	form   url.Values
	body   io.Reader // instead of form, sent with an unknown length
	// contentType is the body's type; a form's by default.
	contentType string
	token       string // sent as a bearer token
	header      http.Header
	host        string
}

// send sends r with client, never following a redirect.
func (f *fixture) send(t testing.TB, client *http.Client, r request) answer {
	t.Helper()
	var body io.Reader
	switch {
	case r.form != nil:
		body = strings.NewReader(r.form.Encode())
	case r.body != nil:
		body = r.body
	}
	body, sent := bufferBody(body) // for checkAPIExchange
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	target := r.path
	if !strings.HasPrefix(target, "http") {
		target = f.URL + target
	}
	req, err := http.NewRequestWithContext(ctx, r.method, target, body)
	if err != nil {
		t.Fatal(err)
	}
	if r.body != nil {
		req.ContentLength = -1
	}
	if body != nil {
		req.Header.Set("Content-Type", cmp.Or(r.contentType, "application/x-www-form-urlencoded"))
	}
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	for k, vs := range r.header {
		req.Header[k] = vs
	}
	if r.host != "" {
		req.Host = r.host
	}
	if client == nil {
		client = noRedirects(nil)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", r.method, r.path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read the answer: %v", r.method, r.path, err)
	}
	checkAPIExchange(t, req, sent, resp.StatusCode, resp.Header, data)
	return answer{Status: resp.StatusCode, Header: resp.Header, Body: string(data)}
}

func noRedirects(jar http.CookieJar) *http.Client {
	return &http.Client{Transport: testTransport, Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// testTransport carries the tests' requests: not http.DefaultTransport (package testhttp
// says why).
var testTransport = testhttp.Transport()

// api sends an API request with token (none if empty) and a JSON body (none if empty).
func (f *fixture) api(t testing.TB, method, path, token, body string) answer {
	t.Helper()
	r := request{method: method, path: path, token: token}
	if body != "" {
		r.body, r.contentType = strings.NewReader(body), "application/json"
	}
	return f.send(t, nil, r)
}

// browser is a browser without JavaScript: a cookie jar, and every redirect left to the
// test. It sends exactly what a test asks, also what a real browser would not send.
type testBrowser struct {
	t      testing.TB
	f      *fixture
	name   string
	client *http.Client
}

// browser returns a signed-out browser for development user name.
func (f *fixture) browser(t testing.TB, name string) *testBrowser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &testBrowser{t: t, f: f, name: name, client: noRedirects(jar)}
}

func (b *testBrowser) send(r request) answer {
	b.t.Helper()
	return b.f.send(b.t, b.client, r)
}

func (b *testBrowser) get(path string) answer {
	b.t.Helper()
	return b.send(request{method: http.MethodGet, path: path})
}

func (b *testBrowser) post(path string, form url.Values) answer {
	b.t.Helper()
	return b.send(request{method: http.MethodPost, path: path, form: form})
}

// sessionCookie returns the browser's session cookie value, empty if it has none.
func (b *testBrowser) sessionCookie() string {
	u, _ := url.Parse(b.f.URL)
	for _, c := range b.client.Jar.Cookies(u) {
		if c.Name == b.f.browsers.CookieName() {
			return c.Value
		}
	}
	return ""
}

// sessionID decodes a session cookie value into its session ID.
func (f *fixture) sessionID(t testing.TB, cookie string) string {
	t.Helper()
	id, ok := f.browsers.SessionOfCookie(cookie)
	if !ok {
		t.Fatalf("the session cookie %q does not decode", cookie)
	}
	return id
}

// sessionValues returns what browser session id holds in Redis, or nil when it does not
// exist.
func (f *fixture) sessionValues(t testing.TB, id string) map[string]string {
	t.Helper()
	data, err := f.sessions.Load(t.Context(), id)
	if errors.Is(err, state.ErrNotFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]string{}
	if err := json.Unmarshal(data, &values); err != nil {
		t.Fatalf("decode browser session %s: %v", id, err)
	}
	return values
}

// browserSessions returns every browser session in Redis: its ID and how long it has
// left to live.
func (f *fixture) browserSessions(t testing.TB) map[string]time.Duration {
	t.Helper()
	rdb := f.redis.Client(t)
	left := map[string]time.Duration{}
	// Sessions before sign-in: urlflow:bs:ID; signed in, in the user's slot: urlflow:{u:K}:bs:R
	// for the ID K.R (browsersession.Key).
	iter := rdb.Scan(t.Context(), 0, state.KeyPrefix+"*bs:*", 100).Iterator()
	for iter.Next(t.Context()) {
		ttl, err := rdb.TTL(t.Context(), iter.Val()).Result()
		if err != nil {
			t.Fatal(err)
		}
		rest := strings.TrimPrefix(iter.Val(), state.KeyPrefix)
		id := strings.TrimPrefix(rest, "bs:")
		if tagged, ok := strings.CutPrefix(rest, "{u:"); ok {
			user, r, _ := strings.Cut(tagged, "}:bs:")
			id = user + "." + r
		}
		if browsersession.Key(id) != iter.Val() {
			t.Fatalf("key %s does not name session %s", iter.Val(), id)
		}
		left[id] = ttl
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return left
}

// setSessionCookie puts a session cookie with value into the browser.
func (b *testBrowser) setSessionCookie(value string) {
	u, _ := url.Parse(b.f.URL)
	b.client.Jar.SetCookies(u, []*http.Cookie{{Name: b.f.browsers.CookieName(), Value: value, Path: "/"}})
}

// signIn signs in as the browser's user, going on to next, and fails the test unless that
// works: on the development page, or with the oidc option at the issuer.
func (b *testBrowser) signIn(next string) {
	b.t.Helper()
	if b.f.issuer != nil {
		callback := b.f.atIssuer(b.t, b.startSignIn(next), b.f.issuerUser(b.name))
		if done := b.get(callback); done.Status != http.StatusSeeOther || done.Location() != next {
			b.t.Fatalf("signing in as %s at the issuer answered %d to %q: %s", b.name, done.Status, done.Location(), done.Text())
		}
		return
	}
	page := b.get("/auth/login?next=" + url.QueryEscape(next))
	page.want(b.t, http.StatusOK)
	formNext, _ := page.field("next")
	done := b.post("/auth/login", url.Values{"name": {b.name}, "csrf": {page.csrf(b.t)}, "next": {formNext}})
	if done.Status != http.StatusSeeOther || done.Location() != next {
		b.t.Fatalf("signing in as %s answered %d to %q: %s", b.name, done.Status, done.Location(), done.Text())
	}
}

// startSignIn asks urlflow to sign in, going on to next (oidc option), and returns the
// authorization URL at the issuer that urlflow sends the browser to.
func (b *testBrowser) startSignIn(next string) string {
	b.t.Helper()
	got := b.get("/auth/login?next=" + url.QueryEscape(next))
	if got.Status != http.StatusFound || !strings.HasPrefix(got.Location(), b.f.issuer.AuthorizationEndpoint+"?") {
		b.t.Fatalf("/auth/login answered %d to %q, want 302 to the issuer", got.Status, got.Location())
	}
	return got.Location()
}

// issuerUser is the answer of the issuer when user name signs in and consents there, naming
// itself (RFC 9207).
func (f *fixture) issuerUser(name string) issuertest.Answer {
	user := issuertest.User{Subject: name, PreferredUsername: name}
	if name == "carol" { // carol is in the operators' group
		user.Groups = []string{"staff", "urlflow-operators"}
	}
	return issuertest.Answer{User: user, Iss: f.issuer.URL}
}

// atIssuer opens authURL at the issuer, which answers as a says, and returns the URL on
// urlflow that the issuer sends the browser back to.
func (f *fixture) atIssuer(t testing.TB, authURL string, a issuertest.Answer) string {
	t.Helper()
	f.issuerMu.Lock()
	defer f.issuerMu.Unlock()
	f.issuer.SetAnswer(a)
	back := f.issuer.Authorize(t, authURL)
	if !strings.HasPrefix(back.String(), f.URL+"/auth/callback?") {
		t.Fatalf("the issuer sent the browser to %s, want urlflow's /auth/callback", back)
	}
	return back.String()
}

// wantSignedOut fails the test unless the browser is signed out: link sends it to sign-in
// and its session, if any, names nobody.
func (b *testBrowser) wantSignedOut(link string) {
	b.t.Helper()
	if got := b.get(link); got.Status != http.StatusSeeOther || !strings.HasPrefix(got.Location(), "/auth/login?") {
		b.t.Errorf("the link answered %d to %q, want 303 to sign-in", got.Status, got.Location())
	}
	if cookie := b.sessionCookie(); cookie != "" {
		if v := b.f.sessionValues(b.t, b.f.sessionID(b.t, cookie)); v["iss"] != "" || v["sub"] != "" {
			b.t.Errorf("the browser session names %s/%s", v["iss"], v["sub"])
		}
	}
}

// open signs in and opens elicitation id, returning the page.
func (b *testBrowser) open(id string) answer {
	b.t.Helper()
	b.signIn("/e/" + id)
	return b.get("/e/" + id)
}

// csrf returns a valid CSRF token of the browser's session, from the home page.
func (b *testBrowser) csrf() string {
	b.t.Helper()
	return b.get("/").csrf(b.t)
}

// continueToForm opens elicitation id (signed in), continues on the consent page and
// returns the secret form.
func (b *testBrowser) continueToForm(id string) answer {
	b.t.Helper()
	consent := b.open(id)
	consent.want(b.t, http.StatusOK)
	next := b.post("/e/"+id+"/continue", url.Values{"csrf": {consent.csrf(b.t)}})
	if next.Status != http.StatusSeeOther || next.Location() != "/e/"+id+"/secret" {
		b.t.Fatalf("continue answered %d to %q: %s", next.Status, next.Location(), next.Text())
	}
	form := b.get(next.Location())
	form.want(b.t, http.StatusOK)
	return form
}

// submit posts value on the secret form of elicitation id with the form's CSRF token.
func (b *testBrowser) submit(id string, form answer, value string) answer {
	b.t.Helper()
	return b.post("/e/"+id+"/secret", url.Values{"csrf": {form.csrf(b.t)}, "secret": {value}})
}

// startConnect posts Continue on the connect page consent of elicitation id and returns
// the provider's authorization URL it is sent to.
func (b *testBrowser) startConnect(id string, consent answer) string {
	b.t.Helper()
	consent.want(b.t, http.StatusOK)
	got := b.post("/e/"+id+"/authorize", url.Values{"csrf": {consent.csrf(b.t)}})
	if got.Status != http.StatusSeeOther || !strings.HasPrefix(got.Location(), "http://") {
		b.t.Fatalf("authorize answered %d to %q, want 303 to the provider: %s", got.Status, got.Location(), got.Text())
	}
	return got.Location()
}

// atProvider opens the provider's authorization URL, where the user decides at once, and
// returns the URL on urlflow the provider sends the browser back to.
func (b *testBrowser) atProvider(authURL string) string {
	b.t.Helper()
	got := b.get(authURL)
	if got.Status != http.StatusSeeOther || !strings.HasPrefix(got.Location(), b.f.URL+"/oauth/callback?") {
		b.t.Fatalf("the provider answered %d to %q: %s", got.Status, got.Location(), got.Body)
	}
	return got.Location()
}

// provider is an in-process third-party OAuth provider, "Acme", with explicit endpoints
// and no discovery document: its authorization endpoint answers at once (the user
// approves, unless refusal is set), with iss when sendsIss is set; its token endpoint
// checks the client, the redirect URI and PKCE and spends each code once, and its userinfo
// endpoint names the account of the tokens it issued.
type provider struct {
	srv *httptest.Server
	// issuer is the issuer urlflow is configured with for Acme, if any. Set it before the
	// fixture starts.
	issuer string

	mu          sync.Mutex
	redirectURI string
	refusal     string            // the error the authorization endpoint answers; "" approves
	sendsIss    string            // the iss of authorization responses; "" sends none
	challenges  map[string]string // code -> PKCE challenge
	issued      []string          // access tokens
	exchanges   int
	account     string // the account's name at the userinfo endpoint; providerAccount if empty
	// revocable gives Acme a revocation endpoint (RFC 7009); set it before the fixture
	// starts. revoked are the tokens revoked there.
	revocable bool
	revoked   []string
}

// The client urlflow is at the provider, and the account it connects.
const (
	providerClientID = "urlflow"
	providerSecret   = "secret-of-ACME_SECRET" // what the fixture's Getenv gives ACME_SECRET
	providerAccount  = "alice-at-acme"
)

func newProvider(t testing.TB) *provider {
	p := &provider{challenges: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /authorize", p.authorize)
	mux.HandleFunc("POST /token", p.token)
	mux.HandleFunc("GET /userinfo", p.userinfo)
	mux.HandleFunc("POST /revoke", p.revoke)
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	return p
}

func (p *provider) config(redirectURI string) providers.Config {
	p.mu.Lock()
	p.redirectURI = redirectURI
	revocable := p.revocable
	p.mu.Unlock()
	cfg := providers.Config{
		Name: "acme", Label: "Acme", ClientID: providerClientID, ClientSecretEnv: "ACME_SECRET",
		AuthorizationURL: p.srv.URL + "/authorize", TokenURL: p.srv.URL + "/token", UserinfoURL: p.srv.URL + "/userinfo",
		Scopes: []string{"profile"}, Issuer: p.issuer,
	}
	if revocable {
		cfg.RevocationURL = p.srv.URL + "/revoke"
	}
	return cfg
}

// nameAccount makes the userinfo endpoint name the account name.
func (p *provider) nameAccount(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.account = name
}

// sendIss makes the authorization endpoint send iss with its answers ("" sends none).
func (p *provider) sendIss(iss string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sendsIss = iss
}

// refuse makes the authorization endpoint answer code ("" approves again).
func (p *provider) refuse(code string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refusal = code
}

// tokens returns the access tokens issued, and how many exchanges were asked for.
func (p *provider) tokens() ([]string, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.issued), p.exchanges
}

func (p *provider) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p.mu.Lock()
	defer p.mu.Unlock()
	if q.Get("client_id") != providerClientID || q.Get("response_type") != "code" || q.Get("redirect_uri") != p.redirectURI ||
		q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("state") == "" || q.Get("scope") != "profile" {
		http.Error(w, "bad authorization request: "+q.Encode(), http.StatusBadRequest)
		return
	}
	answer := url.Values{"state": {q.Get("state")}}
	if p.sendsIss != "" {
		answer.Set("iss", p.sendsIss)
	}
	if p.refusal != "" {
		answer.Set("error", p.refusal)
	} else {
		code := rand.Text()
		p.challenges[code] = q.Get("code_challenge")
		answer.Set("code", code)
	}
	http.Redirect(w, r, p.redirectURI+"?"+answer.Encode(), http.StatusSeeOther)
}

func (p *provider) token(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.exchanges++
	code := r.PostFormValue("code")
	challenge, known := p.challenges[code]
	delete(p.challenges, code)
	sum := sha256.Sum256([]byte(r.PostFormValue("code_verifier")))
	if !known || base64.RawURLEncoding.EncodeToString(sum[:]) != challenge || r.PostFormValue("grant_type") != "authorization_code" ||
		r.PostFormValue("client_id") != providerClientID || r.PostFormValue("client_secret") != providerSecret ||
		r.PostFormValue("redirect_uri") != p.redirectURI {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"error":"invalid_grant"}`)
		return
	}
	token := "acme-token-" + rand.Text()
	p.issued = append(p.issued, token)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"access_token": token, "token_type": "Bearer", "expires_in": 3600,
		"refresh_token": "acme-refresh-" + rand.Text(), "scope": "profile"})
}

// revoke is the revocation endpoint: it checks the client and records the token.
func (p *provider) revoke(w http.ResponseWriter, r *http.Request) {
	if r.PostFormValue("client_id") != providerClientID || r.PostFormValue("client_secret") != providerSecret || r.PostFormValue("token") == "" {
		http.Error(w, "bad revocation request", http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	p.revoked = append(p.revoked, r.PostFormValue("token"))
	p.mu.Unlock()
}

// revokedTokens returns the tokens revoked so far.
func (p *provider) revokedTokens() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.revoked)
}

func (p *provider) userinfo(w http.ResponseWriter, r *http.Request) {
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	p.mu.Lock()
	known := slices.Contains(p.issued, token)
	account := cmp.Or(p.account, providerAccount)
	p.mu.Unlock()
	if !known {
		http.Error(w, "unknown token", http.StatusUnauthorized)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]string{"sub": "acme-42", "preferred_username": account})
}
