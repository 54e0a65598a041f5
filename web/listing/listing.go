// Package listing reads the query of a listing of flows, as the JSON API and the
// operators' pages take it: the filters, the cursor and the limit, within what the caller
// may see (everything for an operator, a service's own flows, a user's own).
package listing

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urlflow/urlflow/oauth/identity"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/flow"
	"github.com/urlflow/urlflow/web/respond"
)

// Scope is the filter that keeps to what who may see: everything for an operator, a
// service's own elicitations, a user's own.
func Scope(who identity.Caller) flow.Filter {
	switch {
	case who.Operator:
		return flow.Filter{}
	case who.Service != "":
		return flow.Filter{Service: who.Service}
	}
	return flow.Filter{UserKey: who.Claims.User.Key()}
}

// Query reads the filters, cursor and limit of a listing from the query params, within
// what who may see: the API's listing, and the operators' pages that show it. Parameters
// named in also are let through and not read. Its errors are the API's refusals, whose
// message says what is wrong.
func Query(params url.Values, who identity.Caller, also ...string) (flow.ListQuery, error) {
	q := flow.ListQuery{Filter: Scope(who), Cursor: params.Get("cursor")}
	for name := range params {
		if !slices.Contains(listParams, name) && !slices.Contains(also, name) {
			return q, respond.Refuse(http.StatusBadRequest, "%s: not a filter of this listing (want %s)", name, strings.Join(listParams, ", "))
		}
	}
	if err := readStates(params, &q); err != nil {
		return q, err
	}
	if err := readScope(params, who, &q); err != nil {
		return q, err
	}
	if q.Era = params.Get("era"); q.Era != "" && !slices.Contains(flow.Eras, q.Era) {
		return q, respond.Refuse(http.StatusBadRequest, "era: want one of %s", strings.Join(flow.Eras, ", "))
	}
	q.Target, q.Client, q.Replica = params.Get("target"), params.Get("client"), params.Get("replica")
	if v := params.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > flow.MaxListLimit {
			return q, respond.Refuse(http.StatusBadRequest, "limit: want a whole number from 1 to %d", flow.MaxListLimit)
		}
		q.Limit = n
	}
	return q, nil
}

// readStates reads the filters on where the flows stand: state, stuck, owed, olderThan.
func readStates(params url.Values, q *flow.ListQuery) error {
	if v := params.Get("state"); v != "" {
		for _, name := range strings.Split(v, ",") {
			st := flow.State(strings.TrimSpace(name))
			if !st.Valid() {
				return respond.Refuse(http.StatusBadRequest, "state: %q is not a state", name)
			}
			q.States = append(q.States, st)
		}
	}
	for _, f := range []struct {
		name string
		to   *bool
	}{{"stuck", &q.Stuck}, {"owed", &q.Owed}} {
		name, to := f.name, f.to
		switch v := params.Get(name); v {
		case "", "false":
		case "true":
			*to = true
		default:
			return respond.Refuse(http.StatusBadRequest, "%s: want true or false", name)
		}
	}
	if v := params.Get("olderThan"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return respond.Refuse(http.StatusBadRequest, "olderThan: want a duration such as 10m or 2h")
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
			return respond.Refuse(http.StatusForbidden, "user: only operators list other users' elicitations")
		}
		q.Subject = v
	}
	switch k := state.Kind(params.Get("kind")); k {
	case "", state.KindSecret, state.KindOAuth:
		q.Kind = k
	default:
		return respond.Refuse(http.StatusBadRequest, "kind: want secret or oauth")
	}
	if v := params.Get("service"); v != "" {
		if q.Service != "" && v != q.Service {
			return respond.Refuse(http.StatusForbidden, "service: a service lists only its own elicitations")
		}
		q.Service = v
	}
	return nil
}

// listParams are the query parameters of a listing (GET /api/v1/elicitations).
var listParams = []string{"state", "stuck", "owed", "olderThan", "user", "kind", "target", "service", "client", "era", "replica", "cursor", "limit"}
