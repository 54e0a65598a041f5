// Package admin serves the operators' pages under /admin: the flows that need attention,
// each flow's timeline, and retry and cancel with a reason and a confirmation step. An
// operator in the browser is a signed-in user whose subject Options.OperatorSubjects names,
// or whose ID token had the operators' claim when they signed in
// (identity.BrowserSignIn.RecogniseOperators); anyone else signed in gets 403, and nobody
// signed in is sent to sign in. The pages need no JavaScript.
//
// The one idea to hold: an operator acts through package recovery, as the API does, and
// every action carries its reason.
package admin

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/urlflow/urlflow/internal/buildinfo"
	"github.com/urlflow/urlflow/internal/locale"

	"github.com/labstack/echo/v4"

	"github.com/urlflow/urlflow/internal/ages"
	"github.com/urlflow/urlflow/internal/display"
	"github.com/urlflow/urlflow/oauth/identity"
	"github.com/urlflow/urlflow/recovery"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/flow"
	"github.com/urlflow/urlflow/templates"
	"github.com/urlflow/urlflow/web/browser"
	"github.com/urlflow/urlflow/web/listing"
	"github.com/urlflow/urlflow/web/respond"
)

// Options configure the Admin pages. All fields are required but OperatorSubjects.
type Options struct {
	// Browser knows who is at the browser.
	Browser *browser.Browser
	// Flows are listed and read; Recovery acts on them.
	Flows    *flow.Store
	Recovery *recovery.Recovery
	// OperatorSubjects are the subjects of the signed-in users who are operators, besides
	// those whose ID token had the operators' claim.
	OperatorSubjects []string
	// ReadOnlySubjects are the subjects of the signed-in users who may look at the
	// operators' pages and never act: the read-only role beside the full one.
	ReadOnlySubjects []string
	// Dev says that this is urlflow dev, where the development operator
	// (identity.DevOperator) may sign in.
	Dev bool
}

// Admin serves the operators' pages.
type Admin struct {
	opts    Options
	browser *browser.Browser
}

// New returns the Admin pages.
func New(opts Options) *Admin { return &Admin{opts: opts, browser: opts.Browser} }

// Mount adds the operators' pages to forms, the group of the pages that take forms.
func (s *Admin) Mount(forms *echo.Group) {
	forms.GET("/admin", s.adminPage)
	forms.GET("/admin/flows/:id", s.adminFlowPage)
	forms.POST("/admin/flows/:id/:action", s.adminAct)
}

// operatorVisitor returns the signed-in operator behind c, and whether the operator's role
// is read-only (ReadOnlySubjects); for anyone else its error is the answer (package
// respond): sign in first, or 403.
func (s *Admin) operatorVisitor(c echo.Context) (*browser.Visitor, bool, error) {
	v, err := s.browser.Visitor(c)
	if err != nil {
		return nil, false, err
	}
	if !v.SignedIn {
		return nil, false, respond.Redirect("/auth/login?next=" + url.QueryEscape(c.Request().URL.RequestURI()))
	}
	switch {
	case v.Operator() || slices.Contains(s.opts.OperatorSubjects, v.User.Subject):
		return v, false, nil
	case slices.Contains(s.opts.ReadOnlySubjects, v.User.Subject):
		return v, true, nil
	}
	s.browser.RefusedIdentity(c.Request(), v.User, "", "not an operator: refused the operators' pages")
	return nil, false, echo.NewHTTPError(http.StatusForbidden, s.notAnOperator(c.Request().Context(), v.User.Subject))
}

// notAnOperator tells a signed-in user who is not an operator, in their language, who is,
// and how to become one.
func (s *Admin) notAnOperator(ctx context.Context, subject string) string {
	if s.opts.Dev {
		return locale.T(ctx, "error.not_an_operator_dev", "Subject", subject, "Operator", identity.DevOperator)
	}
	return locale.T(ctx, "error.not_an_operator", "Subject", subject)
}

// operatorAs is the history's and the audit trail's name for operator v.
func operatorAs(v *browser.Visitor) identity.Caller {
	return identity.Caller{Operator: true, OperatorAs: identity.Operator{Name: "browser " + v.User.Subject}}
}

