package pages

import (
	"context"
	"crypto/rand"
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/urlflow/urlflow/internal/locale"
	"github.com/urlflow/urlflow/internal/tracing"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/authorizations"
	"github.com/urlflow/urlflow/state/flow"
	"github.com/urlflow/urlflow/templates"
	"github.com/urlflow/urlflow/web/browser"
)

// oauthAttemptTTL bounds the time between leaving for the provider and coming back.
const oauthAttemptTTL = 15 * time.Minute

// targetLabel is how people call what e asks for, in the language of ctx: a secret's
// label, or a provider's account, with the account label its service gave it.
func (s *Pages) targetLabel(ctx context.Context, e *flow.Elicitation) string {
	return withAccountLabel(s.labelOf(ctx, e.Kind, e.Target), e.Label)
}

// withAccountLabel is what people call a credential of label (among several of one target
// that a service holds): "GitHub account (work)"; what alone for the default account.
func withAccountLabel(what, label string) string {
	if label == "" {
		return what
	}
	return what + " (" + label + ")"
}

// labelOf is how people call the target name of kind, in the language of ctx: a secret's
// label, or a provider's account ("GitHub account"); the name itself for one no longer
// configured.
func (s *Pages) labelOf(ctx context.Context, kind state.Kind, name string) string {
	if kind == state.KindOAuth {
		if p, ok := s.opts.Providers.Lookup(name); ok {
			name = p.Label
		}
		return providerAccount(ctx, name)
	}
	if slot, ok := s.opts.Slots.Lookup(name); ok {
		return slot.Label
	}
	return name
}

// providerAccount is what people call their account at the provider of label ("GitHub
// account"), in the language of ctx.
func providerAccount(ctx context.Context, label string) string {
	return locale.T(ctx, "common.provider_account", "Provider", label)
}

// renderConnect renders the consent page of a third-party connection. Its Continue form
// posts to urlflow, which redirects to the provider: the page's form-action allows the
// provider's authorization origin, since browsers apply it to a form's redirects too.
func (s *Pages) renderConnect(c echo.Context, v *browser.Visitor, e *flow.Elicitation) error {
	p, ok := s.opts.Providers.Lookup(e.Target)
	if !ok {
		return errProviderNotConfigured(c.Request().Context())
	}
	page, err := s.browser.Layout(c, v, "")
	if err != nil {
		return err
	}
	if origin := p.AuthorizationOrigin(); origin != "" {
		c.Response().Header().Set("Content-Security-Policy", browser.PolicyWithFormTarget(origin))
	}
	_, err = s.opts.Credentials.Get(c.Request().Context(), e.User, e.CredentialName())
	service, receives := s.requester(e)
	return s.browser.Render(c, http.StatusOK, templates.ConnectPage(page, templates.Connect{
		ElicitationID: e.ID, ClientName: clientName(e.Client), ClientVersion: e.Client.Version, Purpose: e.Purpose,
		ServiceLabel: service, ServiceReceives: receives, Offline: e.Offline,
		ProviderLabel: p.Label, ProviderName: p.Name, Scopes: e.Scopes, Reconnect: err == nil,
		ExpiresAt: e.ExpiresAt, CSRF: page.CSRF,
		ContinueAction: "/e/" + e.ID + "/authorize", DeclineAction: "/e/" + e.ID + "/decline",
	}))
}

// authorize is POST /e/{id}/authorize: the user agreed to connect. urlflow keeps a
// single-use state bound to the elicitation and this browser session, with the PKCE
// verifier, and sends the browser to the provider.
func (s *Pages) authorize(c echo.Context) error {
	v, e, err := s.runningPost(c, false)
	if err != nil {
		return err
	}
	p, ok := s.opts.Providers.Lookup(e.Target)
	if e.Kind != state.KindOAuth || !ok {
		return c.Redirect(http.StatusSeeOther, "/e/"+e.ID)
	}
	if err := s.limits.Form(c, v.User); err != nil {
		return err
	}
	ctx := c.Request().Context()
	stateParam, verifier := rand.Text()+rand.Text(), rand.Text()+rand.Text()+rand.Text()
	err = s.opts.Authorizations.Save(ctx, stateParam, authorizations.Attempt{
		ElicitationID: e.ID, BrowserSession: v.Session.ID, Provider: p.Name, Verifier: verifier,
		Scopes: e.Scopes, StartedAt: time.Now().UTC(),
	}, oauthAttemptTTL)
	if err != nil {
		return err
	}
	if _, err := s.opts.Flows.Apply(ctx, e.ID, flow.PageContinue, state.ActorUser, "continued to "+p.Label); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, p.AuthCodeURL(stateParam, verifier, e.Scopes))
}

