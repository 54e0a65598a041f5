package delegate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/urlflow/urlflow/delegate"
)

// weather is a delegating MCP server on the go-sdk, as the README shows one: its tool
// forecast needs the user's demo_api_key, spare needs spare_key, and each calls Require
// and then the demo API through Credential.Call. It serves streamable HTTP in both eras:
// 2026-07-28 statelessly, earlier versions with sessions.
type weather struct {
	// Client is its link to urlflow.
	Client *delegate.Client
	// URL is its MCP endpoint.
	URL string
	// Log holds what Client logged; API the requests Client sent urlflow.
	Log *syncBuffer
	API *apiRecorder

	mu     sync.Mutex
	credOf map[string]*delegate.Credential // the last credential a tool got, by the caller's Authorization
}

// startWeather starts weather with opts, whose URL and Key default to u's.
func startWeather(t testing.TB, u *urlflow, opts delegate.Options) *weather {
	t.Helper()
	if opts.URL == "" {
		opts.URL = u.URL
	}
	if opts.Key == "" && opts.TokenSource == nil {
		opts.Key = u.Key
	}
	w := &weather{Log: &syncBuffer{}, credOf: map[string]*delegate.Credential{}}
	opts.Logger = slogTo(w.Log)
	var next http.RoundTripper
	if opts.HTTPClient != nil {
		next = opts.HTTPClient.Transport
	}
	w.API = &apiRecorder{next: next}
	opts.HTTPClient = &http.Client{Transport: w.API}
	uf, err := delegate.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	w.Client = uf

	server := mcp.NewServer(&mcp.Implementation{Name: "weather", Version: "1.0.0"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "forecast", Description: "Tells the weather, with the user's demo API key."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct {
			City string `json:"city"`
		}) (*mcp.CallToolResult, any, error) {
			cred, res, err := uf.Require(ctx, req, delegate.Need{Slot: "demo_api_key", Message: "Weather needs your demo key."})
			if err != nil || res != nil {
				return res, nil, err // the user is asked first, the way this client understands
			}
			w.mu.Lock()
			if req.Extra != nil && req.Extra.Header != nil {
				w.credOf[req.Extra.Header.Get("Authorization")] = cred
			}
			w.mu.Unlock()
			resp, err := cred.Call(ctx, delegate.Request{Method: "GET", Path: "/whoami"})
			if err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("Sunny in %s (demo API: HTTP %d %s)", in.City, resp.Status, resp.Body)}},
				StructuredContent: map[string]any{"forecast": "sunny", "apiStatus": resp.Status}}, nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "spare", Description: "Needs the user's spare key."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			_, res, err := uf.Require(ctx, req, delegate.Need{Slot: "spare_key"})
			if err != nil || res != nil {
				return res, nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "spare key stored"}}}, nil, nil
		})
	srv := httptest.NewServer(bothEras(server))
	t.Cleanup(srv.Close)
	w.URL = srv.URL + "/mcp"
	return w
}

// slogTo returns a logger that writes every level to w.
func slogTo(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// credentialOf returns the last credential a tool of w got from Require in a call of the
// client with this user token: tests that run side by side each get their own user's.
func (w *weather) credentialOf(t testing.TB, token string) *delegate.Credential {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	cred := w.credOf["Bearer "+token]
	if cred == nil {
		t.Fatal("no tool got a credential for this user")
	}
	return cred
}

// follow runs Client.Follow until the test ends, and waits until its stream is open:
// urlflow's stream starts from the moment it opens.
func (w *weather) follow(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Client.Follow(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Follow returned %v, want context.Canceled", err)
		}
	})
	eventually(t, 10*time.Second, "Follow's event stream open", func() bool {
		for _, c := range w.API.calls("GET /api/v1/events") {
			if c.Status == http.StatusOK {
				return true
			}
		}
		return false
	})
}

