package pages

import (
	"net/http"

	"github.com/labstack/echo/v4"
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
	p, err := s.browser.Layout(c, v, heading)
	if err != nil {
		return err
	}
	return s.browser.Render(c, status, templates.EndedPage(p, templates.Ended{
		State: string(e.State), Heading: heading, Message: message, NothingChanged: nothingChanged,
	}))
}
