// Package pages serves the end users' pages of urlflow: the elicitation URL (consent, the
// secret form, decline), the third-party connection and its callback, the user's
// connections, urlflow's own sign-in (development or the deployment's issuer) and the
// development tokens.
//
// The one idea to hold: every page checks who is signed in against the elicitation's
// user before it shows or changes anything (elicitationFor), and every change of a flow is
// asked of package flow through the browser (browser.Browser.Apply), never decided here.
package pages

import (
	"log/slog"

	"github.com/labstack/echo/v4"

	"github.com/urlflow/urlflow/oauth/identity"
	"github.com/urlflow/urlflow/oauth/providers"
	"github.com/urlflow/urlflow/services"
	"github.com/urlflow/urlflow/slots"
	"github.com/urlflow/urlflow/state/authorizations"
	"github.com/urlflow/urlflow/state/counters"
	"github.com/urlflow/urlflow/state/credentials"
	"github.com/urlflow/urlflow/state/flow"
	"github.com/urlflow/urlflow/state/vault"
	"github.com/urlflow/urlflow/upstream"
	"github.com/urlflow/urlflow/web/browser"
	"github.com/urlflow/urlflow/web/limits"
)

// Options configure the Pages. All fields but Dev, DevServiceKeys and SignIn are required.
type Options struct {
	// Browser knows who is at the browser; Limits bounds the forms that call out.
	Browser *browser.Browser
	Limits  *limits.Limits
	// Flows keeps the elicitations; Credentials what they store, sealed by Vault.
	Flows       *flow.Store
	Credentials *credentials.Store
	Vault       *vault.Vault
	// Slots and Providers are what can be asked for; Keeper keeps the providers' tokens,
	// and Authorizations the authorizations in progress. Upstream checks a new secret with
	// its slot's API before it is stored.
	Slots          *slots.Catalog
	Providers      *providers.Set
	Keeper         *providers.Keeper
	Authorizations *authorizations.Store
	Upstream       *upstream.Caller
	// Services name the delegating services on the pages.
	Services *services.Catalog
	// Dev, when set, is the development identity: its sign-in page and /dev/token;
	// DevServiceKeys the development services' keys (/dev/service-key).
	Dev            *identity.Dev
	DevServiceKeys map[string]string
	// SignIn is the browser sign-in with the deployment's issuer, when Dev is nil.
	SignIn *identity.BrowserSignIn
	// Counters count the refusals of another user's link.
	Counters *counters.Counters
	Logger   *slog.Logger
}

// Pages serves the end users' pages.
type Pages struct {
	opts    Options
	browser *browser.Browser
	limits  *limits.Limits
	log     *slog.Logger
}

// New returns the Pages.
func New(opts Options) *Pages {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Pages{opts: opts, browser: opts.Browser, limits: opts.Limits, log: log}
}

// Mount adds the pages' routes: those that take forms to forms (which bounds their bodies
// and refuses cross-origin posts), the others to e.
func (s *Pages) Mount(e *echo.Echo, forms *echo.Group) {
	e.GET("/", s.home)
	forms.GET("/e/:id", s.openElicitation)
	forms.POST("/e/:id/continue", s.continueElicitation)
	forms.GET("/e/:id/secret", s.secretForm)
	forms.POST("/e/:id/secret", s.submitSecret)
	forms.POST("/e/:id/decline", s.declineElicitation)
	forms.POST("/e/:id/more-time", s.moreTime)
	forms.POST("/e/:id/authorize", s.authorize)
	forms.GET("/oauth/callback", s.oauthCallback)
	forms.GET("/auth/login", s.signInPage)
	forms.POST("/auth/login", s.signIn)
	forms.POST("/auth/logout", s.signOut)
	forms.GET("/auth/callback", s.signInCallback)
	forms.GET("/connections", s.connectionsPage)
	forms.POST("/connections/remove", s.removeConnection)
	forms.POST("/connections/offline/withdraw", s.withdrawOffline)
	if s.opts.Dev != nil {
		e.GET("/dev/token", s.devToken)
		e.GET("/dev/service-key", s.devServiceKey)
	}
}
