package delegate

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// What a server holds: how the credential it holds for a user stands, and its deletion,
// one at a time or all of a user's when the user's account with the server ends. None of
// these ever carries a value.

// User names the user a request is for: Token, the access token the user sent your server
// (for a tool call, UserOf returns it); or, for a server whose configuration sets
// assert_users, Subject, the user's subject at the issuer; or Ref, the user's reference at
// your server (UserRef of any answer), for CredentialStatus of a credential the user let
// your server use while away (Need.Offline). Set one of the three.
type User struct {
	Token   string
	Subject string
	Ref     string
}

// UserOf returns the user of the tool call req: the bearer token it carries, which urlflow
// checks as the evidence of who the user is.
func UserOf(req *mcp.CallToolRequest) User { return User{Token: userToken(req)} }

// check refuses a User that names no one, or names one twice.
func (u User) check() error {
	set := 0
	for _, v := range []string{u.Token, u.Subject, u.Ref} {
		if v != "" {
			set++
		}
	}
	if set != 1 {
		return errors.New("delegate: User: set Token (the user's access token), Subject (with assert_users) or Ref (a user reference, for use while away), one of the three")
	}
	return nil
}

// CredentialStatus is how a credential that urlflow holds for your server stands
// (Client.CredentialStatus). Times are zero, and other fields empty, where they do not
// apply.
type CredentialStatus struct {
	// Kind is "secret" (a slot) or "oauth" (a provider); Target the slot or provider.
	Kind   string `json:"kind"`
	Target string `json:"target"`
	// Label is the account label, empty for the default account.
	Label string `json:"label"`
	// UserRef is the reference your service knows the user by.
	UserRef string `json:"userRef"`
	// Status is "stored" (usable: Require returns it at once), "missing_scopes" (usable,
	// but not granted every scope of the Need: MissingScopes), or one of the reasons with
	// which a Call is refused and the user must provide it again (Require):
	// "not_stored", "locked", "reconnect", "unopenable", "incomplete" (a secret stored
	// before its slot's base URL took parameters).
	Status      string    `json:"status"`
	StoredAt    time.Time `json:"storedAt"`
	VerifiedAt  time.Time `json:"verifiedAt"`
	LastUsedAt  time.Time `json:"lastUsedAt"`
	RefreshedAt time.Time `json:"refreshedAt"`
	// Account and Scopes are a connection's, as the provider named and granted them.
	Account       string   `json:"account"`
	Scopes        []string `json:"scopes"`
	MissingScopes []string `json:"missingScopes"`
	// LockedAt and LockReason say when and how a locked credential came to be locked.
	LockedAt   time.Time `json:"lockedAt"`
	LockReason string    `json:"lockReason"`
	// Releasable: the user provided it on pages that said your server may receive it.
	Releasable bool `json:"releasable"`
	// Metadata is your server's own, from the create request that stored it (Need.Metadata).
	Metadata map[string]string `json:"metadata"`
	// Offline: the user let your server use it while away (Need.Offline).
	Offline bool `json:"offline"`
}

// Deletion is what the deletion of one credential did.
type Deletion struct {
	Kind   string `json:"kind"`
	Target string `json:"target"`
	// Label is the account label, empty for the default account.
	Label string `json:"label"`
	// UserRef is the reference your service knows the user by, in DeleteCredential's
	// answer (DeletedAll has one for all).
	UserRef string `json:"userRef"`
	// Deleted is false when there was nothing to delete.
	Deleted bool `json:"deleted"`
	// Revocation, for a connection deleted, is what came of revoking it at its provider:
	// "revoked", "unsupported" (the provider offers no revocation) or "failed". It is
	// deleted either way.
	Revocation string `json:"revocation"`
}

// credentialRequest is the body of the credentials endpoints.
type credentialRequest struct {
	Slot     string   `json:"slot,omitempty"`
	Provider string   `json:"provider,omitempty"`
	Label    string   `json:"label,omitempty"`
	Scopes   []string `json:"scopes,omitempty"`
	Reason   string   `json:"reason,omitempty"`
	User     string   `json:"user,omitempty"`
	UserRef  string   `json:"userRef,omitempty"`
}

