package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/urlflow/urlflow/internal/display"
	"github.com/urlflow/urlflow/oauth/identity"
	"github.com/urlflow/urlflow/oauth/providers"
	"github.com/urlflow/urlflow/recovery"
	"github.com/urlflow/urlflow/services"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/credentials"
	"github.com/urlflow/urlflow/state/flow"
	"github.com/urlflow/urlflow/state/servicecreds"
	"github.com/urlflow/urlflow/web/respond"
)

// The credentials API of delegating services: how the credential a service holds for its
// user stands, and its deletion, one at a time or all of the user's at once (the service
// deletes the user's account). The user is proven as for every request of a service that
// names one (delegatedUser), and a service reaches only what it collected itself
// (credentials.Name). No answer carries a value: a service gets one only through release.

// credentialStatusRequest is the body of POST /api/v1/credentials/status.
type credentialStatusRequest struct {
	Slot     string `json:"slot"`
	Provider string `json:"provider"`
	// Label is the account label among several credentials of the target ("" for the
	// default account).
	Label string `json:"label"`
	// Scopes, for a provider, are the access the service needs: those the connection was
	// not granted are its missing scopes.
	Scopes []string `json:"scopes"`
	// User names the user instead of a user token, for services with assert_users.
	User string `json:"user"`
	// UserRef names the user by the service's reference alone, for a credential the user
	// let the service use while away (offline).
	UserRef string `json:"userRef"`
}

// CredentialStatus is the answer of POST /api/v1/credentials/status: how the credential a
// service holds for its user stands, with what is known of it; never its value.
type CredentialStatus struct {
	Kind   state.Kind `json:"kind"`
	Target string     `json:"target"`
	// Label is the account label ("" for the default account).
	Label string `json:"label,omitempty"`
	// UserRef is the reference the service knows the user by (package userref).
	UserRef string `json:"userRef"`

	// Status is one of the Credential* statuses.
	Status      string     `json:"status"`
	StoredAt    *time.Time `json:"storedAt,omitempty"`
	VerifiedAt  *time.Time `json:"verifiedAt,omitempty"`
	LastUsedAt  *time.Time `json:"lastUsedAt,omitempty"`
	RefreshedAt *time.Time `json:"refreshedAt,omitempty"`
	Account     string     `json:"account,omitempty"`
	Scopes      []string   `json:"scopes,omitempty"`
	// MissingScopes are the scopes asked for that the connection was not granted.
	MissingScopes []string   `json:"missingScopes,omitempty"`
	LockedAt      *time.Time `json:"lockedAt,omitempty"`
	LockReason    string     `json:"lockReason,omitempty"`
	// Releasable: the user provided it on pages that said the service may receive it.
	Releasable bool `json:"releasable,omitempty"`
	// Metadata is the service's own, from the create request of the flow that stored it.
	Metadata state.Metadata `json:"metadata,omitempty"`
	// Offline: the user let the service use it while away (by userRef alone).
	Offline bool `json:"offline,omitempty"`
	// Parameters are what the user entered with a secret for its slot's base URL.
	Parameters map[string]string `json:"parameters,omitempty"`
}

// The statuses of a credential. All but stored and missing_scopes are the reasons with
// which the proxy refuses to use it.
const (
	// CredentialStored: usable; a create for it answers stored.
	CredentialStored = "stored"
	// CredentialNotStored: the service holds none for the user.
	CredentialNotStored = reasonNotStored
	// CredentialLocked: locked until the user enters it again.
	CredentialLocked = reasonLocked
	// CredentialReconnect: the provider no longer honours the connection.
	CredentialReconnect = reasonReconnect
	// CredentialUnopenable: sealed under a key that is no longer in the key ring.
	CredentialUnopenable = reasonUnopenable
	// CredentialIncomplete: a secret stored without the parameters its slot's base URL now
	// takes.
	CredentialIncomplete = reasonIncomplete
	// CredentialMissingScopes: usable, but not granted every scope asked for.
	CredentialMissingScopes = "missing_scopes"
)

