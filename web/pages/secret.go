package pages

import (
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/urlflow/urlflow/slots"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/credentials"
	"github.com/urlflow/urlflow/state/flow"
	"github.com/urlflow/urlflow/templates"
	"github.com/urlflow/urlflow/web/browser"
)

// secretForm is GET /e/{id}/secret.
func (s *Pages) secretForm(c echo.Context) error {
	v, err := s.browser.Visitor(c)
	if err != nil {
		return err
	}
	e, err := s.elicitationFor(c, v)
	if err != nil {
		return err
	}
	if !e.State.Terminal() {
		if err := s.unconfigured(e); err != nil {
			return err
		}
	}
	if e.State == flow.Failed {
		change, err := s.browser.Apply(c, v, e.ID, flow.BrowserOpen, state.ActorUser, "trying again after a failed check")
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

func (s *Pages) renderSecretForm(c echo.Context, v *browser.Visitor, e *flow.Elicitation, status int, problem string) error {
	slot := s.slotOf(e)
	p, err := s.browser.Layout(c, v, "Enter your "+slot.Label)
	if err != nil {
		return err
	}
	return s.browser.Render(c, status, templates.SecretFormPage(p, templates.SecretForm{
		ElicitationID: e.ID, SlotLabel: slot.Label, SlotDescription: slot.Description,
		Rules: slot.Rules(), Error: problem, ExpiresAt: e.ExpiresAt, CSRF: p.CSRF,
		Action: "/e/" + e.ID + "/secret", DeclineAction: "/e/" + e.ID + "/decline",
	}))
}

// submitSecret is POST /e/{id}/secret: validate, seal, and store the secret in the same
// atomic step that completes the elicitation. A refused value is never shown again and
// stores nothing; a post that lost a race with the end of the flow changes nothing.
func (s *Pages) submitSecret(c echo.Context) error { return s.browser.Hinted(c, s.secretPost) }

func (s *Pages) secretPost(c echo.Context, hints bool) error {
	v, e, err := s.runningPost(c, hints)
	if err != nil {
		return err
	}
	if e.Kind != state.KindSecret {
		return c.Redirect(http.StatusSeeOther, "/e/"+e.ID)
	}
	if err := s.unconfigured(e); err != nil {
		return err
	}
	if err := s.limits.Form(c, v.User); err != nil {
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
		if _, err := s.browser.Apply(c, v, e.ID, flow.InputRejected, state.ActorUser, invalid.Rule); err != nil {
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
func (s *Pages) complete(c echo.Context, v *browser.Visitor, e *flow.Elicitation, reason string, cred *credentials.Credential, title string, done templates.Done) error {
	cred.Releasable = e.Releasable // what the pages told the user
	done.ServiceLabel, done.ServiceReceives = s.requester(e)
	change, err := s.browser.Apply(c, v, e.ID, flow.Verified, state.ActorUser, reason, flow.WithCredential(cred))
	if err != nil && !errors.Is(err, flow.ErrImpossible) {
		return err
	}
	if !change.Changed() || change.To != flow.Complete {
		return s.renderEnded(c, v, change.Elicitation, true)
	}
	p, err := s.browser.Layout(c, v, title)
	if err != nil {
		return err
	}
	return s.browser.Render(c, http.StatusOK, templates.DonePage(p, done))
}

// verificationFailed records that the slot's API refused the secret (the flow becomes
// failed; nothing is stored) and tells the user, who may try again until the deadline.
func (s *Pages) verificationFailed(c echo.Context, v *browser.Visitor, e *flow.Elicitation, slot *slots.Slot, checkErr error) error {
	return s.failed(c, v, e, templates.Failed{SlotLabel: slot.Label, Reason: checkErr.Error(),
		TryAgainURL: "/e/" + e.ID + "/secret"}, "verification failed: "+checkErr.Error())
}

// failed moves e to failed for reason and renders view, which says what happened and
// where to try again.
func (s *Pages) failed(c echo.Context, v *browser.Visitor, e *flow.Elicitation, view templates.Failed, reason string) error {
	change, err := s.browser.Apply(c, v, e.ID, flow.VerifyFailed, state.ActorSystem, reason)
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
	p, err := s.browser.Layout(c, v, title)
	if err != nil {
		return err
	}
	view.DeclineAction, view.CSRF, view.ExpiresAt = "/e/"+e.ID+"/decline", p.CSRF, e.ExpiresAt
	return s.browser.Render(c, http.StatusUnprocessableEntity, templates.FailedPage(p, view))
}
