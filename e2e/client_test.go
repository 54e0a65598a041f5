package e2e

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/urlflow/urlflow/internal/testhttp"
)

// client is a go-sdk MCP client over real HTTP that records what it receives and every
// byte it sends and receives.
type client struct {
	t       testing.TB
	session *sdk.ClientSession
	// Elicitations receives each elicitation/create the server sends.
	Elicitations chan *sdk.ElicitParams
	// Completions receives the ID of each notifications/elicitation/complete.
	Completions chan string
	// Traffic holds all HTTP bodies in both directions.
	Traffic *syncBuffer
}

// clientConfig configures a client.
type clientConfig struct {
	// Token is the bearer token.
	Token string
	// URLMode declares URL-mode elicitation; without it the client declares none.
	URLMode bool
	// Answer is the action the client answers elicitation/create with ("accept" if empty),
	// or "fail" to answer with an error.
	Answer string
	// Name is the client's self-reported name.
	Name string
	// ProtocolVersion is the version the client asks for: "2025-11-25" if empty, so that
	// the go-sdk client (which prefers 2026-07-28) speaks the 2025 era in these tests.
	ProtocolVersion string
	// ManualRetry turns off the go-sdk client's automatic multi round-trip retry, so that
	// a test sees input_required results and retries by hand.
	ManualRetry bool
}

func connect(t testing.TB, s *server, cfg clientConfig) *client {
	t.Helper()
	if cfg.Answer == "" {
		cfg.Answer = "accept"
	}
	if cfg.Name == "" {
		cfg.Name = "e2e-go-client"
	}
	c := &client{
		t:            t,
		Elicitations: make(chan *sdk.ElicitParams, 16),
		Completions:  make(chan string, 16),
		Traffic:      &syncBuffer{},
	}
	opts := &sdk.ClientOptions{
		ElicitationCompleteHandler: func(_ context.Context, req *sdk.ElicitationCompleteNotificationRequest) {
			c.Completions <- req.Params.ElicitationID
		},
	}
	if cfg.URLMode {
		opts.Capabilities = &sdk.ClientCapabilities{Elicitation: &sdk.ElicitationCapabilities{URL: &sdk.URLElicitationCapabilities{}}}
		opts.ElicitationHandler = func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			c.Elicitations <- req.Params
			if cfg.Answer == "fail" {
				return nil, errors.New("this test client fails every elicitation")
			}
			return &sdk.ElicitResult{Action: cfg.Answer}, nil
		}
	} else {
		opts.Capabilities = &sdk.ClientCapabilities{}
	}
	if cfg.ManualRetry {
		opts.MultiRoundTrip = &sdk.MultiRoundTripOptions{Disabled: true}
	}
	cl := sdk.NewClient(&sdk.Implementation{Name: cfg.Name, Version: "1.0.0"}, opts)
	transport := &sdk.StreamableClientTransport{
		Endpoint:   s.MCPURL,
		HTTPClient: &http.Client{Transport: &recorder{token: cfg.Token, traffic: c.Traffic}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if cfg.ProtocolVersion == "" {
		cfg.ProtocolVersion = "2025-11-25"
	}
	session, err := cl.Connect(ctx, transport, &sdk.ClientSessionOptions{ProtocolVersion: cfg.ProtocolVersion})
	if err != nil {
		t.Fatalf("connect to %s: %v", s.MCPURL, err)
	}
	c.session = session
	t.Cleanup(func() { session.Close() })
	return c
}

// SessionID returns the MCP session ID (empty in the 2026-07-28 era).
func (c *client) SessionID() string { return c.session.ID() }

// ProtocolVersion returns the protocol version the session negotiated.
func (c *client) ProtocolVersion() string { return c.session.InitializeResult().ProtocolVersion }

// Call calls tool name with args and returns its result and error.
func (c *client) Call(ctx context.Context, name string, args map[string]any) (*sdk.CallToolResult, error) {
	return c.session.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
}

// CallOK calls tool name and fails the test on a protocol error.
func (c *client) CallOK(name string, args map[string]any) *sdk.CallToolResult {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := c.Call(ctx, name, args)
	if err != nil {
		c.t.Fatalf("call %s: %v", name, err)
	}
	return res
}

// structured decodes the structuredContent of res into a map.
func structured(t testing.TB, res *sdk.CallToolResult) map[string]any {
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

// text returns the text content of res.
func text(res *sdk.CallToolResult) string {
	var s string
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			s += tc.Text
		}
	}
	return s
}

// nextElicitation waits for the next elicitation/create.
func (c *client) nextElicitation(timeout time.Duration) *sdk.ElicitParams {
	c.t.Helper()
	select {
	case p := <-c.Elicitations:
		return p
	case <-time.After(timeout):
		c.t.Fatalf("no elicitation/create within %s", timeout)
		return nil
	}
}

// waitCompletion waits for notifications/elicitation/complete for id.
func (c *client) waitCompletion(id string, timeout time.Duration) {
	c.t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case got := <-c.Completions:
			if got == id {
				return
			}
		case <-deadline:
			c.t.Fatalf("no completion notification for %s within %s", id, timeout)
		}
	}
}

// noCompletion asserts that no completion notification arrives within d.
func (c *client) noCompletion(d time.Duration) {
	c.t.Helper()
	select {
	case got := <-c.Completions:
		c.t.Fatalf("unexpected completion notification for %s", got)
	case <-time.After(d):
	}
}

// recorder is an http.RoundTripper that adds the bearer token and copies every request and
// response body into traffic (response bodies as they are read, so SSE streams too); with
// a nil traffic it copies nothing.
type recorder struct {
	token   string
	traffic *syncBuffer
	// base sends the requests; http.DefaultTransport if nil.
	base http.RoundTripper
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	base := cmp.Or[http.RoundTripper](r.base, http.DefaultTransport)
	if r.traffic == nil {
		return base.RoundTrip(req)
	}
	if req.Body != nil {
		body, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		r.traffic.Write(body)
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	resp, err := base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.TeeReader(resp.Body, r.traffic), resp.Body}
	return resp, nil
}

// ownTransport returns a transport of its own, like http.DefaultTransport, whose idle
// connections close when t ends: a client that keeps its connections as a browser or an
// MCP client does, rather than sharing the default transport's two idle connections per
// host with every other client of the test.
func ownTransport(t testing.TB) *http.Transport {
	tr := testhttp.Transport()
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}
