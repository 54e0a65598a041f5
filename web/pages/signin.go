package pages

import (
	"cmp"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/urlflow/urlflow/internal/locale"
	"github.com/urlflow/urlflow/oauth/identity"
	"github.com/urlflow/urlflow/services"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/templates"
	"github.com/urlflow/urlflow/web/browser"
)

// safeNext returns next if it is a path on this server, and "/" otherwise, so that sign-in
// can never redirect to another site.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.Contains(next, "\\") || len(next) > 512 {
		return "/"
	}
	// Browsers drop tabs and newlines inside URLs ("/\t/evil" becomes "//evil"): refuse
	// every control character.
	if strings.ContainsFunc(next, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return "/"
	}
	if u, err := url.Parse(next); err != nil || u.Scheme != "" || u.Host != "" {
		return "/"
	}
	return next
}

// signInPage is GET /auth/login. In development it shows the development sign-in form;
// otherwise it sends the browser to the issuer, keeping the attempt (state, nonce, PKCE
// verifier, where to return) in the browser session. Either way the session is saved, so
// that a visitor not yet signed in has the whole sign-in window from this page on.
func (s *Pages) signInPage(c echo.Context) error {
	v, err := s.browser.Visitor(c)
	if err != nil {
		return err
	}
	next := safeNext(c.QueryParam("next"))
	if s.opts.Dev != nil {
		if err := s.browser.Save(c, v); err != nil {
			return err
		}
		return s.renderDevSignIn(c, v, http.StatusOK, next, "", "")
	}
	attempt, authURL := s.opts.SignIn.Start()
	if err := s.browser.StartSignIn(c, v, attempt, next); err != nil {
		return err
	}
	return c.Redirect(http.StatusFound, authURL)
}

// signInCallback is GET /auth/callback: the issuer sends the browser back. The attempt is
// spent before anything else, so an answer can be used once; a browser that brings none
// has nothing saved. The session ID rotates at sign-in.
func (s *Pages) signInCallback(c echo.Context) error {
	if s.opts.SignIn == nil {
		return echo.NewHTTPError(http.StatusNotFound, locale.T(c.Request().Context(), "error.sign_in_not_configured"))
	}
	v, err := s.browser.Visitor(c)
	if err != nil {
		return err
	}
	attempt, next, err := s.browser.TakeSignIn(c, v)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	who, err := s.opts.SignIn.Finish(ctx, attempt, c.QueryParams())
	switch {
	case errors.Is(err, identity.ErrSignInDenied):
		s.browser.RefusedIdentity(c.Request(), state.User{}, "", "sign-in refused or cancelled at the issuer")
		return echo.NewHTTPError(http.StatusForbidden, locale.T(ctx, "error.sign_in_refused"))
	case errors.Is(err, identity.ErrSignInState):
		s.log.WarnContext(ctx, "sign-in answer refused", "err", err)
		s.browser.RefusedIdentity(c.Request(), state.User{}, "", "sign-in answer already used, expired, or of another browser")
		return echo.NewHTTPError(http.StatusBadRequest, locale.T(ctx, "error.sign_in_answer_spent"))
	case err != nil:
		s.log.ErrorContext(ctx, "sign-in failed", "err", err)
		return echo.NewHTTPError(http.StatusBadGateway, locale.T(ctx, "error.sign_in_failed"))
	}
	if err := s.browser.SignInAs(c, v, who.User, who.Name, who.Operator); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, safeNext(next))
}

func (s *Pages) renderDevSignIn(c echo.Context, v *browser.Visitor, status int, next, name, problem string) error {
	token, err := s.browser.CSRFToken(c, v)
	if err != nil {
		return err
	}
	p, err := s.browser.Layout(c, v, "") // the page's heading (templates.titled)
	if err != nil {
		return err
	}
	return s.browser.Render(c, status, templates.DevSignInPage(p, templates.DevSignIn{
		Next: next, CSRF: token, Error: problem, Name: name, Operator: identity.DevOperator,
	}))
}

// signIn is POST /auth/login: in development, the typed name becomes the signed-in user.
// The session ID rotates, so an ID planted before sign-in is worthless afterwards.
func (s *Pages) signIn(c echo.Context) error {
	if s.opts.Dev == nil {
		return echo.NewHTTPError(http.StatusNotFound, locale.T(c.Request().Context(), "error.sign_in_not_configured"))
	}
	v, err := s.browser.Visitor(c)
	if err != nil {
		return err
	}
	if err := s.browser.CheckCSRF(c, v); err != nil {
		return err
	}
	next := safeNext(c.FormValue("next"))
	name := strings.ToLower(strings.TrimSpace(c.FormValue("name")))
	if !identity.ValidDevName(name) {
		return s.renderDevSignIn(c, v, http.StatusUnprocessableEntity, next, "", locale.T(c.Request().Context(), "signin.name_rule"))
	}
	if err := s.browser.SignInAs(c, v, s.opts.Dev.User(name), name, false); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, next)
}

// signOut is POST /auth/logout.
func (s *Pages) signOut(c echo.Context) error {
	v, err := s.browser.Visitor(c)
	if err != nil {
		return err
	}
	if err := s.browser.CheckCSRF(c, v); err != nil {
		return err
	}
	if err := s.browser.SignOut(c, v); err != nil {
		return err
	}
	return s.browser.Render(c, http.StatusOK, templates.SignedOutPage(templates.Page{Dev: s.opts.Dev != nil}, templates.SignedOut{}))
}

// devToken is GET /dev/token?user=NAME: a bearer token for a development user, for
// urlflow, or with &resource=URL for a configured service whose resource URL that is.
func (s *Pages) devToken(c echo.Context) error {
	name := c.QueryParam("user")
	if !identity.ValidDevName(name) {
		return echo.NewHTTPError(http.StatusBadRequest,
			"user must be 1 to 64 lower-case letters, digits, '.', '_' or '-', for example ?user=alice")
	}
	dev := s.opts.Dev
	if resource := c.QueryParam("resource"); resource != "" {
		i := slices.IndexFunc(s.opts.Services.List(), func(svc *services.Service) bool { return svc.Resource == resource })
		if i < 0 {
			return echo.NewHTTPError(http.StatusBadRequest,
				"resource must be the resource of a configured service, for a token that service's users would send it")
		}
		dev = dev.ForAudience(resource)
	}
	token, err := dev.Issue(name)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]string{"token": token})
}

// devServiceKey is GET /dev/service-key?service=NAME (development only, on loopback like
// /dev/token): the key of a development service, "demo" by default, so that a delegating
// server run next to urlflow dev needs no key pasted.
func (s *Pages) devServiceKey(c echo.Context) error {
	name := cmp.Or(c.QueryParam("service"), "demo")
	key, ok := s.opts.DevServiceKeys[name]
	if !ok {
		return echo.NewHTTPError(http.StatusNotFound, "no development service "+strconv.Quote(name)+" (urlflow dev adds one named demo)")
	}
	answer := map[string]string{"service": name, "key": key}
	if svc, ok := s.opts.Services.Lookup(name); ok {
		answer["resource"] = svc.Resource // its users' tokens are for it (/dev/token?resource=)
	}
	return c.JSON(http.StatusOK, answer)
}
