// Package browser is who is at the browser, for the pages of urlflow's HTTP surface (the
// end users' pages and the operators'): the browser session (data in Redis, a signed
// cookie that holds its ID), the signed-in user, CSRF tokens, sign-in and sign-out, the
// layout of a page, and the audit of identities refused in the browser.
//
// The one idea to hold: a page learns who is there from Visitor, and changes a flow only
// through Apply, which checks that the session still holds what the page read.
package browser

import (
	"log/slog"
	"net/http"
	"net/netip"

	"github.com/gorilla/securecookie"
	"github.com/labstack/echo/v4"

	"github.com/urlflow/urlflow/metrics"
	"github.com/urlflow/urlflow/oauth/identity"
	"github.com/urlflow/urlflow/state/audit"
	"github.com/urlflow/urlflow/state/browsersession"
	"github.com/urlflow/urlflow/state/flow"
	"github.com/urlflow/urlflow/state/languages"
)

// Options configure a Browser. Sessions, CookieKeys, CSRFKeys and Flows are required.
type Options struct {
	// Sessions keeps the sessions' data; CookieKeys sign their cookies and CSRFKeys their
	// forms' tokens (32 bytes or more each). The first key of each signs and every one
	// verifies, so that a key rotation signs nobody out and breaks no open form
	// (vault.KeyRing.DeriveAll).
	Sessions             *browsersession.Store
	CookieKeys, CSRFKeys [][]byte
	// Secure marks the cookie Secure and pins it to the host (an https public URL).
	Secure bool
	// Dev marks every page as development's.
	Dev bool
	// Flows are read with the session on a page about an elicitation.
	Flows *flow.Store
	// Languages keeps the language of each signed-in user's pages, for the words of MCP
	// results (nil: not kept).
	Languages *languages.Store
	// Audit receives sign-ins and refused identities; Metrics count the refusals.
	Audit   *audit.Trail
	Metrics *metrics.Process
	// ClientAddr is the address of the client of a request, as the trusted proxies say;
	// the audit names none if nil.
	ClientAddr func(*http.Request) netip.Addr
	Logger     *slog.Logger
}

// Browser serves the pages' knowledge of the browser.
type Browser struct {
	opts     Options
	sessions *sessionStore
	csrf     csrfKeys
	log      *slog.Logger
}

// New returns a Browser.
func New(opts Options) *Browser {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	if opts.ClientAddr == nil {
		opts.ClientAddr = func(*http.Request) netip.Addr { return netip.Addr{} }
	}
	return &Browser{opts: opts, sessions: newSessionStore(opts.Sessions, opts.CookieKeys, opts.Secure),
		csrf: csrfKeys(opts.CSRFKeys), log: log}
}

// Operator reports whether v signed in as an operator by the issuer's claim
// (identity.BrowserSignIn.RecogniseOperators).
func (v *Visitor) Operator() bool {
	op, _ := v.Session.Values[valueOperator].(string)
	return op == "1"
}

// Save saves v's session (a visitor not yet signed in then has the whole sign-in window).
func (b *Browser) Save(c echo.Context, v *Visitor) error {
	return v.Session.Save(c.Request(), c.Response())
}

// SignOut ends v's session.
func (b *Browser) SignOut(c echo.Context, v *Visitor) error {
	v.Session.Options.MaxAge = -1
	return v.Session.Save(c.Request(), c.Response())
}

// StartSignIn keeps attempt, a sign-in at the issuer in progress, and where to return
// after it, in v's session.
func (b *Browser) StartSignIn(c echo.Context, v *Visitor, attempt identity.SignInAttempt, next string) error {
	v.Session.Values[valueSignInState] = attempt.State
	v.Session.Values[valueSignInNonce] = attempt.Nonce
	v.Session.Values[valueSignInVerifier] = attempt.Verifier
	v.Session.Values[valueSignInNext] = next
	return b.Save(c, v)
}

// TakeSignIn returns the sign-in attempt kept in v's session and where to return after it,
// and spends it before anything else, so that an issuer's answer can be used once.
func (b *Browser) TakeSignIn(c echo.Context, v *Visitor) (identity.SignInAttempt, string, error) {
	var attempt identity.SignInAttempt
	attempt.State, _ = v.Session.Values[valueSignInState].(string)
	attempt.Nonce, _ = v.Session.Values[valueSignInNonce].(string)
	attempt.Verifier, _ = v.Session.Values[valueSignInVerifier].(string)
	next, _ := v.Session.Values[valueSignInNext].(string)
	spent := false
	for _, k := range []string{valueSignInState, valueSignInNonce, valueSignInVerifier, valueSignInNext} {
		if _, kept := v.Session.Values[k]; kept {
			delete(v.Session.Values, k)
			spent = true
		}
	}
	if spent {
		if err := b.Save(c, v); err != nil {
			return attempt, next, err
		}
	}
	return attempt, next, nil
}

// CookieName is the name of the session cookie.
func (b *Browser) CookieName() string { return b.sessions.name }

// SessionOfCookie returns the session ID that a session cookie's value names, if it
// verifies.
func (b *Browser) SessionOfCookie(value string) (string, bool) {
	return b.sessions.decode(value)
}

// CookieOfSession returns the value of the session cookie that names session id.
func (b *Browser) CookieOfSession(id string) (string, error) {
	return securecookie.EncodeMulti(b.sessions.name, id, b.sessions.codecs...)
}
