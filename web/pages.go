package web

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/a-h/templ"
	"github.com/gorilla/sessions"
	"github.com/labstack/echo/v4"

	"github.com/urlflow/urlflow/slots"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/browsersession"
	"github.com/urlflow/urlflow/state/credentials"
	"github.com/urlflow/urlflow/state/flow"
	"github.com/urlflow/urlflow/templates"
)

// visitor is the browser behind a page request.
type visitor struct {
	sess     *sessions.Session
	user     state.User
	signedIn bool
	// page is the elicitation the page is about, read with the session (visitor), and
	// pageErr why it was not.
	page    *flow.Elicitation
	pageErr error
	// hint is set when the session and page are what this replica read before, not read
	// for this request (pageVisitor): the session's data, which every write of the request
	// checks (Server.apply).
	hint []byte
}

// name is how the pages call the signed-in user.
func (v *visitor) name() string {
	if n, _ := v.sess.Values[valueName].(string); n != "" {
		return n
	}
	return v.user.Subject
}

// visitor returns the browser behind c. On a page about an elicitation (/e/{id}/…), a
// signed-in browser's session and the elicitation are read together: in one command, both
// living in the user's slot (browsersession.Key).
func (s *Server) visitor(c echo.Context) (*visitor, error) { return s.pageVisitor(c, false) }

// pageVisitor is visitor for a page that writes before it answers (each write through
// Server.apply): with hints, when this replica read or wrote the signed-in session and the
// running elicitation in the last two minutes, it starts from those copies without a
// round trip. Its write is then made only if the session still holds what was read and
// the record still reads as read (or, if the record changed, applies to the new one);
// a stale session makes the write fail with flow.ErrStale, and hinted starts the page
// again from Redis.
func (s *Server) pageVisitor(c echo.Context, hints bool) (*visitor, error) {
	var page *flow.Elicitation
	var pageErr error
	var hint []byte
	prefetched := false
	if id := c.Param("id"); flow.ValidID(id) {
		if sessID, ok := s.sessions.cookieID(c.Request()); ok && sessID != "" {
			var data []byte
			hinted := false
			if e, seen := s.opts.Flows.Seen(id); hints && seen && !e.State.Terminal() {
				if data, hinted = s.sessions.hint(sessID); hinted {
					page, hint = e, data
				}
			}
			if !hinted {
				page, pageErr = s.opts.Flows.Read(c.Request().Context(), id, flow.Along(browsersession.Key(sessID), &data))
				if pageErr != nil && !errors.Is(pageErr, state.ErrNotFound) {
					return nil, pageErr
				}
				s.sessions.remember(sessID, data)
			}
			c.SetRequest(withPrefetched(c.Request(), sessID, data))
			prefetched = true
		}
	}
	sess, err := s.sessions.Get(c.Request(), s.sessions.name)
	if err != nil {
		return nil, err
	}
	u, ok := sessionUser(sess)
	v := &visitor{sess: sess, user: u, signedIn: ok, hint: hint}
	if prefetched {
		v.page, v.pageErr = page, pageErr
		if page == nil && pageErr == nil {
			v.pageErr = state.ErrNotFound
		}
	}
	return v, nil
}

// apply records event ev on elicitation id for a page of visitor v: when v started from
// hints, only if v's session still holds what v read (otherwise flow.ErrStale).
func (s *Server) apply(c echo.Context, v *visitor, id string, ev flow.Event, actor state.Actor, reason string, opts ...flow.ApplyOption) (flow.Change, error) {
	if v.hint != nil {
		opts = append(opts, flow.IfStill(browsersession.Key(v.sess.ID), v.hint))
	}
	return s.opts.Flows.Apply(c.Request().Context(), id, ev, actor, reason, opts...)
}

