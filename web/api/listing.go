package api

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/urlflow/urlflow/oauth/identity"
	"github.com/urlflow/urlflow/state/flow"
	"github.com/urlflow/urlflow/web/listing"
	"github.com/urlflow/urlflow/web/respond"
)

// apiList is GET /api/v1/elicitations: a page of the elicitations the caller may see
// (every one for an operator, a service's own, a user's own) that the query's filters
// select, oldest first.
func (s *API) apiList(c echo.Context) error {
	who, _ := identity.CallerFrom(c.Request().Context())
	q, err := listing.Query(c.QueryParams(), who)
	if err != nil {
		return err
	}
	page, err := s.opts.Flows.Index().List(c.Request().Context(), q)
	if errors.Is(err, flow.ErrBadCursor) {
		return respond.Refuse(http.StatusBadRequest, "cursor: not one this listing handed out; start again without it")
	}
	if err != nil {
		return err
	}
	now := s.opts.Flows.Now()
	answer := flow.Listing{Elicitations: []flow.Listed{}, Next: page.Next, Prev: page.Prev}
	if page.Counted {
		answer.Total = &page.Total
	}
	for _, e := range page.Elicitations {
		l := s.opts.Flows.Index().Listed(e, s.opts.UserRefs, flow.ElicitationURL(s.opts.PublicURL, e.ID), now, who.Operator)
		withoutServiceData(who, &l.View)
		answer.Elicitations = append(answer.Elicitations, l)
	}
	return c.JSON(http.StatusOK, answer)
}

// apiSummary is GET /api/v1/elicitations/summary: the running elicitations the caller may
// see by state, the notifications owed, how many are stuck, and the thresholds.
func (s *API) apiSummary(c echo.Context) error {
	who, _ := identity.CallerFrom(c.Request().Context())
	sum, err := s.opts.Flows.Index().Summarize(c.Request().Context(), listing.Scope(who))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, sum)
}
