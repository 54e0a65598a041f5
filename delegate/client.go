package delegate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/oauth2"
)

// Style is how a client of protocol 2025-11-25 that supports URL-mode elicitation is
// asked to send its user to urlflow.
type Style int

const (
	// StylePush sends elicitation/create with the URL and waits, bounded, for the user to
	// finish: the tool call returns with the credential in one go.
	StylePush Style = iota
	// StyleError answers the call with the URL-elicitation-required error (-32042); the
	// client calls the tool again once it got notifications/elicitation/complete.
	StyleError
)

// Options configure a Client. URL and Key are required.
type Options struct {
	// URL is urlflow's public URL, for example "https://urlflow.example.com".
	URL string
	// Key is the server's service key ("urlflow_sk_..."), from urlflow service-key.
	Key string
	// TokenSource, instead of Key, gives access tokens of the server's OAuth client for
	// urlflow's resource (urlflow's client_id setting) with the service's client_scopes
	// (urlflow:delegate unless configured otherwise), for example from
	// golang.org/x/oauth2/clientcredentials.
	TokenSource oauth2.TokenSource
	// Style is how a 2025-11-25 client with URL mode is asked (StylePush by default).
	Style Style
	// PushWait bounds how long a push-style call waits for its user (50 seconds when
	// zero: many clients give up on a request after about a minute).
	PushWait time.Duration
	// RetryWait bounds how long a 2026-07-28 retry waits for its user before it asks the
	// client again (25 seconds when zero).
	RetryWait time.Duration
	// A call that carries a progress token is told of progress every ProgressInterval (15
	// seconds when zero) instead, and waits until its user finishes, the elicitation's
	// deadline or ProgressWaitLimit (10 minutes when zero): a client that keeps a call open
	// while it hears progress then asks its user once.
	ProgressInterval, ProgressWaitLimit time.Duration
	// HTTPClient sends the requests to urlflow (http.DefaultClient when nil). Its timeout,
	// if any, must allow the waits above.
	HTTPClient *http.Client
	// Logger receives what the client logs (slog.Default() when nil). It never logs a
	// token or a credential.
	Logger *slog.Logger
	// RateLimitRetries is how many times a request that urlflow answers 429 (over the
	// service's rate limit) is sent again, after the wait its Retry-After asks when that is
	// at most 30 seconds (2 when zero; negative: never). A create is sent with an
	// Idempotency-Key of its own, so that sending it again creates nothing twice.
	RateLimitRetries int
	// OnCredentialEvent, when set, hears of each change of a credential your server holds
	// (stored, replaced, deleted, locked, reconnect required, released) that reaches the
	// client: on the event stream (Follow) or through WebhookHandler. It runs on the
	// goroutine that read the event; a slow one holds the stream back.
	OnCredentialEvent func(*CredentialEvent)
	// OnElicitation, when set, hears of each change of one of your server's elicitations
	// that reaches the client, with the elicitation as it stands after it: on the event
	// stream (Follow) or through WebhookHandler. It runs on the goroutine that read the
	// event; a slow one holds the stream back.
	OnElicitation func(*Elicitation)
}

// Client is a delegating server's link to urlflow. Its methods may be called
// concurrently.
type Client struct {
	opts Options
	base *url.URL
	log  *slog.Logger

	mu sync.Mutex
	// waiting maps the ID of each elicitation whose end client sessions are owed to those
	// sessions (a user's sessions share a service's running elicitation): sent once to each,
	// by whichever learns of the end first (a push-style call, the event stream or a
	// webhook).
	waiting map[string][]*mcp.ServerSession
}

