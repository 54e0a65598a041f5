package pages

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/urlflow/urlflow/internal/locale"
	"github.com/urlflow/urlflow/internal/tracing"
	"github.com/urlflow/urlflow/slots"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/flow"
	"github.com/urlflow/urlflow/templates"
	"github.com/urlflow/urlflow/web/browser"
	"github.com/urlflow/urlflow/web/respond"
)

// errNoSuchElicitation is the not-found page of a link to no elicitation the reader may
// open, in the reader's language.
func errNoSuchElicitation(ctx context.Context) error {
	return echo.NewHTTPError(http.StatusNotFound, locale.T(ctx, "error.no_such_elicitation"))
}

// elicitationFor loads elicitation id for v. When it cannot go on, its error is the
// answer (package respond): a signed-out visitor goes to sign-in, an unknown ID gets the
// not-found page, and another user gets the refusal page, which is recorded as a possible
// phishing attempt and changes nothing.
func (s *Pages) elicitationFor(c echo.Context, v *browser.Visitor) (*flow.Elicitation, error) {
	id := c.Param("id")
	if !v.SignedIn {
		return nil, respond.Redirect("/auth/login?next=" + url.QueryEscape("/e/"+id))
	}
	ctx := c.Request().Context()
	e, err := v.Page, v.PageErr
	if e == nil && err == nil { // not read with the session
		e, err = s.opts.Flows.Read(ctx, id)
	}
	if errors.Is(err, state.ErrNotFound) {
		return nil, errNoSuchElicitation(ctx)
	}
	if err != nil {
		return nil, err
	}
	if e.User != v.User {
		reason := "refused: opened by " + v.User.String()
		if _, err := s.browser.Apply(c, v, e.ID, flow.OtherUserOpened, state.ActorOther, reason); err != nil {
			return nil, err
		}
		s.log.WarnContext(ctx, "elicitation opened by another user; refused as possible phishing",
			"elicitation_id", e.ID, "user", v.User.Key(), "owner", e.User.Key())
		s.opts.Counters.Add(ctx, "urlflow_phishing_refusals_total")
		s.browser.RefusedIdentity(c.Request(), v.User, e.ID, "opened another user's elicitation link; refused as possible phishing")
		p, err := s.browser.Layout(c, v, "") // the page's heading (templates.titled)
		if err != nil {
			return nil, err
		}
		refused := templates.RefusedPage(p, templates.Refused{SignedInAs: v.Name(), SignOutAction: "/auth/logout", CSRF: p.CSRF})
		return nil, respond.Func(func(c echo.Context) error { return s.browser.Render(c, http.StatusForbidden, refused) })
	}
	tracing.Visited(ctx, e.ID, e.Trace)
	return e, nil
}

// slotOf returns the slot of e; for a slot removed from the configuration since, a stand-in
// that only names it (see unconfigured).
func (s *Pages) slotOf(e *flow.Elicitation) *slots.Slot {
	if slot, ok := s.opts.Slots.Lookup(e.Target); ok {
		return slot
	}
	return &slots.Slot{Name: e.Target, Label: e.Target}
}

// errSlotNotConfigured is the error page of a flow whose secret slot the configuration no
// longer has, in the reader's language.
func errSlotNotConfigured(ctx context.Context) error {
	return echo.NewHTTPError(http.StatusServiceUnavailable, locale.T(ctx, "error.slot_not_configured"))
}

// errProviderNotConfigured is the error page of a connection whose provider the
// configuration no longer has, in the reader's language.
func errProviderNotConfigured(ctx context.Context) error {
	return echo.NewHTTPError(http.StatusServiceUnavailable, locale.T(ctx, "error.provider_not_configured"))
}

// unconfigured returns the error page, in the language of ctx, for a running e whose secret
// slot or provider was removed from the configuration since it was created, and nil when it
// is still there. The pages ask before they change anything: such a flow cannot go on, and
// its user must not be led on or have a value refused by rules the server no longer has.
func (s *Pages) unconfigured(ctx context.Context, e *flow.Elicitation) error {
	if e.Kind == state.KindOAuth {
		if _, ok := s.opts.Providers.Lookup(e.Target); !ok {
			return errProviderNotConfigured(ctx)
		}
		return nil
	}
	if _, ok := s.opts.Slots.Lookup(e.Target); !ok {
		return errSlotNotConfigured(ctx)
	}
	return nil
}

