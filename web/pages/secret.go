package pages

import (
	"cmp"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/urlflow/urlflow/internal/locale"
	"github.com/urlflow/urlflow/slots"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/credentials"
	"github.com/urlflow/urlflow/state/flow"
	"github.com/urlflow/urlflow/templates"
	"github.com/urlflow/urlflow/upstream"
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
		if err := s.unconfigured(c.Request().Context(), e); err != nil {
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
	return s.renderSecretForm(c, v, e, http.StatusOK, secretEntry{values: s.storedParameters(c, e)})
}

// secretEntry is what the secret form shows: after a refusal, the problem (in English,
// for the flow's history), as the reader's language says it (shown), and the parameter
// it is about ("" for the secret); and the values of the parameters of the slot's
// address, as entered or as stored with the secret it replaces.
type secretEntry struct {
	problem, shown, field string
	values                map[string]string
}

func (s *Pages) renderSecretForm(c echo.Context, v *browser.Visitor, e *flow.Elicitation, status int, entry secretEntry) error {
	slot := s.slotOf(e)
	ctx := c.Request().Context()
	p, err := s.browser.Layout(c, v, locale.T(ctx, "secret.title", "Secret", slot.Label))
	if err != nil {
		return err
	}
	form := templates.SecretForm{
		ElicitationID: e.ID, SlotLabel: slot.Label, SlotDescription: slot.Description,
		Rules: ruleWords(ctx, slot), Error: cmp.Or(entry.shown, entry.problem), ErrorField: entry.field, ExpiresAt: e.ExpiresAt, CSRF: p.CSRF,
		Action: "/e/" + e.ID + "/secret", DeclineAction: "/e/" + e.ID + "/decline", MoreTime: moreTimeOffer(e),
	}
	if form.MoreTime.Action != "" {
		form.MoreTime.Action += "?from=form"
	}
	if slot.API != nil && slot.API.Templated() {
		form.Address = slot.API.Template()
		for _, param := range slot.API.Parameters {
			form.Parameters = append(form.Parameters, templates.ParameterField{Name: param.Name, Label: param.Label,
				Description: param.Description, Hint: param.PatternHint, Value: entry.values[param.Name]})
		}
	}
	return s.browser.Render(c, status, templates.SecretFormPage(p, form))
}

// storedParameters returns the parameters stored with the secret that e replaces, to fill
// in the form; none when nothing is stored or its slot's address takes none.
func (s *Pages) storedParameters(c echo.Context, e *flow.Elicitation) map[string]string {
	if slot := s.slotOf(e); slot.API == nil || !slot.API.Templated() {
		return nil
	}
	cred, err := s.opts.Credentials.Get(c.Request().Context(), e.User, e.CredentialName())
	if err != nil {
		// Nothing stored, or not now: the fields start empty.
		return nil
	}
	return cred.Parameters
}

// enteredParameters reads the values of the parameters of slot's address from the form and
// binds its API to them with secret (slots.Slot.BindEntered).
func enteredParameters(c echo.Context, slot *slots.Slot, secret state.Secret) (map[string]string, *upstream.API, error) {
	if slot.API == nil || !slot.API.Templated() {
		return nil, slot.API, nil
	}
	values := map[string]string{}
	for _, param := range slot.API.Parameters {
		values[param.Name] = strings.TrimSpace(c.FormValue("param." + param.Name))
	}
	return slot.BindEntered(values, secret)
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
	if err := s.unconfigured(c.Request().Context(), e); err != nil {
		return err
	}
	if err := s.limits.Form(c, v.User); err != nil {
		return err
	}
	ctx := c.Request().Context()
	slot := s.slotOf(e)
	secret := state.NewSecret(c.FormValue("secret"))
	values, api, err := enteredParameters(c, slot, secret)
	if invalid := (*upstream.InvalidParameterError)(nil); errors.As(err, &invalid) {
		return s.rejectInput(c, v, e, secretEntry{problem: invalid.Rule, shown: brokenParameterWords(ctx, slot, invalid),
			field: invalid.Name, values: values})
	} else if err != nil {
		return err
	}
	if err := slot.Validate(secret); err != nil {
		var invalid *slots.InvalidValueError
		if !errors.As(err, &invalid) {
			return err
		}
		return s.rejectInput(c, v, e, secretEntry{problem: invalid.Rule, shown: brokenWords(ctx, slot, invalid), values: values})
	}
	reason := "secret received and validated"
	var verifiedAt *time.Time
	if slot.Verify != nil {
		if err := s.opts.Upstream.Check(ctx, api, slot.Verify, secret); err != nil {
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
		StoredAt: s.opts.Flows.Now().UTC(), VerifiedAt: verifiedAt, Sealed: sealed, Parameters: values}
	return s.complete(c, v, e, reason, cred, templates.Done{SlotLabel: slot.Label, ClientName: clientName(e.Client)})
}

// rejectInput records that what the user entered broke a rule (entry.problem, which never
// quotes it) and shows the form again, the secret's field empty.
func (s *Pages) rejectInput(c echo.Context, v *browser.Visitor, e *flow.Elicitation, entry secretEntry) error {
	if _, err := s.browser.Apply(c, v, e.ID, flow.InputRejected, state.ActorUser, entry.problem); err != nil {
		return err
	}
	return s.renderSecretForm(c, v, e, http.StatusUnprocessableEntity, entry)
}

// complete stores cred and completes e in one step, then shows the done page with done,
// which names the service that asked, if any, and whether it may receive cred itself; when
// the flow ended another way in the meantime, nothing is stored and the page says how it
// ended.
func (s *Pages) complete(c echo.Context, v *browser.Visitor, e *flow.Elicitation, reason string, cred *credentials.Credential, done templates.Done) error {
	cred.Releasable = e.Releasable // what the pages told the user
	done.ServiceLabel, done.ServiceReceives = s.requester(e)
	change, err := s.browser.Apply(c, v, e.ID, flow.Verified, state.ActorUser, reason, flow.WithCredential(cred))
	if err != nil && !errors.Is(err, flow.ErrImpossible) {
		return err
	}
	if !change.Changed() || change.To != flow.Complete {
		return s.renderEnded(c, v, change.Elicitation, true)
	}
	p, err := s.browser.Layout(c, v, "") // the page's heading (templates.titled)
	if err != nil {
		return err
	}
	return s.browser.Render(c, http.StatusOK, templates.DonePage(p, done))
}

// verificationFailed records that the slot's API refused the secret (the flow becomes
// failed; nothing is stored) and tells the user, who may try again until the deadline.
func (s *Pages) verificationFailed(c echo.Context, v *browser.Visitor, e *flow.Elicitation, slot *slots.Slot, checkErr error) error {
	return s.failed(c, v, e, templates.Failed{SlotLabel: slot.Label, Reason: checkWords(c.Request().Context(), checkErr),
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
	title := "" // the page's heading (templates.titled)
	if view.Connection {
		title = locale.T(c.Request().Context(), "failed.title_connection", "Secret", view.SlotLabel)
	}
	p, err := s.browser.Layout(c, v, title)
	if err != nil {
		return err
	}
	view.DeclineAction, view.CSRF, view.ExpiresAt = "/e/"+e.ID+"/decline", p.CSRF, e.ExpiresAt
	return s.browser.Render(c, http.StatusUnprocessableEntity, templates.FailedPage(p, view))
}
