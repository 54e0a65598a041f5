package mcp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/urlflow/urlflow/internal/locale"
	"github.com/urlflow/urlflow/oauth/providers"
	"github.com/urlflow/urlflow/proxy"
	"github.com/urlflow/urlflow/slots"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/flow"
)

// The words of tool results live here, in one place: every text a tool result or a tool
// error shows the model and, through it, the user. For a user whose client cannot open
// URLs by itself, the result is the whole product: it must be clear, calm and complete.

// The words of results come from the message catalog (the mcp.* messages of
// internal/locale), in the language of the request's context: the one its user last read
// urlflow's pages in, else the deployment's default (Server.inLanguageOf). Tool names and
// arguments in them stay as they are in every language. The tool errors below stay in
// English: they tell the model what to call instead.

// when says when t is, for people: a time in UTC and how long from now.
func when(l *locale.Localizer, t time.Time) string {
	now := time.Now()
	return l.T("mcp.when", locale.Placeholders("Clock", l.Clock(t, now, false), "In", l.In(t, now)))
}

// asked is what a flow asks the user for, as the words of results speak of it: a secret
// the user enters on urlflow's page (set_secret asks again), or an account the user
// connects by approving access at its provider (connect asks again). The texts tell a
// model which tool fits, so they must never send it to set_secret for an account.
type asked struct {
	l     *locale.Localizer
	oauth bool
	// target is the slot or provider name; name how people call it (the slot's label, or
	// the provider's).
	target, name string
}

// asked returns what e asks for, in the language of ctx.
func (s *Server) asked(ctx context.Context, e *flow.Elicitation) asked {
	a := asked{l: locale.From(ctx), oauth: e.Kind == state.KindOAuth, target: e.Target, name: e.Target}
	if a.oauth {
		if p, ok := s.opts.Providers.Lookup(e.Target); ok {
			a.name = p.Label
		}
	} else if slot, ok := s.opts.Slots.Lookup(e.Target); ok {
		a.name = slot.Label
	}
	return a
}

// say returns the message of a secret's flow or, for an account's, of an OAuth flow, with
// the name and target of a and the placeholders of pairs.
func (a asked) say(secret, oauth string, pairs ...any) string {
	data := locale.Placeholders(append([]any{"Name", a.name, "Target", a.target}, pairs...)...)
	if a.oauth {
		return a.l.T(oauth, data)
	}
	return a.l.T(secret, data)
}

// message is the message of the URL-mode elicitation, shown with its link.
func (a asked) message() string { return a.say("mcp.message_secret", "mcp.message_oauth") }

// describe says in a sentence where e, which asks for a, stands.
func describe(e *flow.Elicitation, a asked, url string) string {
	at := []any{"URL", url, "Until", when(a.l, e.ExpiresAt)}
	switch e.State {
	case flow.Complete:
		return a.say("mcp.state_complete_secret", "mcp.state_complete_oauth")
	case flow.Declined:
		return a.say("mcp.state_declined_secret", "mcp.state_declined_oauth")
	case flow.Cancelled:
		return a.say("mcp.state_cancelled_secret", "mcp.state_cancelled_oauth")
	case flow.Expired:
		return a.say("mcp.state_expired_secret", "mcp.state_expired_oauth")
	case flow.Pending, flow.Unknown:
		return a.say("mcp.state_pending_secret", "mcp.state_pending_oauth", at...)
	case flow.Consented:
		return a.say("mcp.state_consented_secret", "mcp.state_consented_oauth", at...)
	case flow.InProgress:
		return a.say("mcp.state_in_progress_secret", "mcp.state_in_progress_oauth", at...)
	case flow.Failed:
		return a.say("mcp.state_failed_secret", "mcp.state_failed_oauth", at...)
	}
	return a.l.T("mcp.state_other", locale.Placeholders("State", string(e.State)))
}

// secretPurpose is the reason the pages show for asking for slot's secret, given how the
// stored one it replaces stands: so that urlflow can call its API for the user (callsAPI),
// or use it for them.
func secretPurpose(ctx context.Context, slot *slots.Slot, callsAPI bool) func(*flow.Replaced) string {
	l := locale.From(ctx)
	return func(replacing *flow.Replaced) string {
		name := locale.Placeholders("Name", slot.Label)
		switch {
		case replacing == nil && callsAPI:
			return l.T("mcp.purpose_secret_call", name)
		case replacing == nil:
			return l.T("mcp.purpose_secret_use", name)
		case replacing.LockReason != "":
			return l.T("mcp.purpose_secret_locked", locale.Placeholders("Name", slot.Label, "Reason", replacing.LockReason))
		case replacing.Weak:
			return l.T("mcp.purpose_secret_weak", name)
		}
		return l.T("mcp.purpose_secret_replace", name)
	}
}

// connectPurpose is the reason the pages show for asking to connect p, given how the
// connection it replaces stands: so that urlflow can call its API for the user (callsAPI),
// or use it for them.
func connectPurpose(ctx context.Context, p *providers.Provider, callsAPI bool) func(*flow.Replaced) string {
	l := locale.From(ctx)
	return func(replacing *flow.Replaced) string {
		name := locale.Placeholders("Name", p.Label)
		switch {
		case replacing != nil && replacing.Reconnect:
			return l.T("mcp.purpose_oauth_reconnect", name)
		case callsAPI:
			return l.T("mcp.purpose_oauth_call", name)
		}
		return l.T("mcp.purpose_oauth_use", name)
	}
}