// hinted runs page from hints (pageVisitor), and once more from Redis when a write it made
// on those hints found them stale: nothing was written or answered then.
func (s *Server) hinted(c echo.Context, page func(c echo.Context, hints bool) error) error {
	// The request as it came: the session the first run loaded stays with the request it
	// ran with (gorilla/sessions keeps it in the request's context).
	fresh := *c.Request()
	if err := page(c, true); !errors.Is(err, flow.ErrStale) {
		return err
	}
	c.SetRequest(&fresh)
	return page(c, false)
}

// csrfToken returns the CSRF token for v's forms, saving a new session first so that it
// has an ID to bind the token to.
func (s *Server) csrfToken(c echo.Context, v *visitor) (string, error) {
	if v.sess.ID == "" {
		if err := v.sess.Save(c.Request(), c.Response()); err != nil {
			return "", err
		}
	}
	return s.csrf.token(v.sess.ID), nil
}

var errBadCSRF = echo.NewHTTPError(http.StatusForbidden,
	"This form has expired or did not come from this page. Nothing was changed. Go back, reload the page and try again.")

func (s *Server) checkCSRF(c echo.Context, v *visitor) error {
	if !s.csrf.valid(v.sess.ID, c.FormValue("csrf")) {
		return errBadCSRF
	}
	return nil
}

// page returns the layout data for v.
func (s *Server) page(c echo.Context, v *visitor, title string) (templates.Page, error) {
	p := templates.Page{Title: title, Dev: s.opts.Dev != nil}
	if v != nil && v.signedIn {
		p.SignedInAs = v.name()
		token, err := s.csrfToken(c, v)
		if err != nil {
			return p, err
		}
		p.CSRF = token
	}
	return p, nil
}

func (s *Server) render(c echo.Context, status int, component templ.Component) error {
	return renderIn(c.Request().Context(), c, status, component)
}

func renderIn(ctx context.Context, c echo.Context, status int, component templ.Component) error {
	c.Response().Header().Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	c.Response().WriteHeader(status)
	return component.Render(ctx, c.Response())
}

// renderProblem renders the generic error page. It is the error handler's page, so it does
// not touch the session (which may be what failed), and it is written even when the
// request's context has ended: a body that did not arrive in time ends it, and the client
// may still read the answer.
func (s *Server) renderProblem(c echo.Context, status int, message string) {
	heading := map[int]string{
		http.StatusBadRequest:            "That request was not understood",
		http.StatusForbidden:             "That was refused",
		http.StatusNotFound:              "This link is not valid",
		http.StatusRequestTimeout:        "That took too long",
		http.StatusMisdirectedRequest:    "Wrong address for this server",
		http.StatusRequestEntityTooLarge: "That was too large",
		http.StatusTooManyRequests:       "Too many requests",
		http.StatusServiceUnavailable:    "urlflow is not available right now",
	}[status]
	if heading == "" {
		heading = "Something went wrong"
	}
	p := templates.Page{Title: heading, Dev: s.opts.Dev != nil}
	ctx := context.WithoutCancel(c.Request().Context())
	if err := renderIn(ctx, c, status, templates.ProblemPage(p, templates.Problem{Status: status, Heading: heading, Message: message})); err != nil {
		s.log.WarnContext(c.Request().Context(), "problem page not written", "err", err)
	}
}

var errNoSuchElicitation = echo.NewHTTPError(http.StatusNotFound,
	"This link does not lead to a request we know. It may be mistyped or too old. Nothing was changed.")

