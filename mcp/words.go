package mcp

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/urlflow/urlflow/internal/display"
	"github.com/urlflow/urlflow/oauth/providers"
	"github.com/urlflow/urlflow/proxy"
	"github.com/urlflow/urlflow/slots"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/flow"
)

// The words of tool results live here, in one place: every text a tool result or a tool
// error shows the model and, through it, the user. For a user whose client cannot open
// URLs by itself, the result is the whole product: it must be clear, calm and complete.

// when says when t is, for people: a time in UTC and how long from now.
func when(t time.Time) string {
	left := time.Until(t).Round(time.Minute)
	if left < time.Minute {
		return t.UTC().Format("15:04 UTC") + " (in less than a minute)"
	}
	return fmt.Sprintf("%s (in %s)", t.UTC().Format("15:04 UTC"), humanDuration(left))
}

func humanDuration(d time.Duration) string {
	if d >= time.Hour {
		return fmt.Sprintf("%.0f hours", d.Hours())
	}
	if m := int(d.Minutes()); m == 1 {
		return "1 minute"
	} else {
		return fmt.Sprintf("%d minutes", m)
	}
}

// asked is what a flow asks the user for, as the words of results speak of it: a secret
// the user enters on urlflow's page (set_secret asks again), or an account the user
// connects by approving access at its provider (connect asks again). The texts tell a
// model which tool fits, so they must never send it to set_secret for an account.
type asked struct {
	oauth bool
	// target is the slot or provider name; name how people call it (the slot's label, or
	// the provider's).
	target, name string
}

// asked returns what e asks for.
func (s *Server) asked(e *flow.Elicitation) asked {
	if e.Kind == state.KindOAuth {
		if p, ok := s.opts.Providers.Lookup(e.Target); ok {
			return asked{oauth: true, target: e.Target, name: p.Label}
		}
		return asked{oauth: true, target: e.Target, name: e.Target}
	}
	if slot, ok := s.opts.Slots.Lookup(e.Target); ok {
		return asked{target: e.Target, name: slot.Label}
	}
	return asked{target: e.Target, name: e.Target}
}

// yours is "your Demo API key" or "your Acme account".
func (a asked) yours() string {
	if a.oauth {
		return "your " + a.name + " account"
	}
	return "your " + a.name
}

// about is what a request or a link is about: "for your Demo API key", "to connect your
// Acme account".
func (a asked) about() string {
	if a.oauth {
		return "to connect " + a.yours()
	}
	return "for " + a.yours()
}

// request is how a sentence about the request starts.
func (a asked) request() string { return "The request " + a.about() }

// link is how a sentence about the link starts.
func (a asked) link() string { return "The link " + a.about() }

// action is what the user does on the page.
func (a asked) action() string {
	if a.oauth {
		return "connect " + a.yours()
	}
	return "enter " + a.yours()
}

// done is what the page says once the flow is complete: "stored" or "connected".
func (a asked) done() string {
	if a.oauth {
		return "connected"
	}
	return "stored"
}

// nothing says that nothing came of an ended flow.
func (a asked) nothing() string { return "Nothing was " + a.done() + "." }

// again names the call that asks again.
func (a asked) again() string {
	if a.oauth {
		return "call connect with provider " + a.target + " again"
	}
	return "call set_secret again"
}

// message is the message of the URL-mode elicitation, shown with its link.
func (a asked) message() string {
	if a.oauth {
		return "urlflow needs access to " + a.yours() + ". Open the link to approve it at " + a.name +
			" in your browser; no password or token passes through this conversation."
	}
	return "urlflow needs " + a.yours() + ". Open the link to enter it in your browser; " +
		"it is never shared with this conversation."
}

// onThePage says what the user does on urlflow's page and what urlflow keeps.
func (a asked) onThePage() string {
	if a.oauth {
		return "Sign in there and connect " + a.yours() + ": urlflow's page sends you to " + a.name +
			" to approve access. urlflow keeps the access it is given encrypted; it never passes through " +
			"this conversation, and the link by itself gives no one access."
	}
	return "Sign in there and enter " + a.yours() + " on urlflow's page. urlflow keeps it encrypted; " +
		"it never passes through this conversation, and the link by itself gives no one access."
}

// describe says in a sentence where e, which asks for a, stands.
func describe(e *flow.Elicitation, a asked, url string) string {
	nothing := strings.ToLower(a.nothing())
	switch e.State {
	case flow.Complete:
		return fmt.Sprintf("%s is complete: it is %s.", a.request(), a.done())
	case flow.Declined:
		return fmt.Sprintf("%s was declined; %s", a.request(), nothing)
	case flow.Cancelled:
		return fmt.Sprintf("%s was cancelled; %s", a.request(), nothing)
	case flow.Expired:
		return fmt.Sprintf("%s expired; %s", a.request(), nothing)
	case flow.Pending, flow.Unknown:
		return fmt.Sprintf("%s is waiting for you to open %s (until %s).", a.request(), url, when(e.ExpiresAt))
	case flow.Consented:
		return fmt.Sprintf("You agreed in your client; the request %s is waiting for you to open %s (until %s).",
			a.about(), url, when(e.ExpiresAt))
	case flow.InProgress:
		return fmt.Sprintf("The page %s is open in your browser; waiting for you to finish there (until %s).", a.about(), when(e.ExpiresAt))
	case flow.Failed:
		return fmt.Sprintf("The last attempt %s failed; you can try again at %s (until %s).", a.about(), url, when(e.ExpiresAt))
	}
	return "The request is " + string(e.State) + "."
}

