package delegate

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
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

// Follow reads this server's events from urlflow (Events, from now) until ctx ends, sends
// each session the end of its elicitations, and hands each change to
// Options.OnElicitation and Options.OnCredentialEvent. After a reset it reads every owed
// elicitation again. Run it, or serve WebhookHandler, for StyleError (a push-style call
// that returns before its user finished relies on it too). It reconnects after any
// failure, a refusal too (logged), from the last event it read, until ctx ends.
func (c *Client) Follow(ctx context.Context) error {
	return c.events(ctx, "", func(ev *Event) error {
		switch ev.Type {
		case "elicitation":
			c.elicitationEvent(&ev.Elicitation.Elicitation)
		case "credential":
			c.credentialEvent(ev.Credential)
		case "reset":
			c.rereadOwed()
		}
		return nil
	}, true)
}

// rereadOwed asks urlflow about every elicitation still owed to a session, after events
// were lost, and settles those that ended.
func (c *Client) rereadOwed() {
	c.mu.Lock()
	ids := make([]string, 0, len(c.waiting))
	for id := range c.waiting {
		ids = append(ids, id)
	}
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, id := range ids {
		if e, err := c.Elicitation(ctx, id); err == nil {
			c.settle(e)
		}
	}
}

// elicitationEvent settles e and hands it to Options.OnElicitation, if set.
func (c *Client) elicitationEvent(e *Elicitation) {
	c.settle(e)
	if c.opts.OnElicitation != nil {
		c.opts.OnElicitation(e)
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
			c.elicitationEvent(&hook.Elicitation)
		}
		w.WriteHeader(http.StatusNoContent)
	})
}