// oauthCallback is GET /oauth/callback: the provider sends the browser back. The state is
// spent first (a replay finds nothing), must belong to this browser session and to a flow
// of the signed-in user that is still in progress; the issuer is checked (RFC 9207); the
// code is exchanged with the PKCE verifier; the account is read; and the tokens are sealed
// and stored in the same step that completes the elicitation. A provider error ends the
// flow failed, and the user may try again; a late or replayed answer changes nothing.
func (s *Pages) oauthCallback(c echo.Context) error {
	v, err := s.browser.Visitor(c)
	if err != nil {
		return err
	}
	a, e, err := s.callbackFlow(c, v)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	q := c.QueryParams()
	p, ok := s.opts.Providers.Lookup(a.Provider)
	if !ok || e.State != flow.InProgress {
		return c.Redirect(http.StatusSeeOther, "/e/"+e.ID)
	}
	view := templates.Failed{SlotLabel: providerAccount(ctx, p.Label), Connection: true, TryAgainURL: "/e/" + e.ID}
	if err := p.CheckIssuer(q.Get("iss")); err != nil {
		view.Reason = "the answer did not come from " + p.Label + " (" + err.Error() + ")"
		return s.failed(c, v, e, view, "provider answer refused: "+err.Error())
	}
	if code := q.Get("error"); code != "" {
		view.Reason = p.Label + " answered " + code
		if code == "access_denied" {
			view.Reason = "the access was declined at " + p.Label
		}
		return s.failed(c, v, e, view, "provider answered "+code)
	}
	tok, err := p.Exchange(ctx, q.Get("code"), a.Verifier)
	if err != nil {
		s.log.WarnContext(ctx, "connection failed at the exchange", "elicitation_id", e.ID, "provider", p.Name, "err", err)
		view.Reason = err.Error()
		return s.failed(c, v, e, view, "exchange failed: "+err.Error())
	}
	cred, err := s.opts.Keeper.Seal(e.User, e.CredentialName(), e.ID, tok, time.Now().UTC())
	if err != nil {
		return err
	}
	return s.complete(c, v, e, "connected to "+p.Label+" as "+tok.Account.Name, cred,
		templates.Done{SlotLabel: providerAccount(ctx, p.Label), ClientName: clientName(e.Client), Account: tok.Account.Name})
}

// callbackFlow spends the authorization attempt of the provider's answer to c (a replay
// finds nothing) and returns it with its flow, which must belong to v's browser session
// and signed-in user and still run. Otherwise its error is the answer: the attempt is
// unknown, of another browser (recorded in the flow's history), or of another user's flow,
// or the flow has ended (a late answer, which changes nothing).
func (s *Pages) callbackFlow(c echo.Context, v *browser.Visitor) (*authorizations.Attempt, *flow.Elicitation, error) {
	ctx := c.Request().Context()
	a, err := s.opts.Authorizations.Take(ctx, c.QueryParam("state"))
	if errors.Is(err, state.ErrNotFound) {
		return nil, nil, echo.NewHTTPError(http.StatusBadRequest, locale.T(ctx, "error.provider_answer_spent", "Product", templates.Product(ctx)))
	}
	if err != nil {
		return nil, nil, err
	}
	if !v.SignedIn || v.Session.ID != a.BrowserSession {
		s.log.WarnContext(ctx, "provider answer arrived in another browser; refused", "elicitation_id", a.ElicitationID)
		if err := s.recordForeignAnswer(c, v, a.ElicitationID); err != nil {
			return nil, nil, err
		}
		return nil, nil, echo.NewHTTPError(http.StatusForbidden, locale.T(ctx, "error.provider_answer_other_browser"))
	}
	e, err := s.opts.Flows.Read(ctx, a.ElicitationID)
	if errors.Is(err, state.ErrNotFound) || (err == nil && e.User != v.User) {
		return nil, nil, errNoSuchElicitation(ctx)
	}
	if err != nil {
		return nil, nil, err
	}
	tracing.Visited(ctx, e.ID, e.Trace)
	if e.State.Terminal() {
		return nil, nil, s.latePost(c, v, e)
	}
	return a, e, nil
}

// recordForeignAnswer records in the history of elicitation id that a provider answer
// arrived in a browser session other than the one that asked for it, and was refused. The
// actor is who brought it: the elicitation's user signed in elsewhere, another user, or,
// when nobody is signed in, urlflow itself, since there is nobody it could name.
func (s *Pages) recordForeignAnswer(c echo.Context, v *browser.Visitor, id string) error {
	ctx := c.Request().Context()
	actor, reason := state.ActorSystem, "a provider answer arrived in a browser that was not signed in and was refused"
	if v.SignedIn {
		e, err := s.opts.Flows.Read(ctx, id)
		if errors.Is(err, state.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		actor, reason = state.ActorOther, "a provider answer arrived in a browser signed in as "+v.User.String()+" and was refused"
		if e.User == v.User {
			actor, reason = state.ActorUser, "a provider answer arrived in another browser session of the user and was refused"
		}
	}
	if _, err := s.opts.Flows.Apply(ctx, id, flow.LatePost, actor, reason); err != nil && !errors.Is(err, state.ErrNotFound) {
		return err
	}
	return nil
}