// New returns a Client for opts.
func New(opts Options) (*Client, error) {
	base, err := url.Parse(opts.URL)
	if err != nil || (base.Scheme != "https" && base.Scheme != "http") || base.Host == "" {
		return nil, fmt.Errorf("delegate: URL: want urlflow's absolute http or https URL, got %q", opts.URL)
	}
	switch {
	case opts.TokenSource != nil && opts.Key != "":
		return nil, errors.New("delegate: set Key or TokenSource, not both")
	case opts.TokenSource == nil && !strings.HasPrefix(opts.Key, "urlflow_sk_"):
		return nil, errors.New(`delegate: Key: want the service key, "urlflow_sk_..." (or set TokenSource)`)
	}
	if opts.PushWait <= 0 {
		opts.PushWait = 50 * time.Second
	}
	if opts.RetryWait <= 0 {
		opts.RetryWait = 25 * time.Second
	}
	if opts.ProgressInterval <= 0 {
		opts.ProgressInterval = 15 * time.Second
	}
	if opts.ProgressWaitLimit <= 0 {
		opts.ProgressWaitLimit = 10 * time.Minute
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = http.DefaultClient
	}
	if opts.RateLimitRetries == 0 {
		opts.RateLimitRetries = 2
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Client{opts: opts, base: base, log: log, waiting: map[string][]*mcp.ServerSession{}}, nil
}

// APIError is a request that urlflow refused or could not serve.
type APIError struct {
	// Status is the HTTP status.
	Status int
	// Message is urlflow's explanation.
	Message string
	// Reason, for a refused proxy call, says what the user must do: "not_stored",
	// "locked", "reconnect", "unopenable" or "incomplete" (ask them again with Require), or "carried"
	// (the request carried the credential: never send it, urlflow adds it).
	Reason string
}

func (e *APIError) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf("urlflow: %d %s (%s)", e.Status, e.Message, e.Reason)
	}
	return fmt.Sprintf("urlflow: %d %s", e.Status, e.Message)
}

// do sends a request to urlflow's API (path under /api/v1) with the service key and, when
// not empty, the user token, and decodes a 2xx answer into out.
func (c *Client) do(ctx context.Context, method, path, userToken string, in, out any) (int, error) {
	return c.doWith(ctx, method, path, userToken, nil, in, out)
}

// doWith is do with more headers; a 429 is sent again as Options.RateLimitRetries says.
func (c *Client) doWith(ctx context.Context, method, path, userToken string, header http.Header, in, out any) (int, error) {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return 0, fmt.Errorf("delegate: encode request: %w", err)
		}
	}
	p, query, _ := strings.Cut(path, "?")
	u := c.base.JoinPath("api/v1", p)
	u.RawQuery = query
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(body))
		if err != nil {
			return 0, fmt.Errorf("delegate: %w", err)
		}
		if in == nil {
			req.Body, req.ContentLength = http.NoBody, 0
		}
		if err := c.authorize(req); err != nil {
			return 0, err
		}
		for name, values := range header {
			req.Header[name] = values
		}
		if userToken != "" {
			req.Header.Set("Urlflow-User-Token", userToken)
		}
		if in != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := c.opts.HTTPClient.Do(req)
		if err != nil {
			return 0, fmt.Errorf("delegate: %s %s: %w", method, path, err)
		}
		if resp.StatusCode == http.StatusTooManyRequests && attempt < c.opts.RateLimitRetries {
			if wait := retryAfter(resp.Header.Get("Retry-After"), attempt); wait <= maxRateLimitWait {
				io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
				resp.Body.Close()
				if err := sleep(ctx, wait); err != nil {
					return 0, fmt.Errorf("delegate: %s %s: %w", method, path, err)
				}
				continue
			}
		}
		return c.answer(resp, method, path, out)
	}
}

// maxRateLimitWait is the longest Retry-After a request waits before it is sent again.
const maxRateLimitWait = 30 * time.Second

// retryAfter is the wait a Retry-After value asks (seconds or an HTTP date), or 1, 2, 4
// seconds by attempt without one; a wait over maxRateLimitWait comes back just over it.
func retryAfter(value string, attempt int) time.Duration {
	if secs, err := strconv.Atoi(strings.TrimSpace(value)); err == nil && secs >= 0 {
		return time.Duration(min(secs, int(maxRateLimitWait/time.Second)+1)) * time.Second
	}
	if at, err := http.ParseTime(value); err == nil {
		return max(time.Until(at), 0)
	}
	return time.Second << attempt
}

