package pages

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"

	"github.com/urlflow/urlflow/internal/locale"
	"github.com/urlflow/urlflow/oauth/providers"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/credentials"
	"github.com/urlflow/urlflow/templates"
)

// The connections page (/connections) shows a signed-in user what urlflow holds for them,
// by who uses it (urlflow's own tools, then each delegating service), and removes any of
// it: a secret is deleted, an account is revoked at its provider where it can be and its
// tokens deleted. What list_connections and disconnect do, for the user's own eyes.

// connectionsPage is GET /connections.
func (s *Pages) connectionsPage(c echo.Context) error {
	return s.showConnections(c, "")
}

// showConnections renders the page for the signed-in visitor, with notice.
func (s *Pages) showConnections(c echo.Context, notice string) error {
	v, err := s.browser.Visitor(c)
	if err != nil {
		return err
	}
	if !v.SignedIn {
		return c.Redirect(http.StatusSeeOther, "/auth/login?next=/connections")
	}
	ctx := c.Request().Context()
	conns, err := s.opts.Credentials.Connections(ctx, v.User, nil)
	if err != nil {
		return err
	}
	p, err := s.browser.Layout(c, v, "") // the page's heading (templates.titled)
	if err != nil {
		return err
	}
	return s.browser.Render(c, http.StatusOK, templates.ConnectionsPage(p, templates.Connections{Groups: s.connectionGroups(ctx, conns), Notice: notice}))
}

// connectionGroups groups conns by holder: urlflow's own tools first, then the services in
// their labels' order; in the language of ctx.
func (s *Pages) connectionGroups(ctx context.Context, conns []credentials.Connection) []templates.ConnectionGroup {
	var groups []templates.ConnectionGroup
	for _, conn := range conns {
		i := slices.IndexFunc(groups, func(g templates.ConnectionGroup) bool { return g.Service == conn.Service })
		if i < 0 {
			g := templates.ConnectionGroup{Holder: s.holderOf(ctx, conn.Service), Service: conn.Service}
			groups, i = append(groups, g), len(groups)
		}
		item := templates.ConnectionItem{Name: credentials.Labeled(credentials.Name(conn.Service, conn.Name), conn.Label),
			Label:   withAccountLabel(s.labelOf(ctx, conn.Kind, conn.Name), conn.Label),
			Account: conn.Account, StoredAt: conn.StoredAt, LastUsedAt: conn.LastUsedAt, Offline: conn.Offline}
		item.Address = s.addressOf(conn)
		switch {
		case conn.LockedAt != nil:
			// The reason is other code's, in English (as the flow's history has it).
			item.Problem = locale.T(ctx, "connections.problem_locked", "Reason", conn.LockReason)
		case conn.NeedsReconnect:
			item.Problem = locale.T(ctx, "connections.problem_reconnect")
		case conn.Kind == state.KindSecret && s.opts.Slots.Lacks(conn.Name, conn.Parameters) != nil:
			item.Problem = locale.T(ctx, "connections.problem_parameters")
		}
		groups[i].Items = append(groups[i].Items, item)
	}
	slices.SortStableFunc(groups, func(a, b templates.ConnectionGroup) int {
		if own := cmp.Compare(ownFirst(a), ownFirst(b)); own != 0 {
			return own
		}
		return cmp.Compare(a.Holder, b.Holder)
	})
	return groups
}

// holderOf is how the connections page calls who holds what service stores, in the
// language of ctx: urlflow's own tools (service "" or credentials.OwnService, as
// credentials.SplitName gives it), else the service's label (its name when the
// configuration no longer has it).
func (s *Pages) holderOf(ctx context.Context, service string) string {
	if isOwn(service) {
		return locale.T(ctx, "connections.own_tools", "Product", templates.Product(ctx))
	}
	if svc, ok := s.opts.Services.Lookup(service); ok {
		return svc.Label
	}
	return service
}

// addressOf returns the address a secret of conn is used with, when its slot's address is
// made of what the user entered with it; empty otherwise.
func (s *Pages) addressOf(conn credentials.Connection) string {
	slot, ok := s.opts.Slots.Lookup(conn.Name)
	if conn.Kind != state.KindSecret || !ok || slot.API == nil || !slot.API.Templated() {
		return ""
	}
	api, err := slot.API.Bind(conn.Parameters)
	if err != nil {
		return ""
	}
	return api.Base().String()
}

