package web

import (
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/urlflow/urlflow/internal/locale"
	"github.com/urlflow/urlflow/templates"
)

// languageParam is the query parameter of the pages' language switcher: the language the
// reader chose.
const languageParam = "lang"

// languageKept is how long the browser keeps the reader's choice of language.
const languageKept = 365 * 24 * time.Hour

// languageCookie names the cookie that keeps the reader's choice of language: pinned to
// this host and sent only over HTTPS when the deployment is served so (the __Host- prefix).
func languageCookie(https bool) string {
	if https {
		return "__Host-urlflow_lang"
	}
	return "urlflow_lang"
}

// withLanguage renders every page of the request in the language its reader chose on the
// pages (kept in a cookie), else the best of their Accept-Language that catalog has, else
// the catalog's default, and says so (Content-Language; Vary, as the answer depends on
// both). A browser's GET of a page with ?lang= (the switcher in every page's footer) keeps
// the choice and sends the browser back to the same address without it. The API answers
// JSON for programs: its requests pass untouched.
func withLanguage(catalog *locale.Catalog, https bool) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			if strings.HasPrefix(r.URL.Path, "/api/") {
				return next(c)
			}
			if r.Method == http.MethodGet && strings.Contains(r.URL.RawQuery, languageParam+"=") &&
				strings.Contains(r.Header.Get("Accept"), "text/html") {
				if chosen := r.URL.Query().Get(languageParam); chosen != "" {
					return chooseLanguage(c, catalog, chosen, https)
				}
			}
			var chosen string
			if cookie, err := r.Cookie(languageCookie(https)); err == nil {
				chosen = cookie.Value
			}
			l := catalog.Negotiate(chosen, r.Header.Get("Accept-Language"))
			h := c.Response().Header()
			h.Set("Content-Language", l.Lang())
			h.Add("Vary", "Accept-Language")
			h.Add("Vary", "Cookie")
			ctx := templates.WithQuery(locale.With(r.Context(), l), r.URL)
			c.SetRequest(r.WithContext(ctx))
			return next(c)
		}
	}
}

// chooseLanguage keeps the reader's choice of language, when catalog has it, and sends
// the browser back to the page it was on (a language it does not have changes nothing).
func chooseLanguage(c echo.Context, catalog *locale.Catalog, chosen string, https bool) error {
	if catalog.Has(chosen) {
		c.SetCookie(&http.Cookie{Name: languageCookie(https), Value: chosen, Path: "/", MaxAge: int(languageKept / time.Second),
			HttpOnly: true, Secure: https, SameSite: http.SameSiteLaxMode})
	}
	u := c.Request().URL
	q := u.Query()
	q.Del(languageParam)
	back := u.EscapedPath()
	if !strings.HasPrefix(back, "/") || strings.HasPrefix(back, "//") || strings.HasPrefix(back, "/\\") {
		back = "/" // never another host's address ("//host/…")
	}
	if len(q) > 0 {
		back += "?" + q.Encode()
	}
	return c.Redirect(http.StatusSeeOther, back)
}
