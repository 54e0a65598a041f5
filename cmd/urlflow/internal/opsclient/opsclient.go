// Package opsclient is the client of urlflow's API that the commands for operators
// (urlflow flows ...) use: it lists, reads, cancels and retries elicitations with an
// operator token, and turns every refusal into an error that says what the server said.
// It lives beside its only user, cmd/urlflow: it reads the API's answers into the types of
// state/flow, which the low-level packages under the module's internal/ must not import.
package opsclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/urlflow/urlflow/forget"

	"github.com/urlflow/urlflow/state/flow"
)

// Elicitation is one elicitation with its history, as the API shows it to operators.
type Elicitation = flow.Listed

// Listed is one elicitation of a listing.
type Listed = flow.Listed

// Summary counts the elicitations that need attention.
type Summary = flow.Summary

// RunningStates are the running states, in the order of the state table.
var RunningStates = func() []flow.Stuck {
	var out []flow.Stuck
	for _, st := range flow.States {
		if !st.Terminal() {
			out = append(out, flow.Stuck(st))
		}
	}
	return out
}()

// maxPages bounds a listing (at 500 a page, a million elicitations).
const maxPages = 2000

// Client sends requests to one urlflow with one token.
type Client struct {
	server string
	// shown is the server's URL as errors name it, without a password it may hold.
	shown string
	token string
	http  *http.Client
}

// requestTimeout bounds a request but an audit export, which takes as long as it takes.
const requestTimeout = time.Minute

// New returns a client of the urlflow whose public URL is server, with token, or an error
// that says what a URL urlflow can be reached at looks like. The error does not quote
// server, which may hold a password.
func New(server, token string) (*Client, error) {
	server = strings.TrimRight(server, "/")
	u, err := url.Parse(server)
	switch {
	case err != nil || u.Host == "" && (u.Scheme == "" || u.Opaque != ""):
		return nil, errors.New("the server is not a URL: add http:// or https://, as in --server https://urlflow.example")
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("the server's URL starts with %s://: want http:// or https://, as in --server https://urlflow.example", u.Scheme)
	case u.Host == "":
		return nil, errors.New("the server's URL names no host, as in --server https://urlflow.example")
	}
	return &Client{server: server, shown: u.Redacted(), token: token, http: &http.Client{}}, nil
}

// List returns every elicitation that the filters of query select, oldest first, reading
// page after page.
func (c *Client) List(ctx context.Context, query url.Values) ([]Listed, error) {
	query.Set("limit", "500")
	all := []Listed{}
	for range maxPages {
		var page flow.Listing
		if err := c.do(ctx, http.MethodGet, "/api/v1/elicitations?"+query.Encode(), nil, &page); err != nil {
			return nil, err
		}
		all = append(all, page.Elicitations...)
		if page.Next == "" {
			return all, nil
		}
		query.Set("cursor", page.Next)
	}
	return nil, fmt.Errorf("the listing did not end after %d pages", maxPages)
}

// Summary returns the counts of running, owed and stuck elicitations.
func (c *Client) Summary(ctx context.Context) (*Summary, error) {
	var s Summary
	return &s, c.do(ctx, http.MethodGet, "/api/v1/elicitations/summary", nil, &s)
}

// Get returns elicitation id with its history.
func (c *Client) Get(ctx context.Context, id string) (*Elicitation, error) {
	var e Elicitation
	return &e, c.do(ctx, http.MethodGet, "/api/v1/elicitations/"+url.PathEscape(id), nil, &e)
}

// Cancel ends running elicitation id as cancelled, for reason.
func (c *Client) Cancel(ctx context.Context, id, reason string) (*Elicitation, error) {
	var e Elicitation
	return &e, c.do(ctx, http.MethodPost, "/api/v1/elicitations/"+url.PathEscape(id)+"/cancel", map[string]any{"reason": reason}, &e)
}

// Retry sends the completion notification of ended elicitation id again or, with
// newAttempt, starts a new attempt of it, for reason; it returns the elicitation, or the
// new attempt.
func (c *Client) Retry(ctx context.Context, id string, newAttempt bool, reason string) (*Elicitation, error) {
	var e Elicitation
	return &e, c.do(ctx, http.MethodPost, "/api/v1/elicitations/"+url.PathEscape(id)+"/retry", map[string]any{"reason": reason, "new": newAttempt}, &e)
}

// ForgetReport says what forgetting a user erased.
type ForgetReport = forget.Report

// Forget forgets the user of issuer and subject, for reason: urlflow erases what it keeps
// about them (package forget).
func (c *Client) Forget(ctx context.Context, issuer, subject, reason string) (*ForgetReport, error) {
	var r ForgetReport
	return &r, c.do(ctx, http.MethodPost, "/api/v1/users/forget", map[string]any{"issuer": issuer, "subject": subject, "reason": reason}, &r)
}

// ExportAudit writes to w the audit trail from since to until (RFC 3339 times, or
// durations before now; until may be empty), as the server sends it: JSON Lines.
func (c *Client) ExportAudit(ctx context.Context, since, until string, w io.Writer) error {
	q := url.Values{"since": {since}}
	if until != "" {
		q.Set("until", until)
	}
	resp, err := c.send(ctx, http.MethodGet, "/api/v1/audit?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(w, resp.Body); err != nil {
		return fmt.Errorf("read the audit trail from %s: %w", c.shown, err)
	}
	return nil
}

// Error is a refusal of the server.
type Error struct {
	Status  int
	Message string
	// State is the elicitation's state when the refusal showed it (a conflict does).
	State flow.State
}

func (e *Error) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Status, http.StatusText(e.Status), e.Message)
}

// do sends a request with body (JSON, or none if nil) and decodes the answer into out.
func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	resp, err := c.send(ctx, method, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("read the answer of %s: %w", c.shown, err)
	}
	if err := json.Unmarshal(answer, out); err != nil {
		return fmt.Errorf("the answer of %s is not what urlflow answers: %w", c.shown, err)
	}
	return nil
}

// send sends a request with body (JSON, or none if nil) and returns the answer when it is
// a success; a refusal is an *Error.
func (c *Client) send(ctx context.Context, method, path string, body any) (*http.Response, error) {
	if c.token == "" {
		return nil, errors.New("no token: set URLFLOW_TOKEN to an operator token")
	}
	var reader io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		reader = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.server+path, reader)
	if err != nil {
		return nil, fmt.Errorf("%s is not a URL urlflow can be reached at", c.shown) // err would quote it whole
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot reach urlflow at %s: %w", c.shown, errors.Unwrap(err))
	}
	if resp.StatusCode < 300 {
		return resp, nil
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var refusal struct {
		Error      string     `json:"error"`
		Message    string     `json:"message"`
		State      flow.State `json:"state"`
		Candidates []string   `json:"candidates"`
	}
	json.Unmarshal(answer, &refusal)
	msg := refusal.Error
	if len(refusal.Candidates) > 0 {
		msg += " (" + strings.Join(refusal.Candidates, ", ") + ")"
	}
	switch {
	case msg == "" && refusal.Message != "":
		msg = refusal.Message
	case msg == "" && resp.StatusCode == http.StatusNotFound && refusal.State == flow.Unknown:
		msg = "no such elicitation"
	case msg == "":
		msg = strings.TrimSpace(string(answer))
	}
	return nil, &Error{Status: resp.StatusCode, Message: msg, State: refusal.State}
}