// weakNote tells the model that a secret predates its slot's strength minimum.
func weakNote(ctx context.Context, slot *slots.Slot) string {
	return locale.T(ctx, "mcp.weak_note", "Name", slot.Label, "Slot", slot.Name)
}

func storedText(ctx context.Context, label string) string {
	return locale.T(ctx, "mcp.stored", "Name", label)
}

func alreadyStoredText(ctx context.Context, label string) string {
	return locale.T(ctx, "mcp.already_stored", "Name", label)
}

// openTheLink asks the user of a client that cannot open URLs to open url, which works
// until expires.
func (a asked) openTheLink(url string, expires time.Time) string {
	return a.say("mcp.open_the_link_secret", "mcp.open_the_link_oauth", "URL", url, "Until", when(a.l, expires))
}

// ended says that the flow ended in st (declined, cancelled or expired) and what to call.
func (a asked) ended(st flow.State) string {
	switch st {
	case flow.Declined:
		return a.say("mcp.ended_declined_secret", "mcp.ended_declined_oauth")
	case flow.Cancelled:
		return a.say("mcp.ended_cancelled_secret", "mcp.ended_cancelled_oauth")
	}
	return a.say("mcp.ended_expired_secret", "mcp.ended_expired_oauth")
}

// stillWaiting says that the flow id still waits for the user at url until expires.
func (a asked) stillWaiting(url string, expires time.Time, id string) string {
	return a.say("mcp.still_waiting_secret", "mcp.still_waiting_oauth", "URL", url, "Until", when(a.l, expires), "ID", id)
}

func unknownElicitationText(ctx context.Context) string { return locale.T(ctx, "mcp.unknown") }

// notCancelledText starts the answer of cancel_elicitation for a flow that had ended.
func notCancelledText(ctx context.Context) string { return locale.T(ctx, "mcp.not_cancelled") + " " }

func connectedText(ctx context.Context, label, account string) string {
	return locale.T(ctx, "mcp.connected", "Name", label, "Account", account)
}

func alreadyConnectedText(ctx context.Context, label, account string) string {
	return locale.T(ctx, "mcp.already_connected", "Name", label, "Account", account)
}

func secretDeletedText(ctx context.Context, label string) string {
	return locale.T(ctx, "mcp.secret_deleted", "Name", label)
}

func noSecretToDeleteText(ctx context.Context, label string) string {
	return locale.T(ctx, "mcp.no_secret_to_delete", "Name", label)
}

// connectionsText is list_connections' text: one line per stored credential.
func connectionsText(ctx context.Context, views []connectionView) string {
	if len(views) == 0 {
		return locale.T(ctx, "mcp.no_connections")
	}
	lines := make([]string, len(views))
	for i, v := range views {
		lines[i] = "- " + connectionLine(locale.From(ctx), v, time.Now())
	}
	return locale.T(ctx, "mcp.connections") + "\n" + strings.Join(lines, "\n")
}

// connectionLine says in a line what urlflow keeps of one credential, as seen at now.
func connectionLine(l *locale.Localizer, v connectionView, now time.Time) string {
	c := v.Connection
	at := func(t time.Time) string { return l.Clock(t, now, false) }
	name := c.Name
	if c.Service != "" {
		name = l.T("mcp.connection_name_service", locale.Placeholders("Name", c.Name, "Service", c.Service))
	}
	var parts []string
	if c.Kind == state.KindOAuth {
		scopes := strings.Join(c.Scopes, " ")
		if scopes == "" {
			scopes = l.T("mcp.no_scopes", nil)
		}
		parts = append(parts, l.T("mcp.connection_oauth", locale.Placeholders("Label", v.Label, "Name", name,
			"Account", c.Account, "Scopes", scopes, "At", at(c.StoredAt))))
		if c.RefreshedAt != nil {
			parts = append(parts, l.T("mcp.connection_refreshed", locale.Placeholders("At", at(*c.RefreshedAt))))
		}
		if c.NeedsReconnect {
			parts = append(parts, l.T("mcp.connection_reconnect", nil))
		}
	} else {
		parts = append(parts, l.T("mcp.connection_secret", locale.Placeholders("Label", v.Label, "Name", name, "At", at(c.StoredAt))))
	}
	if c.VerifiedAt != nil {
		parts = append(parts, l.T("mcp.connection_verified", locale.Placeholders("At", at(*c.VerifiedAt))))
	}
	if c.LastUsedAt != nil {
		parts = append(parts, l.T("mcp.connection_last_used", locale.Placeholders("At", at(*c.LastUsedAt))))
	} else {
		parts = append(parts, l.T("mcp.connection_not_used", nil))
	}
	if c.LockedAt != nil {
		parts = append(parts, l.T("mcp.connection_locked", locale.Placeholders("At", at(*c.LockedAt), "Reason", c.LockReason)))
	}
	if c.Weak {
		parts = append(parts, l.T("mcp.connection_weak", nil))
	}
	return strings.Join(parts, l.T("mcp.list_separator", nil))
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