// openElicitation is GET /e/{id}: the elicitation's own user opening the URL moves it to
// in_progress and sees the consent page.
func (s *Pages) openElicitation(c echo.Context) error { return s.browser.Hinted(c, s.consentPage) }

func (s *Pages) consentPage(c echo.Context, hints bool) error {
	v, err := s.browser.PageVisitor(c, hints)
	if err != nil {
		return err
	}
	e, err := s.elicitationFor(c, v)
	if err != nil {
		return err
	}
	if !e.State.Terminal() {
		if err := s.unconfigured(c.Request().Context(), e); err != nil {
			return err
		}
		change, err := s.browser.Apply(c, v, e.ID, flow.BrowserOpen, state.ActorUser, "opened in the browser")
		if err != nil {
			return err
		}
		e = change.Elicitation
	}
	if e.State.Terminal() {
		return s.renderEnded(c, v, e, false)
	}
	if e.Kind == state.KindOAuth {
		return s.renderConnect(c, v, e)
	}
	p, err := s.browser.Layout(c, v, "") // the page's heading (templates.titled)
	if err != nil {
		return err
	}
	slot := s.slotOf(e)
	service, receives := s.requester(e)
	view := templates.Consent{
		ElicitationID: e.ID, ClientName: clientName(e.Client), ClientVersion: e.Client.Version,
		ServiceLabel: service, ServiceReceives: receives, Offline: e.Offline,
		Purpose: e.Purpose, SlotLabel: slot.Label, SlotDescription: slot.Description, SlotName: slot.Name,
		Replace: e.Replace, ExpiresAt: e.ExpiresAt, CSRF: p.CSRF,
		ContinueAction: "/e/" + e.ID + "/continue", DeclineAction: "/e/" + e.ID + "/decline",
		MoreTime: moreTimeOffer(e),
	}
	switch {
	case e.Replaced != nil:
		view.LockReason, view.Weak = e.Replaced.LockReason, e.Replaced.Weak
	case e.Replace: // a record written before urlflow kept how the stored one stood
		view.LockReason, view.Weak = s.storedStanding(c, e, slot)
	}
	return s.browser.Render(c, http.StatusOK, templates.ConsentPage(p, view))
}

// storedStanding says why the stored secret of e, which e replaces, should be replaced:
// the reason it is locked, or that it is weak for slot. A store that fails says nothing:
// the page still works without it.
func (s *Pages) storedStanding(c echo.Context, e *flow.Elicitation, slot *slots.Slot) (lockReason string, weak bool) {
	ctx := c.Request().Context()
	name := e.CredentialName()
	cred, err := s.opts.Credentials.Get(ctx, e.User, name)
	if err != nil {
		if !errors.Is(err, state.ErrNotFound) {
			s.log.WarnContext(ctx, "stored credential not read", "credential", name, "err", err)
		}
		return "", false
	}
	if cred.Locked() {
		return cred.LockReason, false
	}
	secret, err := s.opts.Vault.Open(e.User, name, cred.Sealed)
	return "", err == nil && slot.Weak(secret)
}

// clientName is how the client named itself (self-reported), or empty.
func clientName(ci state.ClientInfo) string {
	if ci.Title != "" {
		return ci.Title
	}
	return ci.Name
}

// runningPost is the common start of the form posts: the signed-in owner, a valid CSRF
// token, and a flow in one of the states the form applies to (in_progress when none are
// given). A post for a flow that has ended is recorded as late and answered with a page
// that says nothing changed; a post for a flow in another running state goes back to the
// consent page: those answers are its error (package respond).
func (s *Pages) runningPost(c echo.Context, hints bool, applies ...flow.State) (*browser.Visitor, *flow.Elicitation, error) {
	if len(applies) == 0 {
		applies = []flow.State{flow.InProgress}
	}
	v, err := s.browser.PageVisitor(c, hints)
	if err != nil {
		return nil, nil, err
	}
	if !v.SignedIn {
		_, err := s.elicitationFor(c, v)
		return nil, nil, err
	}
	if err := s.browser.CheckCSRF(c, v); err != nil {
		return nil, nil, err
	}
	e, err := s.elicitationFor(c, v)
	if err != nil {
		return nil, nil, err
	}
	if e.State.Terminal() {
		return nil, nil, s.latePost(c, v, e)
	}
	if !slices.Contains(applies, e.State) {
		return nil, nil, respond.Redirect("/e/" + e.ID)
	}
	return v, e, nil
}

