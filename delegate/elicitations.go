package delegate

import (
	"context"
	"crypto/rand"
	"net/http"
	"net/url"
	"time"
)

// The elicitations of your server, outside a tool handler: create one for a user (Require
// does in a handler), read it, wait for it, record the client's answer, cancel it, or retry
// it. None of these ever carries a value.

// CreateOptions are the parts of a create that are not the Need.
type CreateOptions struct {
	// Call binds a 2026-07-28 requestState to the tool and its arguments (any string of
	// yours, at most 200 bytes).
	Call string
	// IdempotencyKey makes sending the create again safe: the same key gets the first
	// answer for 24 hours, never a second elicitation; the same key with another body is
	// refused (422). A key of its own when empty.
	IdempotencyKey string
}

// Created is the answer of a create.
type Created struct {
	// Status is "stored" (the credential is usable: Credential describes it),
	// "user_action_required" (send the user to Elicitation.URL) or "ended" (the replay
	// of an IdempotencyKey whose elicitation has ended).
	Status      string       `json:"status"`
	UserRef     string       `json:"userRef"`
	Elicitation *Elicitation `json:"elicitation"`
	Credential  *Connection  `json:"credential"`
	// RequestState, with user_action_required, is urlflow's signed state of the flow, for
	// a 2026-07-28 client's input_required result (Require puts it there).
	RequestState string `json:"requestState,omitempty"`
	// New reports whether urlflow created the elicitation (201), rather than finding the
	// user's running one (200).
	New bool `json:"-"`
}

// Connection describes a credential stored for your server, to its holder: never its value.
type Connection struct {
	// Name is the slot or provider; Label the account label (empty for the default).
	Name    string `json:"name"`
	Label   string `json:"label,omitempty"`
	Service string `json:"service,omitempty"`
	// Kind is "secret" or "oauth".
	Kind string `json:"kind"`
	// Offline reports whether the user let your server use it while away.
	Offline     bool       `json:"offline,omitempty"`
	StoredAt    time.Time  `json:"storedAt"`
	VerifiedAt  *time.Time `json:"verifiedAt,omitempty"`
	LastUsedAt  *time.Time `json:"lastUsedAt,omitempty"`
	RefreshedAt *time.Time `json:"refreshedAt,omitempty"`
	// Account names the account at the API, where urlflow learnt it; Scopes are a
	// provider's granted scopes.
	Account        string   `json:"account,omitempty"`
	Scopes         []string `json:"scopes,omitempty"`
	NeedsReconnect bool     `json:"needsReconnect,omitempty"`
	// LockedAt and LockReason are set while a secret is locked (a request tried to send it).
	LockedAt   *time.Time `json:"lockedAt,omitempty"`
	LockReason string     `json:"lockReason,omitempty"`
	// Weak reports a secret weaker than its slot now requires: it works, and should be
	// replaced.
	Weak bool `json:"weak,omitempty"`
}

// Create asks urlflow for the credential need of user: stored already, or an elicitation
// that asks the user on urlflow's pages. opts may be nil.
func (c *Client) Create(ctx context.Context, user User, need Need, opts *CreateOptions) (*Created, error) {
	if err := user.check(); err != nil {
		return nil, err
	}
	if opts == nil {
		opts = &CreateOptions{}
	}
	body := requestOf(need)
	body.Call, body.User, body.UserRef = opts.Call, user.Subject, user.Ref
	return c.create(ctx, user.Token, body, opts.IdempotencyKey)
}

// create sends the create request body for the user of token (none: body names the user)
// with an Idempotency-Key, its own when key is empty: sent again after a 429, it creates
// nothing twice.
func (c *Client) create(ctx context.Context, token string, body createRequest, key string) (*Created, error) {
	if key == "" {
		key = rand.Text()
	}
	var out Created
	status, err := c.doWith(ctx, http.MethodPost, "elicitations", token, http.Header{"Idempotency-Key": {key}}, body, &out)
	if err != nil {
		return nil, err
	}
	out.New = status == http.StatusCreated
	return &out, nil
}

// Elicitation reads elicitation id of your server as it stands.
func (c *Client) Elicitation(ctx context.Context, id string) (*Elicitation, error) {
	return c.elicitation(ctx, http.MethodGet, id, "", nil)
}

// Wait reads elicitation id until it ends or d passes, and returns it as it then stands.
func (c *Client) Wait(ctx context.Context, id string, d time.Duration) (*Elicitation, error) {
	return c.wait(ctx, id, d)
}

// Answer records the MCP client's answer to your own URL-mode request for elicitation id:
// "accept", "decline" or "cancel". An accept is consent, never success; decline and cancel
// end it. 409 (an *APIError) when it had already ended.
func (c *Client) Answer(ctx context.Context, id, action string) (*Elicitation, error) {
	return c.elicitation(ctx, http.MethodPost, id, "/answer", map[string]string{"action": action})
}

// Cancel ends running elicitation id of your server, with reason (kept in its history) if
// not empty. 409 when it had already ended.
func (c *Client) Cancel(ctx context.Context, id, reason string) (*Elicitation, error) {
	body := map[string]string{}
	if reason != "" {
		body["reason"] = reason
	}
	return c.elicitation(ctx, http.MethodPost, id, "/cancel", body)
}

// Retry offers elicitation id again: a running one is answered with its URL to open again;
// with fresh, one that was declined, cancelled or expired is followed by a new elicitation
// for the same user and purpose, which Retry returns (409 when it completed or was retried
// already).
func (c *Client) Retry(ctx context.Context, id string, fresh bool) (*Elicitation, error) {
	body := map[string]bool{}
	if fresh {
		body["new"] = true
	}
	return c.elicitation(ctx, http.MethodPost, id, "/retry", body)
}

// elicitation sends method to elicitation id's path suffix with body and returns the
// elicitation urlflow answers with.
func (c *Client) elicitation(ctx context.Context, method, id, suffix string, body any) (*Elicitation, error) {
	var e Elicitation
	if _, err := c.do(ctx, method, "elicitations/"+url.PathEscape(id)+suffix, "", body, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// Credential returns the handle on the credential of need (its Slot or Provider, and
// Label) that urlflow holds for user, for use outside a tool handler: a user named by
// Token or Subject (with assert_users), or by Ref for one who let your server use it while
// away (as Offline).
func (c *Client) Credential(user User, need Need) *Credential {
	return &Credential{c: c, need: need, userToken: user.Token, userRef: user.Ref, subject: user.Subject}
}