// bothEras serves protocol 2026-07-28 statelessly and earlier versions with sessions, as
// examples/weather does.
func bothEras(server *mcp.Server) http.Handler {
	getServer := func(*http.Request) *mcp.Server { return server }
	sessions := mcp.NewStreamableHTTPHandler(getServer, nil)
	stateless := mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{Stateless: true})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		modern := r.Header.Get("Mcp-Protocol-Version") >= "2026-07-28"
		if r.Header.Get("Mcp-Protocol-Version") == "" && r.Method == http.MethodPost {
			body, _ := io.ReadAll(io.LimitReader(r.Body, 4<<20))
			r.Body = io.NopCloser(bytes.NewReader(body))
			var msg struct {
				Method string `json:"method"`
			}
			modern = json.Unmarshal(body, &msg) == nil && msg.Method == "server/discover"
		}
		if modern {
			stateless.ServeHTTP(w, r)
			return
		}
		sessions.ServeHTTP(w, r)
	})
}

// apiRecorder is the transport of a Client: it records every request to urlflow.
type apiRecorder struct {
	next http.RoundTripper // testTransport when nil
	mu   sync.Mutex
	log  []apiCall
}

// apiCall is one request of a Client to urlflow.
type apiCall struct {
	Method, Path, Query string
	// Auth is the Authorization header; UserToken says whether Urlflow-User-Token was set.
	Auth      string
	UserToken bool
	Body      string
	// Status is the answer's, 0 when none came.
	Status int
}

func (r *apiRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	call := apiCall{Method: req.Method, Path: req.URL.Path, Query: req.URL.RawQuery,
		Auth: req.Header.Get("Authorization"), UserToken: req.Header.Get("Urlflow-User-Token") != ""}
	if req.Body != nil {
		body, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		call.Body = string(body)
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	next := r.next
	if next == nil {
		next = testTransport
	}
	resp, err := next.RoundTrip(req)
	if err == nil {
		call.Status = resp.StatusCode
	}
	r.mu.Lock()
	r.log = append(r.log, call)
	r.mu.Unlock()
	return resp, err
}

// calls returns the requests so far whose "METHOD path" starts with prefix.
func (r *apiRecorder) calls(prefix string) []apiCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []apiCall
	for _, c := range r.log {
		if strings.HasPrefix(c.Method+" "+c.Path, prefix) {
			out = append(out, c)
		}
	}
	return out
}

// user is a go-sdk MCP client of weather: what it was asked and told.
type user struct {
	t       testing.TB
	session *mcp.ClientSession
	// Elicitations receives each URL the client was asked to open (elicitation/create,
	// or an input request that the go-sdk fulfils on its own).
	Elicitations chan *mcp.ElicitParams
	// Completions receives the ID of each notifications/elicitation/complete.
	Completions chan string
	// Progress receives each progress notification.
	Progress chan *mcp.ProgressNotificationParams
}

// clientOptions say what kind of client a user has.
type clientOptions struct {
	// Token is the bearer token it sends (none if empty).
	Token string
	// Version is the protocol version it asks for ("2025-11-25" if empty).
	Version string
	// URLMode declares URL-mode elicitation; FormOnly declares form mode alone; with
	// neither, the client declares no elicitation.
	URLMode, FormOnly bool
	// Answer is what it answers an elicitation ("accept" if empty).
	Answer string
	// ManualRetry turns off the go-sdk's own retry of input_required results.
	ManualRetry bool
}

// connect connects a go-sdk client of kind o to w.
func (w *weather) connect(t testing.TB, o clientOptions) *user {
	t.Helper()
	c := &user{t: t, Elicitations: make(chan *mcp.ElicitParams, 16), Completions: make(chan string, 16),
		Progress: make(chan *mcp.ProgressNotificationParams, 256)}
	if o.Answer == "" {
		o.Answer = "accept"
	}
	if o.Version == "" {
		o.Version = "2025-11-25"
	}
	opts := &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			c.Elicitations <- req.Params
			return &mcp.ElicitResult{Action: o.Answer}, nil
		},
		ElicitationCompleteHandler: func(_ context.Context, req *mcp.ElicitationCompleteNotificationRequest) {
			c.Completions <- req.Params.ElicitationID
		},
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			select {
			case c.Progress <- req.Params:
			default: // a test that counts progress reads the channel's length
			}
		},
	}
	switch {
	case o.URLMode:
		opts.Capabilities.Elicitation = &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}
	case o.FormOnly:
		opts.Capabilities.Elicitation = &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}
	}
	if o.ManualRetry {
		opts.MultiRoundTrip = &mcp.MultiRoundTripOptions{Disabled: true}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1.0.0"}, opts)
	transport := &mcp.StreamableClientTransport{Endpoint: w.URL, HTTPClient: &http.Client{Transport: bearer(o.Token)}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	session, err := client.Connect(ctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: o.Version})
	if err != nil {
		t.Fatalf("connect to weather: %v", err)
	}
	c.session = session
	t.Cleanup(func() { session.Close() })
	return c
}