// sleep waits d, or less when ctx ends (its error).
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// answer reads resp, urlflow's answer to method path: a 2xx decoded into out, or an
// *APIError.
func (c *Client) answer(resp *http.Response, method, path string, out any) (int, error) {
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return 0, fmt.Errorf("delegate: %s %s: read the answer: %w", method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		apiErr := &APIError{Status: resp.StatusCode}
		var refusal struct {
			Error  string `json:"error"`
			Reason string `json:"reason"`
		}
		if json.Unmarshal(data, &refusal) == nil && refusal.Error != "" {
			apiErr.Message, apiErr.Reason = refusal.Error, refusal.Reason
		} else {
			apiErr.Message = http.StatusText(resp.StatusCode)
		}
		return resp.StatusCode, apiErr
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("delegate: %s %s: decode the answer: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

// authorize sets the server's own authentication on req: its key, or a token of its
// OAuth client.
func (c *Client) authorize(req *http.Request) error {
	if c.opts.TokenSource == nil {
		req.Header.Set("Authorization", "Bearer "+c.opts.Key)
		return nil
	}
	tok, err := c.opts.TokenSource.Token()
	if err != nil {
		return fmt.Errorf("delegate: the server's own token: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	return nil
}

// createRequest is the body of POST /api/v1/elicitations.
type createRequest struct {
	Slot         string            `json:"slot,omitempty"`
	Provider     string            `json:"provider,omitempty"`
	Label        string            `json:"label,omitempty"`
	Offline      bool              `json:"offline,omitempty"`
	Scopes       []string          `json:"scopes,omitempty"`
	Message      string            `json:"message,omitempty"`
	Client       *clientInfo       `json:"client,omitempty"`
	Call         string            `json:"call,omitempty"`
	Metadata     map[string]string `json:"metadata,omitempty"`
	RequestState string            `json:"requestState,omitempty"`
	Action       string            `json:"action,omitempty"`
	// User (a subject, with assert_users) or UserRef names the user instead of a token.
	User    string `json:"user,omitempty"`
	UserRef string `json:"userRef,omitempty"`
}

type clientInfo struct {
	Name    string `json:"name,omitempty"`
	Title   string `json:"title,omitempty"`
	Version string `json:"version,omitempty"`
}

// requestOf is the create request of need: what names the credential and what the flow
// keeps.
func requestOf(need Need) createRequest {
	return createRequest{Slot: need.Slot, Provider: need.Provider, Label: need.Label, Offline: need.Offline, Scopes: need.Scopes,
		Message: need.Message, Metadata: need.Metadata}
}

// wait reads elicitation id until it ends or wait passes, and returns it as it then stands.
// urlflow's long poll counts whole seconds: what is left of wait under a second is waited
// here, before the last read, so that a short wait is a pause and not a burst of requests.
func (c *Client) wait(ctx context.Context, id string, wait time.Duration) (*Elicitation, error) {
	deadline := time.Now().Add(wait)
	for {
		left := time.Until(deadline)
		secs := max(0, min(60, int(left/time.Second)))
		if secs == 0 && left > 0 {
			pause := time.NewTimer(left)
			select {
			case <-ctx.Done():
				pause.Stop()
				return nil, fmt.Errorf("delegate: wait for elicitation %s: %w", id, ctx.Err())
			case <-pause.C:
			}
		}
		var e Elicitation
		if _, err := c.do(ctx, http.MethodGet, "elicitations/"+id+"?wait="+strconv.Itoa(secs), "", nil, &e); err != nil {
			return nil, err
		}
		if e.Ended() || secs == 0 {
			return &e, nil
		}
	}
}

// waitFor waits for the user of the call req to finish elicitation e: while req carries a
// progress token, with a progress notification every ProgressInterval, until e ends, its
// deadline or ProgressWaitLimit; otherwise up to bounded. It returns e as it then stands.
func (c *Client) waitFor(ctx context.Context, req *mcp.CallToolRequest, e *Elicitation, bounded time.Duration) (*Elicitation, error) {
	token := req.Params.GetProgressToken()
	if token == nil || req.Session == nil {
		return c.wait(ctx, e.ID, bounded)
	}
	until := time.Now().Add(c.opts.ProgressWaitLimit)
	if !e.ExpiresAt.IsZero() && e.ExpiresAt.Before(until) {
		until = e.ExpiresAt
	}
	for step := 1; ; step++ {
		cur, err := c.wait(ctx, e.ID, min(c.opts.ProgressInterval, time.Until(until)))
		if err != nil || cur.Ended() || !time.Now().Before(until) {
			return cur, err
		}
		err = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(step),
			Message: "Waiting for you to finish in the browser: " + e.URL})
		if err != nil {
			c.log.Info("progress notification not sent", "elicitation_id", e.ID, "err", err)
		}
	}
}

// Ended reports whether the elicitation has ended: complete, or ended without success.
func (e *Elicitation) Ended() bool {
	switch e.State {
	case "complete", "declined", "cancelled", "expired":
		return true
	}
	return false
}