// elicitationFor loads elicitation id for v. When it cannot go on it answers the request
// itself and returns nil: a signed-out visitor goes to sign-in, an unknown ID gets the
// not-found page, and another user gets the refusal page, which is recorded as a possible
// phishing attempt and changes nothing.
func (s *Server) elicitationFor(c echo.Context, v *visitor) (*flow.Elicitation, error) {
	id := c.Param("id")
	if !v.signedIn {
		return nil, c.Redirect(http.StatusSeeOther, "/auth/login?next="+url.QueryEscape("/e/"+id))
	}
	ctx := c.Request().Context()
	e, err := v.page, v.pageErr
	if e == nil && err == nil { // not read with the session
		e, err = s.opts.Flows.Read(ctx, id)
	}
	if errors.Is(err, state.ErrNotFound) {
		return nil, errNoSuchElicitation
	}
	if err != nil {
		return nil, err
	}
	if e.User != v.user {
		reason := "refused: opened by " + v.user.String()
		if _, err := s.apply(c, v, e.ID, flow.OtherUserOpened, state.ActorOther, reason); err != nil {
			return nil, err
		}
		s.log.WarnContext(ctx, "elicitation opened by another user; refused as possible phishing",
			"elicitation_id", e.ID, "user", v.user.Key(), "owner", e.User.Key())
		s.opts.Counters.Add(ctx, "urlflow_phishing_refusals_total")
		s.refusedIdentity(c.Request(), v.user, e.ID, "opened another user's elicitation link; refused as possible phishing")
		p, err := s.page(c, v, "This link is not for you")
		if err != nil {
			return nil, err
		}
		return nil, s.render(c, http.StatusForbidden, templates.RefusedPage(p, templates.Refused{
			SignedInAs: v.name(), SignOutAction: "/auth/logout", CSRF: p.CSRF,
		}))
	}
	return e, nil
}

// slotOf returns the slot of e; for a slot removed from the configuration since, a stand-in
// that only names it (see unconfigured).
func (s *Server) slotOf(e *flow.Elicitation) *slots.Slot {
	if slot, ok := s.opts.Slots.Lookup(e.Target); ok {
		return slot
	}
	return &slots.Slot{Name: e.Target, Label: e.Target}
}

var (
	errSlotNotConfigured = echo.NewHTTPError(http.StatusServiceUnavailable,
		"This request is for a secret this server no longer has in its configuration. Nothing was changed.")
	errProviderNotConfigured = echo.NewHTTPError(http.StatusServiceUnavailable,
		"This request is for a provider this server no longer has in its configuration. Nothing was changed.")
)

// unconfigured returns the error page for a running e whose secret slot or provider was
// removed from the configuration since it was created, and nil when it is still there. The
// pages ask before they change anything: such a flow cannot go on, and its user must not be
// led on or have a value refused by rules the server no longer has.
func (s *Server) unconfigured(e *flow.Elicitation) error {
	if e.Kind == state.KindOAuth {
		if _, ok := s.opts.Providers.Lookup(e.Target); !ok {
			return errProviderNotConfigured
		}
		return nil
	}
	if _, ok := s.opts.Slots.Lookup(e.Target); !ok {
		return errSlotNotConfigured
	}
	return nil
}

// openElicitation is GET /e/{id}: the elicitation's own user opening the URL moves it to
// in_progress and sees the consent page.
func (s *Server) openElicitation(c echo.Context) error { return s.hinted(c, s.consentPage) }