// CredentialStatus reports how the credential of need (its Slot or Provider, and for a
// provider the Scopes the tool needs) that urlflow holds for user and your server stands.
// It only reads: nothing is refreshed, used or audited. Refusals are *APIError.
func (c *Client) CredentialStatus(ctx context.Context, user User, need Need) (*CredentialStatus, error) {
	var st CredentialStatus
	body := credentialRequest{Slot: need.Slot, Provider: need.Provider, Label: need.Label, Scopes: need.Scopes}
	if err := c.credentials(ctx, "credentials/status", user, body, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// DeleteCredential deletes the credential of need (its Slot or Provider) that urlflow
// holds for user and your server; a connection is revoked at its provider first where it
// can be. reason (may be empty) goes into urlflow's audit trail. Deleting what is not there
// is no error: Deleted is false.
func (c *Client) DeleteCredential(ctx context.Context, user User, need Need, reason string) (*Deletion, error) {
	var d Deletion
	body := credentialRequest{Slot: need.Slot, Provider: need.Provider, Label: need.Label, Reason: reason}
	if err := c.credentials(ctx, "credentials/delete", user, body, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// DeletedAll is what DeleteAllCredentials did.
type DeletedAll struct {
	// UserRef is the reference your service knows the user by.
	UserRef string `json:"userRef"`
	// Cancelled are the IDs of your server's elicitations for the user that were still
	// running, cancelled first so that none stores a credential again afterwards.
	Cancelled []string `json:"cancelled"`
	// Deleted are the credentials deleted.
	Deleted []Deletion `json:"deleted"`
}

// DeleteAllCredentials cancels your server's elicitations for user that still run, then
// deletes every credential that urlflow holds for user and your server, as
// DeleteCredential does each, for when the user's account with your server ends; what
// other servers and urlflow's own tools hold stays. After an error, call it again: what
// was cancelled or deleted stays so.
func (c *Client) DeleteAllCredentials(ctx context.Context, user User, reason string) (*DeletedAll, error) {
	var ans DeletedAll
	if err := c.credentials(ctx, "credentials/delete-all", user, credentialRequest{Reason: reason}, &ans); err != nil {
		return nil, err
	}
	return &ans, nil
}

// CredentialList is a page of the credentials your server holds across its users, oldest
// stored first: each as CredentialStatus describes it (LastUsedAt zero), with its UserRef.
type CredentialList struct {
	Credentials []CredentialStatus `json:"credentials"`
	// Next is the cursor of the next page; empty on the last.
	Next string `json:"next"`
}

// ListOptions select what ListCredentials lists; the zero value lists everything.
type ListOptions struct {
	// Target (a slot or provider) and Status ("stored", "locked", "reconnect",
	// "unopenable", "incomplete") select; empty selects all.
	Target, Status string
	// Cursor is the Next of the page before (empty for the first); Limit bounds the page
	// (urlflow's default of 50 when 0, at most 500).
	Cursor string
	Limit  int
}

// ListCredentials returns a page of the credentials urlflow holds for your server across
// all its users: what to show on an admin page, or to find the users whose connection
// needs them (Status "reconnect"). It only reads. Refusals are *APIError.
func (c *Client) ListCredentials(ctx context.Context, opts ListOptions) (*CredentialList, error) {
	q := url.Values{}
	for name, v := range map[string]string{"target": opts.Target, "status": opts.Status, "cursor": opts.Cursor} {
		if v != "" {
			q.Set(name, v)
		}
	}
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	path := "credentials"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var list CredentialList
	if _, err := c.do(ctx, http.MethodGet, path, "", nil, &list); err != nil {
		return nil, err
	}
	return &list, nil
}

// credentials sends body, for user, to the credentials endpoint path and decodes the
// answer into out.
func (c *Client) credentials(ctx context.Context, path string, user User, body credentialRequest, out any) error {
	if err := user.check(); err != nil {
		return err
	}
	body.User, body.UserRef = user.Subject, user.Ref
	_, err := c.do(ctx, http.MethodPost, path, user.Token, body, out)
	return err
}
