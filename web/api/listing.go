package api

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/urlflow/urlflow/oauth/identity"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/flow"
)

// apiList is GET /api/v1/elicitations: a page of the elicitations the caller may see
// (every one for an operator, a service's own, a user's own) that the query's filters
// select, oldest first.
func (s *API) apiList(c echo.Context) error {
	who, _ := identity.CallerFrom(c.Request().Context())
	q, err := ListQuery(c.QueryParams(), who)
	if err != nil {
		return err
	}
	page, err := s.opts.Flows.Index().List(c.Request().Context(), q)
	if errors.Is(err, flow.ErrBadCursor) {
		return refuse(http.StatusBadRequest, "cursor: not one this listing handed out; start again without it")
	}
	if err != nil {
		return err
	}
	now := s.opts.Flows.Now()
	answer := flow.Listing{Elicitations: []flow.Listed{}, Next: page.Next}
	for _, e := range page.Elicitations {
		answer.Elicitations = append(answer.Elicitations, s.opts.Flows.Index().Listed(e, flow.ElicitationURL(s.opts.PublicURL, e.ID), now, who.Operator))
	}
	return c.JSON(http.StatusOK, answer)
}

// apiSummary is GET /api/v1/elicitations/summary: the running elicitations the caller may
// see by state, the notifications owed, how many are stuck, and the thresholds.
func (s *API) apiSummary(c echo.Context) error {
	who, _ := identity.CallerFrom(c.Request().Context())
	sum, err := s.opts.Flows.Index().Summarize(c.Request().Context(), scope(who))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, sum)
}

// scope is the filter that keeps to what who may see: everything for an operator, a
// service's own elicitations, a user's own.
func scope(who identity.Caller) flow.Filter {
	switch {
	case who.Operator:
		return flow.Filter{}
	case who.Service != "":
		return flow.Filter{Service: who.Service}
	}
	return flow.Filter{UserKey: who.Claims.User.Key()}
}

// ListQuery reads the filters, cursor and limit of a listing from the query params, within
// what who may see: the API's listing, and the operators' pages that show it. Parameters
// named in also are let through and not read. Its errors are the API's refusals, whose
// message says what is wrong.
func ListQuery(params url.Values, who identity.Caller, also ...string) (flow.ListQuery, error) {
	q := flow.ListQuery{Filter: scope(who), Cursor: params.Get("cursor")}
	for name := range params {
		if !slices.Contains(listParams, name) && !slices.Contains(also, name) {
			return q, refuse(http.StatusBadRequest, "%s: not a filter of this listing (want %s)", name, strings.Join(listParams, ", "))
		}
	}
	if err := readStates(params, &q); err != nil {
		return q, err
	}
	if err := readScope(params, who, &q); err != nil {
		return q, err
	}
	if q.Era = params.Get("era"); q.Era != "" && !slices.Contains(flow.Eras, q.Era) {
		return q, refuse(http.StatusBadRequest, "era: want one of %s", strings.Join(flow.Eras, ", "))
	}
	q.Target, q.Client, q.Replica = params.Get("target"), params.Get("client"), params.Get("replica")
	if v := params.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > flow.MaxListLimit {
			return q, refuse(http.StatusBadRequest, "limit: want a whole number from 1 to %d", flow.MaxListLimit)
		}
		q.Limit = n
	}
	return q, nil
}

// readStates reads the filters on where the flows stand: state, stuck, olderThan.
func readStates(params url.Values, q *flow.ListQuery) error {
	if v := params.Get("state"); v != "" {
		for _, name := range strings.Split(v, ",") {
			st := flow.State(strings.TrimSpace(name))
			if !st.Valid() {
				return refuse(http.StatusBadRequest, "state: %q is not a state", name)
			}
			q.States = append(q.States, st)
		}
	}
	switch v := params.Get("stuck"); v {
	case "", "false":
	case "true":
		q.Stuck = true
	default:
		return refuse(http.StatusBadRequest, "stuck: want true or false")
	}
	if v := params.Get("olderThan"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return refuse(http.StatusBadRequest, "olderThan: want a duration such as 10m or 2h")
		}
		q.OlderThan = d
	}
	return nil
}

// readScope reads the filters on whose the flows are, within what who may see: user,
// kind, service.
func readScope(params url.Values, who identity.Caller, q *flow.ListQuery) error {
	if v := params.Get("user"); v != "" {
		if !who.Operator {
			return refuse(http.StatusForbidden, "user: only operators list other users' elicitations")
		}
		q.Subject = v
	}
	switch k := state.Kind(params.Get("kind")); k {
	case "", state.KindSecret, state.KindOAuth:
		q.Kind = k
	default:
		return refuse(http.StatusBadRequest, "kind: want secret or oauth")
	}
	if v := params.Get("service"); v != "" {
		if q.Service != "" && v != q.Service {
			return refuse(http.StatusForbidden, "service: a service lists only its own elicitations")
		}
		q.Service = v
	}
	return nil
}

// listParams are the query parameters of GET /api/v1/elicitations.
var listParams = []string{"state", "stuck", "olderThan", "user", "kind", "target", "service", "client", "era", "replica", "cursor", "limit"}