// latePost records a post for e, which has ended, and returns the answer: the page of the
// ended flow, which says that nothing changed.
func (s *Pages) latePost(c echo.Context, v *browser.Visitor, e *flow.Elicitation) error {
	change, err := s.browser.Apply(c, v, e.ID, flow.LatePost, state.ActorUser,
		"form posted after the flow ended: "+c.Request().URL.Path)
	if err != nil {
		return err
	}
	return respond.Func(func(c echo.Context) error { return s.renderEnded(c, v, change.Elicitation, true) })
}

// continueElicitation is POST /e/{id}/continue: the user agreed on the consent page.
func (s *Pages) continueElicitation(c echo.Context) error {
	return s.browser.Hinted(c, func(c echo.Context, hints bool) error {
		return s.continuePost(c, hints)
	})
}

func (s *Pages) continuePost(c echo.Context, hints bool) error {
	v, e, err := s.runningPost(c, hints)
	if err != nil {
		return err
	}
	if e.Kind != state.KindSecret {
		return c.Redirect(http.StatusSeeOther, "/e/"+e.ID)
	}
	if err := s.unconfigured(c.Request().Context(), e); err != nil {
		return err
	}
	if _, err := s.browser.Apply(c, v, e.ID, flow.PageContinue, state.ActorUser, "continued on the consent page"); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/e/"+e.ID+"/secret")
}

// moreTimeStep is how much later a request for more time moves the deadline.
const moreTimeStep = 10 * time.Minute

// moreTimeOffer is what the pages of e offer of more time (flow.Elicitation.CanExtend).
func moreTimeOffer(e *flow.Elicitation) templates.MoreTime {
	if ok, why := e.CanExtend(); !ok {
		return templates.MoreTime{Why: why}
	}
	return templates.MoreTime{Action: "/e/" + e.ID + "/more-time", Amount: moreTimeStep}
}

// moreTime is POST /e/{id}/more-time: the user asks for more time on the consent page or
// the form. The deadline moves moreTimeStep later where it can (flow.Store.MoreTime, which
// records it in the history), and the user goes back to the page they were on; a deadline
// that cannot move changes nothing, and that page says why.
func (s *Pages) moreTime(c echo.Context) error {
	return s.browser.Hinted(c, func(c echo.Context, hints bool) error {
		_, e, err := s.runningPost(c, hints, flow.Pending, flow.Consented, flow.InProgress)
		if err != nil {
			return err
		}
		back := "/e/" + e.ID
		if e.Kind == state.KindSecret && e.State == flow.InProgress && c.FormValue("from") == "form" {
			back += "/secret"
		}
		_, err = s.opts.Flows.MoreTime(c.Request().Context(), e.ID, moreTimeStep, state.ActorUser)
		if err != nil && !errors.Is(err, flow.ErrConflict) {
			return err
		}
		return c.Redirect(http.StatusSeeOther, back)
	})
}

// home is GET /: a short page saying what this server is.
func (s *Pages) home(c echo.Context) error {
	v, err := s.browser.Visitor(c)
	if err != nil {
		return err
	}
	p, err := s.browser.Layout(c, v, "") // the product's name (templates.titled)
	if err != nil {
		return err
	}
	return s.browser.Render(c, http.StatusOK, templates.HomePage(p))
}

// requester is what the pages show of the service that asked for e: its label (empty for
// urlflow's own tools) and whether it may receive what the user provides (release, as it
// stood when the service asked: the credential keeps that promise).
func (s *Pages) requester(e *flow.Elicitation) (label string, receives bool) {
	if e.Service == "" {
		return "", false
	}
	if svc, ok := s.opts.Services.Lookup(e.Service); ok {
		return svc.Label, e.Releasable
	}
	return e.Service, e.Releasable
}