// removeConnection is POST /connections/remove: the signed-in user removes one of their
// credentials, named as the page's form names it.
func (s *Pages) removeConnection(c echo.Context) error {
	return s.connectionsForm(c, s.remove)
}

// withdrawOffline is POST /connections/offline/withdraw: the signed-in user stops the
// service that holds one of their credentials from using it while they are away.
func (s *Pages) withdrawOffline(c echo.Context) error {
	return s.connectionsForm(c, func(ctx context.Context, user state.User, name string) (string, error) {
		withdrawn, err := s.opts.Credentials.WithdrawOffline(ctx, user, name, state.ActorUser)
		if err != nil || !withdrawn {
			return locale.T(ctx, "connections.offline_unchanged"), err
		}
		return locale.T(ctx, "connections.offline_withdrawn"), nil
	})
}

// connectionsForm answers a form of the connections page that does act to the signed-in
// user's credential the form names, with the page and what act says it did.
func (s *Pages) connectionsForm(c echo.Context, act func(ctx context.Context, user state.User, name string) (string, error)) error {
	v, err := s.browser.Visitor(c)
	if err != nil {
		return err
	}
	if !v.SignedIn {
		return c.Redirect(http.StatusSeeOther, "/auth/login?next=/connections")
	}
	if err := s.browser.CheckCSRF(c, v); err != nil {
		return err
	}
	if err := s.limits.Form(c, v.User); err != nil {
		return err
	}
	notice, err := act(c.Request().Context(), v.User, c.FormValue("name"))
	if err != nil {
		return err
	}
	return s.showConnections(c, notice)
}

// removedOnThePage is the audit trail's reason for what a user removes on /connections.
const removedOnThePage = "removed on the connections page"

// remove removes user's credential name and says what it did, in the language of ctx.
func (s *Pages) remove(ctx context.Context, user state.User, name string) (string, error) {
	service, target := credentials.SplitName(name)
	holder := s.holderOf(ctx, service)
	if p, ok := s.opts.Providers.Lookup(target); ok {
		d, err := s.opts.Keeper.Disconnect(ctx, user, name, p, state.ActorUser, removedOnThePage)
		if err != nil {
			return "", err
		}
		return disconnectionWords(ctx, d, holder, p.Label), nil
	}
	deleted, err := s.opts.Credentials.Delete(ctx, user, name, state.ActorUser, removedOnThePage)
	if err != nil {
		return "", err
	}
	if !deleted {
		return locale.T(ctx, "connections.nothing_removed"), nil
	}
	label := withAccountLabel(s.labelOf(ctx, state.KindSecret, target), credentials.LabelOf(name))
	if isOwn(service) {
		return locale.T(ctx, "connections.deleted_own", "Label", label, "Product", templates.Product(ctx)), nil
	}
	return locale.T(ctx, "connections.deleted", "Label", label, "Holder", holder), nil
}

// disconnectionWords say in the language of ctx what d did to the user's account at the
// provider of label, which holder held: what d.Text says in English to the MCP tools and
// the API, before the holder.
func disconnectionWords(ctx context.Context, d providers.Disconnection, holder, label string) string {
	switch {
	case !d.Deleted:
		return locale.T(ctx, "connections.disconnect_none", "Holder", holder, "Provider", label)
	case d.RevokeErr == nil:
		return locale.T(ctx, "connections.disconnect_revoked", "Holder", holder, "Provider", label, "Product", templates.Product(ctx))
	case errors.Is(d.RevokeErr, providers.ErrNoRevocation):
		return locale.T(ctx, "connections.disconnect_no_revocation", "Holder", holder, "Provider", label, "Product", templates.Product(ctx))
	}
	return locale.T(ctx, "connections.disconnect_revocation_failed", "Holder", holder, "Provider", label, "Product", templates.Product(ctx))
}

// isOwn reports whether service names urlflow's own tools.
func isOwn(service string) bool { return service == "" || service == credentials.OwnService }

// ownFirst orders urlflow's own group before the services'.
func ownFirst(g templates.ConnectionGroup) int {
	if g.Service == "" {
		return 0
	}
	return 1
}
