package browser

import (
	"context"
	"strings"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"
	"github.com/urlflow/urlflow/templates"
)

// Layout returns the layout data of a page titled title for v (nil: nobody signed in).
func (b *Browser) Layout(c echo.Context, v *Visitor, title string) (templates.Page, error) {
	p := templates.Page{Title: title, Dev: b.opts.Dev}
	if v != nil && v.SignedIn {
		p.SignedInAs = v.Name()
		token, err := b.CSRFToken(c, v)
		if err != nil {
			return p, err
		}
		p.CSRF = token
	}
	return p, nil
}

// Render answers c with status and component.
func (b *Browser) Render(c echo.Context, status int, component templ.Component) error {
	return RenderIn(c.Request().Context(), c, status, component)
}

// RenderIn answers c with status and component, rendered with ctx.
func RenderIn(ctx context.Context, c echo.Context, status int, component templ.Component) error {
	c.Response().Header().Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	c.Response().WriteHeader(status)
	return component.Render(ctx, c.Response())
}

// ContentSecurityPolicy allows nothing but urlflow's own stylesheet and images and forms
// that post to urlflow: no script, no inline style, no framing. Every answer carries it.
const ContentSecurityPolicy = "default-src 'none'; style-src 'self'; img-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// PolicyWithFormTarget is the policy of a page whose form is redirected to origin (a
// provider's authorization endpoint): browsers apply form-action to a form's redirects.
func PolicyWithFormTarget(origin string) string {
	return strings.Replace(ContentSecurityPolicy, "form-action 'self'", "form-action 'self' "+origin, 1)
}