// adminPage is GET /admin.
func (s *Admin) adminPage(c echo.Context) error {
	v, _, err := s.operatorVisitor(c)
	if err != nil {
		return err
	}
	sum, stuck, err := s.opts.Flows.Index().Overview(c.Request().Context(), stuckShown)
	if err != nil {
		return err
	}
	view := templates.Admin{Notice: wordsOf(c.Request().Context(), c.QueryParam("done")).done, Counts: s.counts(c.Request().Context(), sum),
		Stuck: s.adminRows(stuck)}
	for _, n := range sum.Stuck {
		view.StuckTotal += n
	}
	for _, st := range flow.States {
		view.States = append(view.States, string(st))
	}
	if err := s.listPage(c, v, &view); err != nil {
		return err
	}
	p, err := s.layout(c, v, "") // the page's heading (templates.titled)
	if err != nil {
		return err
	}
	return s.browser.Render(c, http.StatusOK, templates.AdminPage(p, view))
}

// counts are the rows of the overview's table: each running state, then the owed
// notifications, with their stuck counts and the filtered lists they link to.
func (s *Admin) counts(ctx context.Context, sum flow.Summary) []templates.AdminCount {
	var counts []templates.AdminCount
	for _, st := range flow.States {
		if st.Terminal() {
			continue
		}
		after, _ := s.opts.Flows.Index().StuckAfter().For(st)
		counts = append(counts, templates.AdminCount{Label: string(st), List: "state=" + string(st),
			StuckList: "stuck=true&state=" + string(st), Running: sum.Running[st], Stuck: sum.Stuck[flow.Stuck(st)], After: ages.Of(after)})
	}
	return append(counts, templates.AdminCount{Label: locale.T(ctx, "admin.owed_count"), List: "owed=true", StuckList: "stuck=true&owed=true",
		Running: sum.OwedNotifications, Stuck: sum.Stuck[flow.StuckNotification], After: ages.Of(s.opts.Flows.Index().StuckAfter().Notification)})
}

// listPage fills view with the page of flows that the request's filters and cursor select
// (the API's, read from the same query parameters), its total when counted, and the links
// to the pages around it. A filter or cursor that is wrong is said on the page.
func (s *Admin) listPage(c echo.Context, v *browser.Visitor, view *templates.Admin) error {
	view.Filter = templates.AdminFilter{State: c.QueryParam("state"), User: c.QueryParam("user"),
		OlderThan: c.QueryParam("olderThan"), Stuck: c.QueryParam("stuck") == "true", Owed: c.QueryParam("owed") == "true"}
	q, err := listing.Query(c.QueryParams(), operatorAs(v), "done")
	var page flow.Page
	if err == nil {
		page, err = s.opts.Flows.Index().List(c.Request().Context(), q)
	}
	var he *echo.HTTPError
	switch {
	case errors.As(err, &he):
		view.Error = he.Message.(string)
	case errors.Is(err, flow.ErrBadCursor):
		view.Error = locale.T(c.Request().Context(), "admin.bad_cursor")
	case err != nil:
		return err
	}
	view.Rows = s.adminRows(page.Elicitations)
	if page.Counted {
		view.Total = &page.Total
	}
	pageURL := func(cursor string) string {
		q := c.Request().URL.Query() // a copy: echo's QueryParams is the request's own, read again below
		q.Del("done")
		if q.Del("cursor"); cursor != "" {
			q.Set("cursor", cursor)
		}
		return "/admin?" + q.Encode() + "#flows"
	}
	if page.Next != "" {
		view.NextURL = pageURL(page.Next)
	}
	if page.Prev != "" {
		view.PrevURL = pageURL(page.Prev)
	}
	if c.QueryParam("cursor") != "" {
		view.FirstURL = pageURL("")
	}
	return nil
}

// stuckShown is how many of the stuck flows the top of /admin shows, the oldest; a link
// lists them all, page by page.
const stuckShown = 10

// layout is the frame of an operator's page: the end users' layout, with the version of
// urlflow in its footer (operators only: it tells others what to attack).
func (s *Admin) layout(c echo.Context, v *browser.Visitor, title string) (templates.Page, error) {
	p, err := s.browser.Layout(c, v, title)
	p.Version = buildinfo.Get().Short()
	return p, err
}