// apiCredentialStatus is POST /api/v1/credentials/status, for delegating services: how the
// credential it holds for the proven user stands. It only reads: nothing is refreshed,
// used, or written to the audit trail.
func (s *API) apiCredentialStatus(c echo.Context) error {
	var req credentialStatusRequest
	svc, t, err := s.targetedRequest(c, &req, &req.Slot, &req.Provider, &req.Label)
	if err != nil {
		return err
	}
	if t.kind == state.KindSecret && len(req.Scopes) > 0 {
		return respond.Refuse(http.StatusBadRequest, "scopes are for providers; a secret slot has none")
	}
	user, byRef, err := s.serviceUser(c, svc, req.User, req.UserRef)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	name := t.credentialName(svc)
	ans := CredentialStatus{Kind: t.kind, Target: t.name, Label: t.accountLabel, UserRef: s.opts.UserRefs.Of(svc.Name, user), Status: CredentialNotStored}
	cred, err := s.opts.Credentials.Get(ctx, user, name)
	if errors.Is(err, state.ErrNotFound) {
		return c.JSON(http.StatusOK, ans)
	}
	if err != nil {
		return err
	}
	if err := offlineAllowed(byRef, cred); err != nil {
		return err
	}
	if ans.LastUsedAt, err = s.opts.Credentials.LastUsed(ctx, user, name); err != nil {
		return err
	}
	s.describe(&ans, cred, req.Scopes)
	return c.JSON(http.StatusOK, ans)
}

// describe fills ans with what cred, which the service holds, says of itself and its
// status for a need of the scopes want.
func (s *API) describe(ans *CredentialStatus, cred *credentials.Credential, want []string) {
	ans.StoredAt, ans.VerifiedAt, ans.RefreshedAt = &cred.StoredAt, cred.VerifiedAt, cred.RefreshedAt
	ans.Account, ans.Scopes, ans.Releasable, ans.Metadata, ans.Offline = cred.Account, cred.Scopes, cred.Releasable, cred.Metadata, cred.Offline
	ans.LockedAt, ans.LockReason, ans.Parameters = cred.LockedAt, cred.LockReason, cred.Parameters
	for _, w := range want {
		if !slices.Contains(cred.Scopes, w) && !slices.Contains(ans.MissingScopes, w) {
			ans.MissingScopes = append(ans.MissingScopes, w)
		}
	}
	switch {
	case cred.Locked():
		ans.Status = CredentialLocked
	case cred.NeedsReconnect:
		ans.Status = CredentialReconnect
	case !s.opts.Vault.HasKey(cred.Sealed):
		ans.Status = CredentialUnopenable
	case cred.Kind == state.KindSecret && s.opts.Slots.Lacks(ans.Target, cred.Parameters) != nil:
		ans.Status = CredentialIncomplete
	case len(ans.MissingScopes) > 0:
		ans.Status = CredentialMissingScopes
	default:
		ans.Status = CredentialStored
	}
}

// credentialDeleteRequest is the body of POST /api/v1/credentials/delete.
type credentialDeleteRequest struct {
	Slot     string `json:"slot"`
	Provider string `json:"provider"`
	// Label is the account label among several credentials of the target ("" for the
	// default account).
	Label string `json:"label"`
	// Reason says why, for the audit trail.
	Reason string `json:"reason"`
	// User names the user instead of a user token, for services with assert_users.
	User string `json:"user"`
}

// credentialsDeleteAllRequest is the body of POST /api/v1/credentials/delete-all.
type credentialsDeleteAllRequest struct {
	// Reason says why, for the audit trail.
	Reason string `json:"reason"`
	// User names the user instead of a user token, for services with assert_users.
	User string `json:"user"`
}

// Deletion is what the deletion of one credential did: whether there was one to delete
// and, for a provider's connection that was deleted, what came of revoking it there.
type Deletion struct {
	Kind   state.Kind `json:"kind"`
	Target string     `json:"target"`
	// Label is the account label ("" for the default account).
	Label string `json:"label,omitempty"`
	// UserRef is the reference the service knows the user by (package userref), in the
	// answer of a deletion of one credential.
	UserRef string `json:"userRef,omitempty"`
	Deleted bool   `json:"deleted"`
	// Revocation is one of the Revocation* outcomes, for a connection deleted.
	Revocation string `json:"revocation,omitempty"`
}

// DeletedAll is the answer of POST /api/v1/credentials/delete-all: the elicitations
// cancelled and the credentials deleted.
type DeletedAll struct {
	// UserRef is the reference the service knows the user by (package userref).
	UserRef string `json:"userRef"`
	// Cancelled are the IDs of the service's elicitations for the user that were still
	// running: cancelled first, so that none stores a credential again afterwards.
	Cancelled []string   `json:"cancelled"`
	Deleted   []Deletion `json:"deleted"`
}

