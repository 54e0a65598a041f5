package browser

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gorilla/sessions"
	"github.com/labstack/echo/v4"

	"github.com/urlflow/urlflow/internal/locale"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/browsersession"
	"github.com/urlflow/urlflow/state/flow"
)

// Visitor is the browser behind a page request.
type Visitor struct {
	// Session is its browser session; User its signed-in user, when SignedIn.
	Session  *sessions.Session
	User     state.User
	SignedIn bool
	// Page is the elicitation the page is about, read with the session (Visitor), and
	// PageErr why it was not.
	Page    *flow.Elicitation
	PageErr error
	// hint is set when the session and page are what this replica read before, not read
	// for this request (PageVisitor): the session's data, which every write of the request
	// checks (Browser.Apply).
	hint []byte
}

// Name is how the pages call the signed-in user.
func (v *Visitor) Name() string {
	if n, _ := v.Session.Values[valueName].(string); n != "" {
		return n
	}
	return v.User.Subject
}

// Visitor returns the browser behind c. On a page about an elicitation (/e/{id}/…), a
// signed-in browser's session and the elicitation are read together: in one command, both
// living in the user's slot (browsersession.Key).
func (b *Browser) Visitor(c echo.Context) (*Visitor, error) { return b.PageVisitor(c, false) }

// PageVisitor is Visitor for a page that writes before it answers (each write through
// Browser.Apply): with hints, when this replica read or wrote the signed-in session and the
// running elicitation in the last two minutes, it starts from those copies without a
// round trip. Its write is then made only if the session still holds what was read and
// the record still reads as read (or, if the record changed, applies to the new one);
// a stale session makes the write fail with flow.ErrStale, and Hinted starts the page
// again from Redis.
func (b *Browser) PageVisitor(c echo.Context, hints bool) (*Visitor, error) {
	var page *flow.Elicitation
	var pageErr error
	var hint []byte
	prefetched := false
	if id := c.Param("id"); flow.ValidID(id) {
		if sessID, ok := b.sessions.cookieID(c.Request()); ok && sessID != "" {
			var data []byte
			hinted := false
			if e, seen := b.opts.Flows.Seen(id); hints && seen && !e.State.Terminal() {
				if data, hinted = b.sessions.hint(sessID); hinted {
					page, hint = e, data
				}
			}
			if !hinted {
				page, pageErr = b.opts.Flows.Read(c.Request().Context(), id, flow.Along(browsersession.Key(sessID), &data))
				if pageErr != nil && !errors.Is(pageErr, state.ErrNotFound) {
					return nil, pageErr
				}
				b.sessions.remember(sessID, data)
			}
			c.SetRequest(withPrefetched(c.Request(), sessID, data))
			prefetched = true
		}
	}
	sess, err := b.sessions.Get(c.Request(), b.sessions.name)
	if err != nil {
		return nil, err
	}
	u, ok := sessionUser(sess)
	v := &Visitor{Session: sess, User: u, SignedIn: ok, hint: hint}
	if ok {
		b.rememberLanguage(c.Request().Context(), u)
	}
	if prefetched {
		v.Page, v.PageErr = page, pageErr
		if page == nil && pageErr == nil {
			v.PageErr = state.ErrNotFound
		}
	}
	return v, nil
}

// Apply records event ev on elicitation id for a page of visitor v: when v started from
// hints, only if v's session still holds what v read (otherwise flow.ErrStale).
func (b *Browser) Apply(c echo.Context, v *Visitor, id string, ev flow.Event, actor state.Actor, reason string, opts ...flow.ApplyOption) (flow.Change, error) {
	if v.hint != nil {
		opts = append(opts, flow.IfStill(browsersession.Key(v.Session.ID), v.hint))
	}
	return b.opts.Flows.Apply(c.Request().Context(), id, ev, actor, reason, opts...)
}

// Hinted runs page from hints (PageVisitor), and once more from Redis when a write it made
// on those hints found them stale: nothing was written or answered then.
func (b *Browser) Hinted(c echo.Context, page func(c echo.Context, hints bool) error) error {
	// The request as it came: the session the first run loaded stays with the request it
	// ran with (gorilla/sessions keeps it in the request's context).
	fresh := *c.Request()
	if err := page(c, true); !errors.Is(err, flow.ErrStale) {
		return err
	}
	c.SetRequest(&fresh)
	return page(c, false)
}

// CSRFToken returns the CSRF token for v's forms, saving a new session first so that it
// has an ID to bind the token to.
func (b *Browser) CSRFToken(c echo.Context, v *Visitor) (string, error) {
	if v.Session.ID == "" {
		if err := v.Session.Save(c.Request(), c.Response()); err != nil {
			return "", err
		}
	}
	return b.csrf.token(v.Session.ID), nil
}

// ErrBadCSRF refuses a form whose CSRF token is not its session's, in the language of ctx.
func ErrBadCSRF(ctx context.Context) error {
	return echo.NewHTTPError(http.StatusForbidden, locale.T(ctx, "error.bad_csrf"))
}

// CheckCSRF refuses a form posted by v whose CSRF token is not v's session's (ErrBadCSRF).
func (b *Browser) CheckCSRF(c echo.Context, v *Visitor) error {
	if !b.csrf.valid(v.Session.ID, c.FormValue("csrf")) {
		return ErrBadCSRF(c.Request().Context())
	}
	return nil
}

// SignInAs makes v's browser session the session of user, under a new session ID;
// operator says whether the issuer's ID token made the user an operator.
func (b *Browser) SignInAs(c echo.Context, v *Visitor, user state.User, name string, operator bool) error {
	if err := b.sessions.rotate(c.Request(), v.Session); err != nil {
		return err
	}
	v.Session.Values[valueIssuer] = user.Issuer
	v.Session.Values[valueSubject] = user.Subject
	v.Session.Values[valueName] = name
	v.Session.Values[valueSignedIn] = time.Now().UTC().Format(time.RFC3339)
	delete(v.Session.Values, valueOperator)
	if operator {
		v.Session.Values[valueOperator] = "1"
	}
	if err := v.Session.Save(c.Request(), c.Response()); err != nil {
		return err
	}
	b.log.InfoContext(c.Request().Context(), "browser signed in", "user", user.Key(), "development", b.opts.Dev)
	b.signedIn(c.Request().Context(), user)
	return nil
}

// rememberLanguage keeps the language of the page as the one user reads urlflow in, for the
// words of MCP results. A failure costs the user only the language of those words, so it
// is logged and the page goes on.
func (b *Browser) rememberLanguage(ctx context.Context, user state.User) {
	if b.opts.Languages == nil {
		return
	}
	if err := b.opts.Languages.Remember(ctx, user, locale.From(ctx).Lang()); err != nil {
		b.log.WarnContext(ctx, "the language of the page is not remembered", "err", err)
	}
}