func (s *Admin) adminRows(es []*flow.Elicitation) []templates.AdminRow {
	now := s.opts.Flows.Now()
	rows := make([]templates.AdminRow, 0, len(es))
	for _, e := range es {
		rows = append(rows, templates.AdminRow{ID: e.ID, State: string(e.State), Stuck: string(s.opts.Flows.Index().StuckAfter().Check(e, now)),
			User: e.User.Subject, Target: e.Target, Service: e.Service, Client: e.Client.Name, CreatedAt: e.CreatedAt, UpdatedAt: e.UpdatedAt})
	}
	return rows
}

// adminAction is what an operator can do to a flow from its page.
type adminAction struct {
	// name is its path segment (/admin/flows/{id}/{name}).
	name string
	// applies reports whether the action applies to e now.
	applies func(e *flow.Elicitation) bool
}

var adminActions = []adminAction{
	{"cancel", func(e *flow.Elicitation) bool { return !e.State.Terminal() }},
	{"resend", func(e *flow.Elicitation) bool {
		return e.State.Terminal() && e.SessionID != "" && e.Delivery.SessionEndedAt == nil
	}},
	{"retry", func(e *flow.Elicitation) bool {
		return e.State.Terminal() && e.State != flow.Complete && e.RetriedBy == ""
	}},
}

// actionWords are the texts of an action in the reader's language: its label, what it
// does, the question that confirms it, the answer that takes it, and the notice of the
// page after it (done).
type actionWords struct {
	label, explain, question, yes, done string
}

// wordsOf returns the texts of the action named name in the language of ctx, or none for
// a name of no action.
func wordsOf(ctx context.Context, name string) actionWords {
	switch name {
	case "cancel":
		return actionWords{locale.T(ctx, "admin.cancel"), locale.T(ctx, "admin.cancel_explain"), locale.T(ctx, "admin.cancel_question"),
			locale.T(ctx, "admin.cancel_yes"), locale.T(ctx, "admin.cancel_done")}
	case "resend":
		return actionWords{locale.T(ctx, "admin.resend"), locale.T(ctx, "admin.resend_explain"), locale.T(ctx, "admin.resend_question"),
			locale.T(ctx, "admin.resend_yes"), locale.T(ctx, "admin.resend_done")}
	case "retry":
		return actionWords{locale.T(ctx, "admin.retry"), locale.T(ctx, "admin.retry_explain"), locale.T(ctx, "admin.retry_question"),
			locale.T(ctx, "admin.retry_yes"), locale.T(ctx, "admin.retry_done")}
	}
	return actionWords{}
}

// adminFlow reads the flow named in the path, or answers 404.
func (s *Admin) adminFlow(c echo.Context) (*flow.Elicitation, error) {
	e, err := s.opts.Flows.Read(c.Request().Context(), c.Param("id"))
	if errors.Is(err, state.ErrNotFound) {
		return nil, echo.NewHTTPError(http.StatusNotFound, locale.T(c.Request().Context(), "error.no_such_flow"))
	}
	return e, err
}