// What came of revoking a deleted connection at its provider. It is deleted whatever came
// of it: urlflow no longer holds its tokens.
const (
	// RevocationRevoked: revoked (RFC 7009), or the provider had already stopped
	// honouring it.
	RevocationRevoked = "revoked"
	// RevocationUnsupported: the provider offers urlflow no way to revoke it.
	RevocationUnsupported = "unsupported"
	// RevocationFailed: revoking it failed, or its provider is no longer configured.
	RevocationFailed = "failed"
)

// apiCredentialDelete is POST /api/v1/credentials/delete, for delegating services: the
// credential it holds for the proven user is deleted, a provider's connection revoked
// there first where the provider can. Deleting what is not there answers 200 with
// deleted false, so that a deletion sent again after a lost answer is not an error.
func (s *API) apiCredentialDelete(c echo.Context) error {
	var req credentialDeleteRequest
	svc, t, err := s.targetedRequest(c, &req, &req.Slot, &req.Provider, &req.Label)
	if err != nil {
		return err
	}
	user, err := s.delegatedUser(c, svc, req.User)
	if err != nil {
		return err
	}
	d, err := s.deleteCredential(c.Request().Context(), user, t.kind, t.credentialName(svc), deletionReason(svc, "", req.Reason))
	if err != nil {
		return err
	}
	d.UserRef = s.opts.UserRefs.Of(svc.Name, user)
	return c.JSON(http.StatusOK, d)
}

// apiCredentialsDeleteAll is POST /api/v1/credentials/delete-all, for delegating services:
// every credential the service holds for the proven user is deleted (as by
// apiCredentialDelete), also those of slots and providers it may no longer ask for; what
// other services and urlflow's own tools hold stays.
func (s *API) apiCredentialsDeleteAll(c echo.Context) error {
	var req credentialsDeleteAllRequest
	svc, err := s.serviceRequest(c, &req)
	if err != nil {
		return err
	}
	user, err := s.delegatedUser(c, svc, req.User)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	reason := deletionReason(svc, "with every credential of the user", req.Reason)
	ans := DeletedAll{UserRef: s.opts.UserRefs.Of(svc.Name, user), Deleted: []Deletion{}}
	if ans.Cancelled, err = s.cancelRunning(ctx, user, svc, reason); err != nil {
		return err
	}
	names, err := s.opts.Credentials.Names(ctx, user)
	if err != nil {
		return err
	}
	for _, name := range names {
		if holder, _ := credentials.SplitName(name); holder != svc.Name {
			continue
		}
		cred, err := s.opts.Credentials.Get(ctx, user, name)
		if errors.Is(err, state.ErrNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return err
		}
		d, err := s.deleteCredential(ctx, user, cred.Kind, name, reason)
		if err != nil {
			return err // what was deleted stays deleted; the request sent again deletes the rest
		}
		if d.Deleted {
			ans.Deleted = append(ans.Deleted, d)
		}
	}
	return c.JSON(http.StatusOK, ans)
}

// cancelRunning cancels every elicitation of svc for user that is still running, as actor
// service with reason, and returns their IDs. One that ends meanwhile is left as it ended.
func (s *API) cancelRunning(ctx context.Context, user state.User, svc *services.Service, reason string) ([]string, error) {
	var running []flow.State
	for _, st := range flow.States {
		if !st.Terminal() {
			running = append(running, st)
		}
	}
	q := flow.ListQuery{Filter: flow.Filter{UserKey: user.Key(), Service: svc.Name, States: running}, Limit: flow.MaxListLimit}
	cancelled := []string{}
	for {
		page, err := s.opts.Flows.Index().List(ctx, q)
		if err != nil {
			return cancelled, fmt.Errorf("list the running elicitations of the user: %w", err)
		}
		for _, e := range page.Elicitations {
			_, err := s.opts.Recovery.Cancel(ctx, e, flow.Act{Actor: state.ActorService, Reason: reason})
			var conflict *recovery.Conflict
			switch {
			case errors.As(err, &conflict):
				continue // it ended meanwhile
			case err != nil:
				return cancelled, err
			}
			cancelled = append(cancelled, e.ID)
		}
		if page.Next == "" {
			return cancelled, nil
		}
		q.Cursor = page.Next
	}
}

