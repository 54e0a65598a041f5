package pages

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"

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
	conns, err := s.opts.Credentials.Connections(c.Request().Context(), v.User, nil)
	if err != nil {
		return err
	}
	p, err := s.browser.Layout(c, v, "") // the page's heading (templates.titled)
	if err != nil {
		return err
	}
	return s.browser.Render(c, http.StatusOK, templates.ConnectionsPage(p, templates.Connections{Groups: s.connectionGroups(conns), Notice: notice}))
}

// connectionGroups groups conns by holder: urlflow's own tools first, then the services in
// their labels' order.
func (s *Pages) connectionGroups(conns []credentials.Connection) []templates.ConnectionGroup {
	var groups []templates.ConnectionGroup
	for _, conn := range conns {
		i := slices.IndexFunc(groups, func(g templates.ConnectionGroup) bool { return g.Service == conn.Service })
		if i < 0 {
			g := templates.ConnectionGroup{Holder: "urlflow's own tools", Service: conn.Service}
			if conn.Service != "" {
				g.Holder = conn.Service
				if svc, ok := s.opts.Services.Lookup(conn.Service); ok {
					g.Holder = svc.Label
				}
			}
			groups, i = append(groups, g), len(groups)
		}
		item := templates.ConnectionItem{Name: credentials.Labeled(credentials.Name(conn.Service, conn.Name), conn.Label),
			Label:   withAccountLabel(s.labelOf(conn.Kind, conn.Name), conn.Label),
			Account: conn.Account, StoredAt: conn.StoredAt, LastUsedAt: conn.LastUsedAt, Offline: conn.Offline}
		item.Address = s.addressOf(conn)
		switch {
		case conn.LockedAt != nil:
			item.Problem = "Locked until you enter it again: " + conn.LockReason
		case conn.NeedsReconnect:
			item.Problem = "The provider no longer honours it: connect again"
		case conn.Kind == state.KindSecret && s.opts.Slots.Lacks(conn.Name, conn.Parameters) != nil:
			item.Problem = "Its address now takes parts you did not enter with it: enter it again when asked"
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
			return "Nothing was changed: it was no longer allowed, or no longer there.", err
		}
		return "Done: it is used only while you use it through your client now.", nil
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

// remove removes user's credential name and says what it did.
func (s *Pages) remove(ctx context.Context, user state.User, name string) (string, error) {
	service, target := credentials.SplitName(name)
	holder := "urlflow's own tools"
	if service != "" {
		holder = service
		if svc, ok := s.opts.Services.Lookup(service); ok {
			holder = svc.Label
		}
	}
	if p, ok := s.opts.Providers.Lookup(target); ok {
		d, err := s.opts.Keeper.Disconnect(ctx, user, name, p, state.ActorUser, removedOnThePage)
		if err != nil {
			return "", err
		}
		return holder + ": " + d.Text(), nil
	}
	deleted, err := s.opts.Credentials.Delete(ctx, user, name, state.ActorUser, removedOnThePage)
	if err != nil {
		return "", err
	}
	if !deleted {
		return "Nothing was removed: it was no longer there.", nil
	}
	return fmt.Sprintf("Your %s is deleted: %s can no longer use it.", withAccountLabel(s.labelOf(state.KindSecret, target), credentials.LabelOf(name)), holder), nil
}

// ownFirst orders urlflow's own group before the services'.
func ownFirst(g templates.ConnectionGroup) int {
	if g.Service == "" {
		return 0
	}
	return 1
}