// adminFlowPage is GET /admin/flows/{id}.
func (s *Admin) adminFlowPage(c echo.Context) error {
	v, readOnly, err := s.operatorVisitor(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	e, err := s.adminFlow(c)
	if err != nil {
		return err
	}
	history, err := s.opts.Flows.History(ctx, e.ID)
	if err != nil {
		return err
	}
	p, err := s.layout(c, v, locale.T(c.Request().Context(), "admin.flow_of", "User", e.User.Subject))
	if err != nil {
		return err
	}
	now := s.opts.Flows.Now()
	view := templates.AdminFlow{ID: e.ID, State: string(e.State), Stuck: string(s.opts.Flows.Index().StuckAfter().Check(e, now)),
		Kind: string(e.Kind), Target: e.Target, Service: e.Service, User: e.User.String(), Client: e.Client.Name, Era: e.Era(),
		Replica: e.Replica, CreatedAt: e.CreatedAt, UpdatedAt: e.UpdatedAt, ExpiresAt: e.ExpiresAt,
		Delivery: e.Delivery.Describe(now), RetryOf: e.RetryOf, RetriedBy: e.RetriedBy, CSRF: p.CSRF,
		Notice: wordsOf(c.Request().Context(), c.QueryParam("done")).done}
	for _, h := range history {
		view.History = append(view.History, templates.AdminEntry{At: h.At, Event: string(h.Event), Actor: string(h.Actor), By: h.By,
			From: string(h.From), To: string(h.To), Reason: h.Reason, Count: h.Count})
	}
	for _, a := range adminActions {
		if a.applies(e) && !readOnly {
			w := wordsOf(c.Request().Context(), a.name)
			view.Actions = append(view.Actions, templates.AdminAction{Name: a.name, Label: w.label, Explain: w.explain})
		}
	}
	if readOnly {
		view.NotOffered = append(view.NotOffered, locale.T(ctx, "admin.read_only"))
	}
	if e.State.Terminal() && e.SessionID != "" && e.Delivery.SessionEndedAt != nil {
		// Why the session ended is the MCP surface's reason, in English (the history's too).
		view.NotOffered = append(view.NotOffered, locale.T(ctx, "admin.session_ended", "Why", e.Delivery.SessionEnded))
	}
	return s.browser.Render(c, http.StatusOK, templates.AdminFlowPage(p, view))
}

// adminAct is POST /admin/flows/{id}/{action}: with a reason, it asks to confirm; with
// confirm=yes, it acts, records the operator and the reason, and shows the flow.
func (s *Admin) adminAct(c echo.Context) error {
	v, readOnly, err := s.operatorVisitor(c)
	if err != nil {
		return err
	}
	if err := s.browser.CheckCSRF(c, v); err != nil {
		return err
	}
	if readOnly {
		s.browser.RefusedIdentity(c.Request(), v.User, "", "a read-only operator may not "+c.Param("action")+": refused")
		return echo.NewHTTPError(http.StatusForbidden, locale.T(c.Request().Context(), "error.read_only"))
	}
	ctx := c.Request().Context()
	i := slices.IndexFunc(adminActions, func(a adminAction) bool { return a.name == c.Param("action") })
	if i < 0 {
		return echo.NewHTTPError(http.StatusNotFound, locale.T(ctx, "error.no_such_action"))
	}
	action := adminActions[i]
	words := wordsOf(ctx, action.name)
	e, err := s.adminFlow(c)
	if err != nil {
		return err
	}
	reason := display.Clean(c.FormValue("reason"), recovery.ReasonLimit)
	if strings.TrimSpace(reason) == "" {
		return echo.NewHTTPError(http.StatusBadRequest, locale.T(ctx, "error.reason_required"))
	}
	if !action.applies(e) {
		return echo.NewHTTPError(http.StatusConflict, locale.T(ctx, "admin.no_longer_applies", "State", string(e.State), "Action", words.label))
	}
	if c.FormValue("confirm") != "yes" {
		p, err := s.layout(c, v, locale.T(ctx, "admin.confirm"))
		if err != nil {
			return err
		}
		return s.browser.Render(c, http.StatusOK, templates.AdminConfirmPage(p, templates.AdminConfirm{ID: e.ID, Action: action.name,
			Question: words.question, Yes: words.yes, Explain: words.explain, Reason: reason, CSRF: p.CSRF}))
	}
	act := flow.Act{Actor: state.ActorOperator, By: operatorAs(v).OperatorAs.Name, Reason: reason}
	target := e.ID
	switch action.name {
	case "cancel":
		_, err = s.opts.Recovery.Cancel(ctx, e, act)
	case "resend":
		_, err = s.opts.Recovery.Resend(ctx, e, act)
	case "retry":
		var next *flow.Elicitation
		if next, err = s.opts.Recovery.Retry(ctx, e, act); err == nil {
			target = next.ID
		}
	}
	var conflict *recovery.Conflict
	if errors.As(err, &conflict) {
		// The conflict's reason is recovery's, in English (the API gives it too).
		return echo.NewHTTPError(http.StatusConflict, locale.T(ctx, "error.action_conflict", "Why", display.Capitalized(conflict.Why)))
	}
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/admin/flows/"+target+"?done="+action.name)
}