// deleteCredential deletes user's credential name, of kind, that a service holds, as actor
// service with reason; a connection is revoked at its provider first where it can be.
func (s *API) deleteCredential(ctx context.Context, user state.User, kind state.Kind, name, reason string) (Deletion, error) {
	_, target := credentials.SplitName(name)
	d := Deletion{Kind: kind, Target: target, Label: credentials.LabelOf(name)}
	p, known := s.opts.Providers.Lookup(target)
	if kind == state.KindOAuth && known {
		dis, err := s.opts.Keeper.Disconnect(ctx, user, name, p, state.ActorService, reason)
		if err != nil {
			return d, err
		}
		d.Deleted = dis.Deleted
		if d.Deleted {
			d.Revocation = revocation(dis.RevokeErr)
		}
		return d, nil
	}
	deleted, err := s.opts.Credentials.Delete(ctx, user, name, state.ActorService, reason)
	if err != nil {
		return d, err
	}
	d.Deleted = deleted
	if deleted && kind == state.KindOAuth {
		d.Revocation = RevocationFailed // its provider is no longer configured
	}
	return d, nil
}

// revocation names what came of revoking a connection, from the error of revoking it.
func revocation(err error) string {
	switch {
	case err == nil:
		return RevocationRevoked
	case errors.Is(err, providers.ErrNoRevocation):
		return RevocationUnsupported
	}
	return RevocationFailed
}

// deletionReason is the audit trail's reason for a deletion by svc, how it deleted (empty
// for one credential) and why, as the service says (cleaned, as every reason is).
func deletionReason(svc *services.Service, how, why string) string {
	reason := "deleted by the service " + svc.Name
	if how != "" {
		reason += " " + how
	}
	if why = display.Clean(why, recovery.ReasonLimit); why != "" {
		reason += ": " + why
	}
	return reason
}

// CredentialList is the answer of GET /api/v1/credentials: a page of the credentials a
// service holds across its users, oldest stored first.
type CredentialList struct {
	Credentials []CredentialStatus `json:"credentials"`
	// Next is the cursor of the page after; absent on the last.
	Next string `json:"next,omitempty"`
}

// Credential listing limits.
const (
	defaultCredentialLimit = 50
	maxCredentialLimit     = 500
)

// apiCredentialList is GET /api/v1/credentials: a page of the credentials the service
// holds across its users (an operator names the service), each as the status request
// describes it (without lastUsedAt), with its user's reference; ?target= and ?status=
// select. It only reads.
func (s *API) apiCredentialList(c echo.Context) error {
	who, _ := identity.CallerFrom(c.Request().Context())
	service, err := s.listedService(who, c.QueryParam("service"), "credentials")
	if err != nil {
		return err
	}
	q := c.QueryParams()
	for name := range q {
		if !slices.Contains([]string{"service", "target", "status", "cursor", "limit"}, name) {
			return respond.Refuse(http.StatusBadRequest, "%s: not a parameter of this listing (want target, status, cursor, limit; operators service)", name)
		}
	}
	limit := defaultCredentialLimit
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > maxCredentialLimit {
			return respond.Refuse(http.StatusBadRequest, "limit: want a whole number from 1 to %d", maxCredentialLimit)
		}
	}
	target, status := q.Get("target"), q.Get("status")
	if status != "" && !slices.Contains(credentialStatuses, status) {
		return respond.Refuse(http.StatusBadRequest, "status: want one of %s", strings.Join(credentialStatuses, ", "))
	}
	keep := func(e servicecreds.Entry) bool {
		if target != "" && e.Target != target {
			return false
		}
		return status == "" || s.describeEntry(service, e).Status == status
	}
	page, err := s.opts.ServiceCredentials.List(c.Request().Context(), service, q.Get("cursor"), limit, keep)
	if errors.Is(err, servicecreds.ErrBadCursor) {
		return respond.Refuse(http.StatusBadRequest, "cursor: not one this listing handed out; start again without it")
	}
	if err != nil {
		return err
	}
	ans := CredentialList{Credentials: []CredentialStatus{}, Next: page.Next}
	for _, e := range page.Entries {
		ans.Credentials = append(ans.Credentials, s.describeEntry(service, e))
	}
	return c.JSON(http.StatusOK, ans)
}

// credentialStatuses are the statuses a stored credential can have (not_stored aside).
var credentialStatuses = []string{CredentialStored, CredentialLocked, CredentialReconnect, CredentialUnopenable, CredentialIncomplete}

// describeEntry is the status of the credential of e, which service holds.
func (s *API) describeEntry(service string, e servicecreds.Entry) CredentialStatus {
	ans := CredentialStatus{Kind: e.Credential.Kind, Target: e.Target, Label: e.Label, UserRef: s.opts.UserRefs.Of(service, e.User)}
	s.describe(&ans, e.Credential, nil)
	return ans
}