// bearer is a transport that sends token as the bearer token (nothing if empty).
type bearer string

func (b bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	if b != "" {
		req = req.Clone(req.Context())
		req.Header.Set("Authorization", "Bearer "+string(b))
	}
	return testTransport.RoundTrip(req)
}

// forecast is the arguments of every forecast call.
var forecast = map[string]any{"city": "Paris"}

// call calls tool name with args.
func (c *user) call(name string, args map[string]any) (*mcp.CallToolResult, error) {
	return c.callWith(&mcp.CallToolParams{Name: name, Arguments: args})
}

func (c *user) callWith(params *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return c.session.CallTool(ctx, params)
}

// callOK calls tool name with args and fails the test on a protocol error.
func (c *user) callOK(name string, args map[string]any) *mcp.CallToolResult {
	c.t.Helper()
	res, err := c.call(name, args)
	if err != nil {
		c.t.Fatalf("call %s: %v", name, err)
	}
	return res
}

// callResult is the outcome of a call made in the background.
type callResult struct {
	res *mcp.CallToolResult
	err error
}

// callAsync makes the call params in the background.
func (c *user) callAsync(params *mcp.CallToolParams) <-chan callResult {
	out := make(chan callResult, 1)
	go func() {
		res, err := c.callWith(params)
		out <- callResult{res, err}
	}()
	return out
}

// await waits for a call made in the background and fails the test on a protocol error.
func await(t testing.TB, ch <-chan callResult, timeout time.Duration) *mcp.CallToolResult {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("the call failed: %v", r.err)
		}
		return r.res
	case <-time.After(timeout):
		t.Fatalf("the call did not return within %s", timeout)
		return nil
	}
}

// nextElicitation waits for the next URL the client is asked to open.
func (c *user) nextElicitation(timeout time.Duration) *mcp.ElicitParams {
	c.t.Helper()
	select {
	case p := <-c.Elicitations:
		return p
	case <-time.After(timeout):
		c.t.Fatalf("no elicitation within %s", timeout)
		return nil
	}
}

// waitCompletion waits for notifications/elicitation/complete for id.
func (c *user) waitCompletion(id string, timeout time.Duration) {
	c.t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case got := <-c.Completions:
			if got == id {
				return
			}
		case <-deadline:
			c.t.Fatalf("no notifications/elicitation/complete for %s within %s", id, timeout)
		}
	}
}

// noCompletion asserts that no completion notification arrives within d.
func (c *user) noCompletion(d time.Duration) {
	c.t.Helper()
	select {
	case got := <-c.Completions:
		c.t.Fatalf("an unexpected notifications/elicitation/complete for %s", got)
	case <-time.After(d):
	}
}

// text returns the text content of res.
func text(res *mcp.CallToolResult) string {
	var s strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			s.WriteString(tc.Text)
		}
	}
	return s.String()
}

// structured returns the structuredContent of res as a map.
func structured(t testing.TB, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("structuredContent is not an object: %s", b)
	}
	return m
}

// wantForecast fails the test unless res is forecast's success, which needed the demo
// API to accept the user's key through urlflow's proxy.
func wantForecast(t testing.TB, res *mcp.CallToolResult) {
	t.Helper()
	if res == nil || res.IsError || !strings.Contains(text(res), "Sunny in Paris (demo API: HTTP 200") {
		t.Fatalf("forecast did not succeed: %+v %q", res, text(res))
	}
}

// urlElicitationRequired returns the one elicitation of a -32042 error, and fails the
// test if err is anything else.
func urlElicitationRequired(t testing.TB, err error) *mcp.ElicitParams {
	t.Helper()
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != mcp.CodeURLElicitationRequired {
		t.Fatalf("want the -32042 URL elicitation required error, got %v", err)
	}
	var data struct {
		Elicitations []*mcp.ElicitParams `json:"elicitations"`
	}
	if err := json.Unmarshal(rpcErr.Data, &data); err != nil || len(data.Elicitations) != 1 {
		t.Fatalf("-32042 data %s (%v)", rpcErr.Data, err)
	}
	return data.Elicitations[0]
}
