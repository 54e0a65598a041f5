package mcp

import (
	"context"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/urlflow/urlflow/state/flow"
)

// The results of the tools: each structuredContent is a Go type of its own, and its text
// comes from words.go. tools/list declares no output schema for them: that would change
// the wire and cost a validation per call, a separate and measured decision.

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

// connectedResult is connect's structuredContent once the account is connected.
type connectedResult struct {
	Account string `json:"account"`
	// ElicitationID is the elicitation that connected it, when connect asked.
	ElicitationID string `json:"elicitationId,omitempty"`
	Message       string `json:"message"`
	Provider      string `json:"provider"`
	Status        string `json:"status"` // "connected"
}

// connectionsResult is list_connections' structuredContent.
type connectionsResult struct {
	Connections []connectionView `json:"connections"`
}

// secretDeletedResult is disconnect's structuredContent for a secret.
type secretDeletedResult struct {
	Deleted bool   `json:"deleted"`
	Name    string `json:"name"`
}

// accountDisconnectedResult is disconnect's structuredContent for a connection.
type accountDisconnectedResult struct {
	Deleted bool   `json:"deleted"`
	Name    string `json:"name"`
	Revoked bool   `json:"revoked"`
}

// unknownResult is the structuredContent for an elicitation ID that is not the user's.
type unknownResult struct {
	ID    string     `json:"id"`
	State flow.State `json:"state"`
}

// textResult is a result whose structuredContent is structured and whose text is text.
func textResult(text string, structured any) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}}, StructuredContent: structured}
}

func result(r flowResult) *sdk.CallToolResult { return textResult(r.Message, r) }

func stored(ctx context.Context, label, name, elicitationID string) *sdk.CallToolResult {
	return result(flowResult{Status: "stored", Name: name, ElicitationID: elicitationID, State: flow.Complete,
		Message: storedText(ctx, label)})
}

func alreadyStored(ctx context.Context, label, name string) *sdk.CallToolResult {
	return result(flowResult{Status: "stored", Name: name, Message: alreadyStoredText(ctx, label)})
}

// userActionRequired is the result for a client that cannot open a URL-mode elicitation:
// the user opens the link themselves, and the same call succeeds afterwards.
func (s *Server) userActionRequired(ctx context.Context, e *flow.Elicitation) *sdk.CallToolResult {
	url := flow.ElicitationURL(s.opts.PublicURL, e.ID)
	expires := e.ExpiresAt
	return result(flowResult{Status: "user_action_required", Name: e.Target, ElicitationID: e.ID, State: e.State,
		URL: url, ExpiresAt: &expires, Message: s.asked(ctx, e).openTheLink(url, e.ExpiresAt)})
}

// outcome is the result for e after waiting: nil when complete (the tool goes on), the
// honest end otherwise, or "still waiting" while it runs. Each end names the call that
// fits what was asked for.
func (s *Server) outcome(ctx context.Context, e *flow.Elicitation) *sdk.CallToolResult {
	a := s.asked(ctx, e)
	r := flowResult{Status: string(e.State), Name: e.Target, ElicitationID: e.ID, State: e.State}
	switch e.State {
	case flow.Complete:
		return nil
	case flow.Declined, flow.Cancelled, flow.Expired:
		r.Message = a.ended(e.State)
	default:
		url := flow.ElicitationURL(s.opts.PublicURL, e.ID)
		expires := e.ExpiresAt
		r.Status, r.URL, r.ExpiresAt = "waiting", url, &expires
		r.Message = a.stillWaiting(url, e.ExpiresAt, e.ID)
	}
	return result(r)
}

func unknownElicitation(ctx context.Context, id string) *sdk.CallToolResult {
	return textResult(unknownElicitationText(ctx), unknownResult{ID: id, State: flow.Unknown})
}