func (s *Server) consentPage(c echo.Context, hints bool) error {
	v, err := s.pageVisitor(c, hints)
	if err != nil {
		return err
	}
	e, err := s.elicitationFor(c, v)
	if e == nil {
		return err
	}
	if !e.State.Terminal() {
		if err := s.unconfigured(e); err != nil {
			return err
		}
		change, err := s.apply(c, v, e.ID, flow.BrowserOpen, state.ActorUser, "opened in the browser")
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
	p, err := s.page(c, v, "A request for your "+s.slotOf(e).Label)
	if err != nil {
		return err
	}
	slot := s.slotOf(e)
	service, receives := s.requester(e)
	view := templates.Consent{
		ElicitationID: e.ID, ClientName: clientName(e.Client), ClientVersion: e.Client.Version,
		ServiceLabel: service, ServiceReceives: receives,
		Purpose: e.Purpose, SlotLabel: slot.Label, SlotDescription: slot.Description, SlotName: slot.Name,
		Replace: e.Replace, ExpiresAt: e.ExpiresAt, CSRF: p.CSRF,
		ContinueAction: "/e/" + e.ID + "/continue", DeclineAction: "/e/" + e.ID + "/decline",
	}
	switch {
	case e.Replaced != nil:
		view.LockReason, view.Weak = e.Replaced.LockReason, e.Replaced.Weak
	case e.Replace: // a record written before urlflow kept how the stored one stood
		view.LockReason, view.Weak = s.storedStanding(c, e, slot)
	}
	return s.render(c, http.StatusOK, templates.ConsentPage(p, view))
}

// storedStanding says why the stored secret of e, which e replaces, should be replaced:
// the reason it is locked, or that it is weak for slot. A store that fails says nothing:
// the page still works without it.
func (s *Server) storedStanding(c echo.Context, e *flow.Elicitation, slot *slots.Slot) (lockReason string, weak bool) {
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
// consent page. It returns nil when the request has been answered.
func (s *Server) runningPost(c echo.Context, hints bool, applies ...flow.State) (*visitor, *flow.Elicitation, error) {
	if len(applies) == 0 {
		applies = []flow.State{flow.InProgress}
	}
	v, err := s.pageVisitor(c, hints)
	if err != nil {
		return nil, nil, err
	}
	if !v.signedIn {
		_, err := s.elicitationFor(c, v)
		return nil, nil, err
	}
	if err := s.checkCSRF(c, v); err != nil {
		return nil, nil, err
	}
	e, err := s.elicitationFor(c, v)
	if e == nil {
		return nil, nil, err
	}
	if e.State.Terminal() {
		return nil, nil, s.latePost(c, v, e)
	}
	if !slices.Contains(applies, e.State) {
		return nil, nil, c.Redirect(http.StatusSeeOther, "/e/"+e.ID)
	}
	return v, e, nil
}

func (s *Server) latePost(c echo.Context, v *visitor, e *flow.Elicitation) error {
	change, err := s.apply(c, v, e.ID, flow.LatePost, state.ActorUser,
		"form posted after the flow ended: "+c.Request().URL.Path)
	if err != nil {
		return err
	}
	return s.renderEnded(c, v, change.Elicitation, true)
}

// continueElicitation is POST /e/{id}/continue: the user agreed on the consent page.
func (s *Server) continueElicitation(c echo.Context) error {
	return s.hinted(c, func(c echo.Context, hints bool) error {
		return s.continuePost(c, hints)
	})
}

func (s *Server) continuePost(c echo.Context, hints bool) error {
	v, e, err := s.runningPost(c, hints)
	if e == nil {
		return err
	}
	if e.Kind != state.KindSecret {
		return c.Redirect(http.StatusSeeOther, "/e/"+e.ID)
	}
	if err := s.unconfigured(e); err != nil {
		return err
	}
	if _, err := s.apply(c, v, e.ID, flow.PageContinue, state.ActorUser, "continued on the consent page"); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/e/"+e.ID+"/secret")
}

// secretForm is GET /e/{id}/secret.
func (s *Server) secretForm(c echo.Context) error {
	v, err := s.visitor(c)
	if err != nil {
		return err
	}
	e, err := s.elicitationFor(c, v)
	if e == nil {
		return err
	}
	if !e.State.Terminal() {
		if err := s.unconfigured(e); err != nil {
			return err
		}
	}
	if e.State == flow.Failed {
		change, err := s.apply(c, v, e.ID, flow.BrowserOpen, state.ActorUser, "trying again after a failed check")
		if err != nil {
			return err
		}
		e = change.Elicitation
	}
	if e.State.Terminal() {
		return s.renderEnded(c, v, e, false)
	}
	if e.State != flow.InProgress || e.Kind != state.KindSecret {
		return c.Redirect(http.StatusSeeOther, "/e/"+e.ID)
	}
	return s.renderSecretForm(c, v, e, http.StatusOK, "")
}

func (s *Server) renderSecretForm(c echo.Context, v *visitor, e *flow.Elicitation, status int, problem string) error {
	slot := s.slotOf(e)
	p, err := s.page(c, v, "Enter your "+slot.Label)
	if err != nil {
		return err
	}
	return s.render(c, status, templates.SecretFormPage(p, templates.SecretForm{
		ElicitationID: e.ID, SlotLabel: slot.Label, SlotDescription: slot.Description,
		Rules: slot.Rules(), Error: problem, ExpiresAt: e.ExpiresAt, CSRF: p.CSRF,
		Action: "/e/" + e.ID + "/secret", DeclineAction: "/e/" + e.ID + "/decline",
	}))
}

// submitSecret is POST /e/{id}/secret: validate, seal, and store the secret in the same
// atomic step that completes the elicitation. A refused value is never shown again and
// stores nothing; a post that lost a race with the end of the flow changes nothing.
func (s *Server) submitSecret(c echo.Context) error { return s.hinted(c, s.secretPost) }

func (s *Server) secretPost(c echo.Context, hints bool) error {
	v, e, err := s.runningPost(c, hints)
	if e == nil {
		return err
	}
	if e.Kind != state.KindSecret {
		return c.Redirect(http.StatusSeeOther, "/e/"+e.ID)
	}
	if err := s.unconfigured(e); err != nil {
		return err
	}
	if err := s.allowForm(c, v.user); err != nil {
		return err
	}
	ctx := c.Request().Context()
	slot := s.slotOf(e)
	secret := state.NewSecret(c.FormValue("secret"))
	if err := slot.Validate(secret); err != nil {
		var invalid *slots.InvalidValueError
		if !errors.As(err, &invalid) {
			return err
		}
		if _, err := s.apply(c, v, e.ID, flow.InputRejected, state.ActorUser, invalid.Rule); err != nil {
			return err
		}
		return s.renderSecretForm(c, v, e, http.StatusUnprocessableEntity, invalid.Rule)
	}
	reason := "secret received and validated"
	var verifiedAt *time.Time
	if slot.Verify != nil {
		if err := s.opts.Upstream.Check(ctx, slot.API, slot.Verify, secret); err != nil {
			return s.verificationFailed(c, v, e, slot, err)
		}
		now := s.opts.Flows.Now().UTC()
		verifiedAt, reason = &now, "secret received and verified with the API"
	}
	sealed, err := s.opts.Vault.Seal(e.User, e.CredentialName(), secret)
	if err != nil {
		return err
	}
	cred := &credentials.Credential{Name: e.CredentialName(), Kind: state.KindSecret, ElicitationID: e.ID,
		StoredAt: s.opts.Flows.Now().UTC(), VerifiedAt: verifiedAt, Sealed: sealed}
	return s.complete(c, v, e, reason, cred, "Stored", templates.Done{SlotLabel: slot.Label, ClientName: clientName(e.Client)})
}

// complete stores cred and completes e in one step, then shows the done page (titled
// title) with done, which names the service that asked, if any, and whether it may
// receive cred itself; when the flow ended another way in the meantime, nothing is stored
// and the page says how it ended.
func (s *Server) complete(c echo.Context, v *visitor, e *flow.Elicitation, reason string, cred *credentials.Credential, title string, done templates.Done) error {
	cred.Releasable = e.Releasable // what the pages told the user
	done.ServiceLabel, done.ServiceReceives = s.requester(e)
	change, err := s.apply(c, v, e.ID, flow.Verified, state.ActorUser, reason, flow.WithCredential(cred))
	if err != nil && !errors.Is(err, flow.ErrImpossible) {
		return err
	}
	if !change.Changed() || change.To != flow.Complete {
		return s.renderEnded(c, v, change.Elicitation, true)
	}
	p, err := s.page(c, v, title)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, templates.DonePage(p, done))
}

// verificationFailed records that the slot's API refused the secret (the flow becomes
// failed; nothing is stored) and tells the user, who may try again until the deadline.
func (s *Server) verificationFailed(c echo.Context, v *visitor, e *flow.Elicitation, slot *slots.Slot, checkErr error) error {
	return s.failed(c, v, e, templates.Failed{SlotLabel: slot.Label, Reason: checkErr.Error(),
		TryAgainURL: "/e/" + e.ID + "/secret"}, "verification failed: "+checkErr.Error())
}

// failed moves e to failed for reason and renders view, which says what happened and
// where to try again.
func (s *Server) failed(c echo.Context, v *visitor, e *flow.Elicitation, view templates.Failed, reason string) error {
	change, err := s.apply(c, v, e.ID, flow.VerifyFailed, state.ActorSystem, reason)
	if err != nil && !errors.Is(err, flow.ErrImpossible) {
		return err
	}
	if change.To != flow.Failed {
		return s.renderEnded(c, v, change.Elicitation, true)
	}
	title := ""
	if view.Connection {
		title = "Your " + view.SlotLabel + " was not connected"
	}
	p, err := s.page(c, v, title)
	if err != nil {
		return err
	}
	view.DeclineAction, view.CSRF, view.ExpiresAt = "/e/"+e.ID+"/decline", p.CSRF, e.ExpiresAt
	return s.render(c, http.StatusUnprocessableEntity, templates.FailedPage(p, view))
}

// declineElicitation is POST /e/{id}/decline.
func (s *Server) declineElicitation(c echo.Context) error {
	v, e, err := s.runningPost(c, false, flow.InProgress, flow.Failed)
	if e == nil {
		return err
	}
	change, err := s.apply(c, v, e.ID, flow.PageDecline, state.ActorUser, "declined on the page")
	if err != nil {
		return err
	}
	return s.renderEnded(c, v, change.Elicitation, !change.Changed())
}

// renderEnded renders the page of a flow that has ended. nothingChanged marks a request
// that arrived after the end (status 409).
func (s *Server) renderEnded(c echo.Context, v *visitor, e *flow.Elicitation, nothingChanged bool) error {
	label := s.targetLabel(e)
	nothing := "Nothing was stored."
	if e.Kind == state.KindOAuth {
		nothing = "Nothing was connected."
	}
	var heading, message string
	switch e.State {
	case flow.Complete:
		heading = "Already done"
		message = "Your " + label + " is stored. Return to your client and continue there; you can close this tab."
		if e.Kind == state.KindOAuth {
			message = "Your " + label + " is connected. Return to your client and continue there; you can close this tab."
		}
	case flow.Declined:
		heading = "You declined this request"
		message = nothing + " If that was a mistake, ask your assistant to try again; it will give you a new link."
	case flow.Cancelled:
		heading = "This request was cancelled"
		message = "It was cancelled from your client or by an operator. " + nothing + " Ask your assistant to start again if you still need it."
	case flow.Expired:
		heading = "This link has expired"
		message = "It was valid until " + e.ExpiresAt.UTC().Format("15:04 UTC on 2 January 2006") +
			". " + nothing + " Ask your assistant to start again; it will give you a new link."
	default:
		return c.Redirect(http.StatusSeeOther, "/e/"+e.ID)
	}
	status := http.StatusOK
	if nothingChanged {
		status = http.StatusConflict
	}
	p, err := s.page(c, v, heading)
	if err != nil {
		return err
	}
	return s.render(c, status, templates.EndedPage(p, templates.Ended{
		State: string(e.State), Heading: heading, Message: message, NothingChanged: nothingChanged,
	}))
}

// home is GET /: a short page saying what this server is.
func (s *Server) home(c echo.Context) error {
	v, err := s.visitor(c)
	if err != nil {
		return err
	}
	p, err := s.page(c, v, "urlflow")
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, templates.HomePage(p))
}