// secretPurpose is the reason the pages show for asking for slot's secret so that urlflow
// can do what for the user ("use it for you"), given how the stored one it replaces stands.
func secretPurpose(slot *slots.Slot, what string) func(*flow.Replaced) string {
	return func(replacing *flow.Replaced) string {
		switch {
		case replacing == nil:
			return "Enter your " + slot.Label + " so that urlflow can " + what + "."
		case replacing.LockReason != "":
			return fmt.Sprintf("urlflow locked your stored %s because %s. Enter it again to unlock it, "+
				"or a new one if you did not expect this.", slot.Label, replacing.LockReason)
		case replacing.Weak:
			return fmt.Sprintf("Your stored %s is weaker than urlflow now requires for a secret used with an API. "+
				"Enter a stronger one to replace it.", slot.Label)
		}
		return "Enter a new " + slot.Label + " to replace the one urlflow keeps for you."
	}
}

// weakNote tells the model that a secret predates its slot's strength minimum.
func weakNote(slot *slots.Slot) string {
	return fmt.Sprintf("Note: the stored %s is weaker than urlflow now requires for a secret used with an API. "+
		"It still works; suggest that the user replaces it (set_secret with name %s and replace set to true).", slot.Label, slot.Name)
}

func orNone(s string) string {
	if s == "" {
		return "no scopes"
	}
	return s
}

// connectPurpose is the reason the pages show for asking to connect p so that urlflow can
// do what for the user ("use it for you"), given how the connection it replaces stands.
func connectPurpose(p *providers.Provider, what string) func(*flow.Replaced) string {
	return func(replacing *flow.Replaced) string {
		if replacing != nil && replacing.Reconnect {
			return p.Label + " no longer accepts the connection urlflow had; connect your account again."
		}
		return "Connect your " + p.Label + " account so that urlflow can " + what + "."
	}
}

func storedText(label string) string {
	return fmt.Sprintf("Your %s is stored. urlflow keeps it encrypted and uses it for you; "+
		"its value is never shown in this conversation.", label)
}

func alreadyStoredText(label string) string {
	return fmt.Sprintf("Your %s is already stored; nothing was asked. "+
		"To replace it, call set_secret again with replace set to true.", label)
}

// openTheLink asks the user of a client that cannot open URLs to open url, which works
// until expires.
func (a asked) openTheLink(url string, expires time.Time) string {
	return fmt.Sprintf("To continue, please open this link in your browser:\n\n%s\n\n%s\n\n"+
		"When the page says it is %s, ask me to continue: the same request will then succeed. "+
		"The link works until %s.", url, a.onThePage(), a.done(), when(expires))
}

// ended says that the flow ended in st (declined, cancelled or expired) and what to call.
func (a asked) ended(st flow.State) string {
	switch st {
	case flow.Declined:
		return fmt.Sprintf("%s was declined. %s If that was a mistake, %s for a new link.", a.request(), a.nothing(), a.again())
	case flow.Cancelled:
		return fmt.Sprintf("%s was cancelled. %s %s to start over.", a.request(), a.nothing(), display.Capitalized(a.again()))
	}
	return fmt.Sprintf("%s expired before it was used. %s %s for a new link.", a.link(), a.nothing(), display.Capitalized(a.again()))
}

// stillWaiting says that the flow id still waits for the user at url until expires.
func (a asked) stillWaiting(url string, expires time.Time, id string) string {
	return fmt.Sprintf("Still waiting for you to %s at %s . The link works until %s. "+
		"When the page says it is %s, %s (or elicitation_status with elicitationId %s) to continue.",
		a.action(), url, when(expires), a.done(), a.again(), id)
}

const unknownElicitationText = "No request with that ID belongs to you; its state is unknown. Check the ID, or start again."

// notCancelledText starts the answer of cancel_elicitation for a flow that had ended.
const notCancelledText = "Nothing was cancelled: this request had already ended. "

func connectedText(label, account string) string {
	return "Your " + label + " account is connected as " + account + ". urlflow keeps its tokens " +
		"encrypted and uses them for you; they are never shown in this conversation."
}

func alreadyConnectedText(label, account string) string {
	return "Your " + label + " account is already connected as " + account + "; nothing was asked."
}

func secretDeletedText(label string) string {
	return fmt.Sprintf("Your %s is deleted from urlflow. Tools can no longer use it; set_secret stores a new one.", label)
}

func noSecretToDeleteText(label string) string {
	return fmt.Sprintf("You had no %s stored; nothing was deleted.", label)
}

// connectionsText is list_connections' text: one line per stored credential.
func connectionsText(views []connectionView) string {
	if len(views) == 0 {
		return "You have no stored secrets."
	}
	lines := make([]string, len(views))
	for i, v := range views {
		lines[i] = connectionLine(v)
	}
	return "Your stored secrets (values are never shown):\n" + strings.Join(lines, "\n")
}

