package mcp

import (
	"fmt"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
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

// userActionRequired is the result for a client that cannot open a URL-mode elicitation:
// the user opens the link themselves, and the same call succeeds afterwards.
func (s *Server) userActionRequired(e *flow.Elicitation, label string) *sdk.CallToolResult {
	url := flow.ElicitationURL(s.opts.PublicURL, e.ID)
	expires := e.ExpiresAt
	return result(flowResult{
		Status: "user_action_required", Name: e.Target, ElicitationID: e.ID, State: e.State,
		URL: url, ExpiresAt: &expires,
		Message: fmt.Sprintf("To continue, please open this link in your browser:\n\n%s\n\n"+
			"Sign in there and enter your %s on urlflow's page. urlflow keeps it encrypted; "+
			"it never passes through this conversation, and the link by itself gives no one access.\n\n"+
			"When the page says it is stored, ask me to continue: the same request will then succeed. "+
			"The link works until %s.", url, label, when(e.ExpiresAt)),
	})
}

// outcome is the result for e after waiting: nil when complete (the tool goes on), the
// honest end otherwise, or "still waiting" while it runs.
func (s *Server) outcome(e *flow.Elicitation, label string) *sdk.CallToolResult {
	r := flowResult{Status: string(e.State), Name: e.Target, ElicitationID: e.ID, State: e.State}
	switch e.State {
	case flow.Complete:
		return nil
	case flow.Declined:
		r.Message = fmt.Sprintf("The request for your %s was declined. Nothing was stored. "+
			"If that was a mistake, call set_secret again for a new link.", label)
	case flow.Cancelled:
		r.Message = fmt.Sprintf("The request for your %s was cancelled. Nothing was stored. "+
			"Call set_secret again to start over.", label)
	case flow.Expired:
		r.Message = fmt.Sprintf("The link for your %s expired before it was used. Nothing was stored. "+
			"Call set_secret again for a new link.", label)
	default:
		url := flow.ElicitationURL(s.opts.PublicURL, e.ID)
		expires := e.ExpiresAt
		r.Status, r.URL, r.ExpiresAt = "waiting", url, &expires
		r.Message = fmt.Sprintf("Still waiting for you to enter your %s at %s . "+
			"The link works until %s. When the page says it is stored, call set_secret again "+
			"(or elicitation_status with elicitationId %s) to continue.", label, url, when(e.ExpiresAt), e.ID)
	}
	return result(r)
}

func unknownElicitation(id string) *sdk.CallToolResult {
	return &sdk.CallToolResult{
		Content: []sdk.Content{&sdk.TextContent{Text: "No request with that ID belongs to you; " +
			"its state is unknown. Check the ID, or start again."}},
		StructuredContent: map[string]string{"id": id, "state": string(flow.Unknown)},
	}
}

// describe says in a sentence where e stands.
func describe(e *flow.Elicitation, label, url string) string {
	switch e.State {
	case flow.Complete:
		return fmt.Sprintf("The request for your %s is complete: it is stored.", label)
	case flow.Declined:
		return fmt.Sprintf("The request for your %s was declined; nothing was stored.", label)
	case flow.Cancelled:
		return fmt.Sprintf("The request for your %s was cancelled; nothing was stored.", label)
	case flow.Expired:
		return fmt.Sprintf("The request for your %s expired; nothing was stored.", label)
	case flow.Pending, flow.Unknown:
		return fmt.Sprintf("The request for your %s is waiting for you to open %s (until %s).", label, url, when(e.ExpiresAt))
	case flow.Consented:
		return fmt.Sprintf("You agreed in your client; the request for your %s is waiting for you to open %s (until %s).", label, url, when(e.ExpiresAt))
	case flow.InProgress:
		return fmt.Sprintf("The page for your %s is open in your browser; waiting for you to finish there (until %s).", label, when(e.ExpiresAt))
	case flow.Failed:
		return fmt.Sprintf("The last attempt for your %s failed; you can try again at %s (until %s).", label, url, when(e.ExpiresAt))
	}
	return "The request is " + string(e.State) + "."
}
