package mcp

import (
	"fmt"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/flow"
)

// The words of tool results live here, in one place. For a user whose client cannot open
// URLs by itself, the result is the whole product: it must be clear, calm and complete.

// flowResult is the structuredContent of a tool that asked for a credential.
type flowResult struct {
	// Status is "stored", "user_action_required", "waiting", or the ended state
	// ("declined", "cancelled", "expired").
	Status        string     `json:"status"`
	Name          string     `json:"name,omitempty"`
	ElicitationID string     `json:"elicitationId,omitempty"`
	State         flow.State `json:"state,omitempty"`
	URL           string     `json:"url,omitempty"`
	ExpiresAt     *time.Time `json:"expiresAt,omitempty"`
	Message       string     `json:"message"`
}

func result(r flowResult) *sdk.CallToolResult {
	return &sdk.CallToolResult{
		Content:           []sdk.Content{&sdk.TextContent{Text: r.Message}},
		StructuredContent: r,
	}
}

func stored(label, name, elicitationID string) *sdk.CallToolResult {
	return result(flowResult{
		Status: "stored", Name: name, ElicitationID: elicitationID, State: flow.Complete,
		Message: fmt.Sprintf("Your %s is stored. urlflow keeps it encrypted and uses it for you; "+
			"its value is never shown in this conversation.", label),
	})
}

func alreadyStored(label, name string) *sdk.CallToolResult {
	return result(flowResult{
		Status: "stored", Name: name,
		Message: fmt.Sprintf("Your %s is already stored; nothing was asked. "+
			"To replace it, call set_secret again with replace set to true.", label),
	})
}

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

// userActionRequired is the result for a client that cannot open a URL-mode elicitation:
// the user opens the link themselves, and the same call succeeds afterwards.
func (s *Server) userActionRequired(e *flow.Elicitation) *sdk.CallToolResult {
	a := s.asked(e)
	url := flow.ElicitationURL(s.opts.PublicURL, e.ID)
	expires := e.ExpiresAt
	return result(flowResult{
		Status: "user_action_required", Name: e.Target, ElicitationID: e.ID, State: e.State,
		URL: url, ExpiresAt: &expires,
		Message: fmt.Sprintf("To continue, please open this link in your browser:\n\n%s\n\n%s\n\n"+
			"When the page says it is %s, ask me to continue: the same request will then succeed. "+
			"The link works until %s.", url, a.onThePage(), a.done(), when(e.ExpiresAt)),
	})
}

// outcome is the result for e after waiting: nil when complete (the tool goes on), the
// honest end otherwise, or "still waiting" while it runs. Each end names the call that
// fits what was asked for.
func (s *Server) outcome(e *flow.Elicitation) *sdk.CallToolResult {
	a := s.asked(e)
	r := flowResult{Status: string(e.State), Name: e.Target, ElicitationID: e.ID, State: e.State}
	switch e.State {
	case flow.Complete:
		return nil
	case flow.Declined:
		r.Message = fmt.Sprintf("%s was declined. %s If that was a mistake, %s for a new link.", a.request(), a.nothing(), a.again())
	case flow.Cancelled:
		r.Message = fmt.Sprintf("%s was cancelled. %s %s to start over.", a.request(), a.nothing(), capitalized(a.again()))
	case flow.Expired:
		r.Message = fmt.Sprintf("%s expired before it was used. %s %s for a new link.", a.link(), a.nothing(), capitalized(a.again()))
	default:
		url := flow.ElicitationURL(s.opts.PublicURL, e.ID)
		expires := e.ExpiresAt
		r.Status, r.URL, r.ExpiresAt = "waiting", url, &expires
		r.Message = fmt.Sprintf("Still waiting for you to %s at %s . The link works until %s. "+
			"When the page says it is %s, %s (or elicitation_status with elicitationId %s) to continue.",
			a.action(), url, when(e.ExpiresAt), a.done(), a.again(), e.ID)
	}
	return result(r)
}

// capitalized returns s with its first letter in upper case (s starts with ASCII).
func capitalized(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func unknownElicitation(id string) *sdk.CallToolResult {
	return &sdk.CallToolResult{
		Content: []sdk.Content{&sdk.TextContent{Text: "No request with that ID belongs to you; " +
			"its state is unknown. Check the ID, or start again."}},
		StructuredContent: map[string]string{"id": id, "state": string(flow.Unknown)},
	}
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
