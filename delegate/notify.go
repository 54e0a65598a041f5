package delegate

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A client of protocol 2025-11-25 learns that its user finished from
// notifications/elicitation/complete on its own session with this server. Require records
// which session is owed it (owe); the notification is sent once (settle), by whichever
// learns of the end first: a push-style call that waited, the event stream (Follow) or a
// webhook (WebhookHandler).

// owe records that session is owed the end of elicitation id.
func (c *Client) owe(id string, session *mcp.ServerSession) {
	if session == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !slices.Contains(c.waiting[id], session) {
		c.waiting[id] = append(c.waiting[id], session)
	}
}

// settle sends notifications/elicitation/complete for e, if it has ended and a session is
// owed it, and forgets it.
func (c *Client) settle(e *Elicitation) {
	if e == nil || !e.Ended() {
		return
	}
	c.mu.Lock()
	sessions := c.waiting[e.ID]
	delete(c.waiting, e.ID)
	c.mu.Unlock()
	// Not the request's context: the notification may outlive the call that asked.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, session := range sessions {
		if err := session.NotifyElicitationComplete(ctx, &mcp.ElicitationCompleteParams{ElicitationID: e.ID}); err != nil {
			c.log.Warn("elicitation complete notification not sent", "elicitation_id", e.ID, "err", err)
		}
	}
}

// Follow reads this server's events from urlflow (GET /api/v1/events) until ctx ends, and
// sends each session the end of its elicitations. It reconnects after a failure, from the
// last event it read. Run it, or serve WebhookHandler, for StyleError (a push-style call
// that returns before its user finished relies on it too).
func (c *Client) Follow(ctx context.Context) error {
	last := ""
	for {
		err := c.follow(ctx, &last)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		c.log.Warn("urlflow event stream ended; reconnecting", "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// follow reads one connection of the event stream, keeping the last event ID in last.
func (c *Client) follow(ctx context.Context, last *string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base.JoinPath("api/v1/events").String(), nil)
	if err != nil {
		return err
	}
	if err := c.authorize(req); err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	if *last != "" {
		req.Header.Set("Last-Event-ID", *last)
	}
	resp, err := c.opts.HTTPClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return &APIError{Status: resp.StatusCode, Message: "the event stream was refused"}
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var id, event, data string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if event != "" {
				c.onEvent(event, data)
			}
			if id != "" {
				*last = id
			}
			id, event, data = "", "", ""
		case strings.HasPrefix(line, "id: "):
			id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return errors.New("the stream closed")
}

// onEvent handles one event of the stream.
func (c *Client) onEvent(event, data string) {
	switch event {
	case "elicitation":
		var ev struct {
			Elicitation Elicitation `json:"elicitation"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			c.log.Warn("urlflow event not understood", "err", err)
			return
		}
		c.settle(&ev.Elicitation)
	case "credential":
		var ev CredentialEvent
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			c.log.Warn("urlflow event not understood", "err", err)
			return
		}
		c.credentialEvent(&ev)
	case "reset":
		// Events were lost: ask urlflow about every elicitation still owed.
		c.mu.Lock()
		ids := make([]string, 0, len(c.waiting))
		for id := range c.waiting {
			ids = append(ids, id)
		}
		c.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, id := range ids {
			var e Elicitation
			if _, err := c.do(ctx, http.MethodGet, "elicitations/"+id, "", nil, &e); err == nil {
				c.settle(&e)
			}
		}
	}
}

// credentialEvent hands ev to Options.OnCredentialEvent, if set.
func (c *Client) credentialEvent(ev *CredentialEvent) {
	if c.opts.OnCredentialEvent != nil {
		c.opts.OnCredentialEvent(ev)
	}
}

// WebhookHandler is the endpoint of this server's urlflow webhook (configure its URL and
// secret in urlflow): it verifies each message with v, sends the owed session the end of
// its elicitation, and answers 204; a message that does not verify gets 401, and one
// verified before 204 (urlflow sends a message again when it did not see the answer).
func (c *Client) WebhookHandler(v *WebhookVerifier) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "unreadable body", http.StatusBadRequest)
			return
		}
		hook, err := v.Verify(r.Header, body)
		switch {
		case errors.Is(err, ErrWebhookReplayed):
		case err != nil:
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		case hook.Credential != nil:
			c.credentialEvent(hook.Credential)
		default:
			c.settle(&hook.Elicitation)
		}
		w.WriteHeader(http.StatusNoContent)
	})
}
