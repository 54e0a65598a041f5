package pages

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/urlflow/urlflow/internal/locale"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/flow"
	"github.com/urlflow/urlflow/templates"
	"github.com/urlflow/urlflow/web/browser"
)

// declineElicitation is POST /e/{id}/decline.
func (s *Pages) declineElicitation(c echo.Context) error {
	v, e, err := s.runningPost(c, false, flow.InProgress, flow.Failed)
	if err != nil {
		return err
	}
	change, err := s.browser.Apply(c, v, e.ID, flow.PageDecline, state.ActorUser, "declined on the page")
	if err != nil {
		return err
	}
	return s.renderEnded(c, v, change.Elicitation, !change.Changed())
}

// renderEnded renders the page of a flow that has ended. nothingChanged marks a request
// that arrived after the end (status 409).
func (s *Pages) renderEnded(c echo.Context, v *browser.Visitor, e *flow.Elicitation, nothingChanged bool) error {
	ctx := c.Request().Context()
	heading, message := endedWords(ctx, e, s.targetLabel(ctx, e))
	if heading == "" {
		return c.Redirect(http.StatusSeeOther, "/e/"+e.ID)
	}
	status := http.StatusOK
	if nothingChanged {
		status = http.StatusConflict
	}
	p, err := s.browser.Layout(c, v, heading)
	if err != nil {
		return err
	}
	return s.browser.Render(c, status, templates.EndedPage(p, templates.Ended{
		State: string(e.State), Heading: heading, Message: message, NothingChanged: nothingChanged,
	}))
}

// endedWords are the heading and the message of the page of ended flow e, whose target
// people call label, in the reader's language; none while e runs.
func endedWords(ctx context.Context, e *flow.Elicitation, label string) (heading, message string) {
	account := e.Kind == state.KindOAuth
	switch {
	case e.State == flow.Complete && account:
		return locale.T(ctx, "ended.done_heading"), locale.T(ctx, "ended.done_connected", "Label", label)
	case e.State == flow.Complete:
		return locale.T(ctx, "ended.done_heading"), locale.T(ctx, "ended.done_stored", "Label", label)
	case e.State == flow.Declined && account:
		return locale.T(ctx, "ended.declined_heading"), locale.T(ctx, "ended.declined_account")
	case e.State == flow.Declined:
		return locale.T(ctx, "ended.declined_heading"), locale.T(ctx, "ended.declined_secret")
	case e.State == flow.Cancelled && account:
		return locale.T(ctx, "ended.cancelled_heading"), locale.T(ctx, "ended.cancelled_account")
	case e.State == flow.Cancelled:
		return locale.T(ctx, "ended.cancelled_heading"), locale.T(ctx, "ended.cancelled_secret")
	}
	if e.State != flow.Expired {
		return "", ""
	}
	until := locale.From(ctx).Clock(e.ExpiresAt, time.Now(), false)
	if account {
		return locale.T(ctx, "ended.expired_heading"), locale.T(ctx, "ended.expired_account", "Time", until)
	}
	return locale.T(ctx, "ended.expired_heading"), locale.T(ctx, "ended.expired_secret", "Time", until)
}