// connectionLine says in a line what urlflow keeps of one credential.
func connectionLine(v connectionView) string {
	const stamp = "2006-01-02 15:04 UTC"
	c := v.Connection
	name := c.Name
	if c.Service != "" {
		name += ", held for the service " + c.Service
	}
	line := fmt.Sprintf("- %s (%s): stored %s", v.Label, name, c.StoredAt.UTC().Format(stamp))
	if c.Kind == state.KindOAuth {
		line = fmt.Sprintf("- %s (%s): connected as %s with %s, %s", v.Label, name, c.Account,
			orNone(strings.Join(c.Scopes, " ")), c.StoredAt.UTC().Format(stamp))
		if c.RefreshedAt != nil {
			line += ", refreshed " + c.RefreshedAt.UTC().Format(stamp)
		}
		if c.NeedsReconnect {
			line += ", needs to be connected again"
		}
	}
	if c.VerifiedAt != nil {
		line += ", verified " + c.VerifiedAt.UTC().Format(stamp)
	}
	if c.LastUsedAt != nil {
		line += ", last used " + c.LastUsedAt.UTC().Format(stamp)
	} else {
		line += ", not used yet"
	}
	if c.LockedAt != nil {
		line += fmt.Sprintf(", LOCKED since %s because %s: the next call_api with it asks the user to enter it again",
			c.LockedAt.UTC().Format(stamp), c.LockReason)
	}
	if c.Weak {
		line += ", WEAK: stored before urlflow's strength minimum; suggest replacing it (set_secret with replace set to true)"
	}
	return line
}

// The tool errors: what went wrong, whether anything changed, and what to call instead.

func noSuchSecretError(name string, known []string) error {
	return fmt.Errorf("there is no secret named %q; the secrets urlflow can store are: %s", name, strings.Join(known, ", "))
}

func noSuchProviderError(name string, known []string) error {
	if len(known) == 0 {
		return fmt.Errorf("there is no provider named %q; this urlflow has no third-party providers configured", name)
	}
	return fmt.Errorf("there is no provider named %q; the providers are: %s", name, strings.Join(known, ", "))
}

func storedOnlyError(slot *slots.Slot) error {
	return fmt.Errorf("the secret %s is only stored; urlflow has no API configured to use it with", slot.Name)
}

func noProviderAPIError(p *providers.Provider) error {
	return fmt.Errorf("urlflow has no API configured for %s", p.Label)
}

// secretCallError says why call_api with slot's secret sent nothing, or wraps err.
func secretCallError(slot *slots.Slot, args callAPIArgs, err error) error {
	var (
		locked  *proxy.LockedError
		carried *proxy.CarriedError
	)
	switch {
	case errors.As(err, &locked):
		// Locked again between the store and this read: the next call asks again.
		return fmt.Errorf("your %s is locked (%s); call call_api again to ask the user to enter it again", slot.Label, locked.Reason)
	case errors.Is(err, proxy.ErrUnopenable):
		return fmt.Errorf("urlflow cannot open your stored %s (its key may have been retired); store it again with set_secret and replace set to true", slot.Label)
	case errors.Is(err, proxy.ErrIncomplete):
		// Stored before the slot's base URL took parameters: the next call asks for them.
		return fmt.Errorf("your stored %s cannot be used (%v); call call_api again to ask the user to enter it again", slot.Label, err)
	case errors.As(err, &carried) && !carried.Locked:
		return fmt.Errorf("urlflow refused this request and sent nothing: its %s carries your stored %s, or a form of it. "+
			"urlflow could not lock the key just now; do not send it in a request: urlflow adds it itself", carried.Where, slot.Label)
	case errors.As(err, &carried):
		return fmt.Errorf("urlflow refused this request and sent nothing: its %s carries your stored %s, or a form of it. "+
			"No request needs to carry the key: urlflow adds it itself. To protect it, urlflow has locked it: the next call_api "+
			"with name %s asks the user to enter it again in the browser", carried.Where, slot.Label, slot.Name)
	}
	return args.failed(err)
}

// carriedTokenError says that call_api sent nothing because the request carried p's
// access token.
func carriedTokenError(p *providers.Provider, carried *proxy.CarriedError) error {
	return fmt.Errorf("urlflow refused this request and sent nothing: its %s carries urlflow's access token for %s, "+
		"or a form of it. No request needs to carry it: urlflow adds it itself", carried.Where, p.Label)
}

func reconnectError(p *providers.Provider) error {
	return fmt.Errorf("%s no longer accepts urlflow's connection; call connect with provider %s to connect again", p.Label, p.Name)
}

func noWorkingTokenError(p *providers.Provider) error {
	return fmt.Errorf("urlflow could not get a working token for %s right now; nothing was changed, try again in a moment", p.Label)
}

// failed wraps err, an error of the call_api request of a.
func (a callAPIArgs) failed(err error) error {
	return fmt.Errorf("call_api %s %s: %w", strings.ToUpper(a.Method), a.Path, err)
}
