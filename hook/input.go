package hook

import "encoding/json"

// The hook events this package decides.
const (
	// EventElicitation runs before an elicitation reaches the user.
	EventElicitation = "Elicitation"
	// EventElicitationResult runs after the user answered, before the answer is sent.
	EventElicitationResult = "ElicitationResult"
)

// The modes of an elicitation. A request without a mode is a form.
const (
	ModeForm = "form"
	ModeURL  = "url"
)

// Input is what Claude Code gives an Elicitation or ElicitationResult hook on its standard
// input (or an http hook as its body).
type Input struct {
	HookEventName string `json:"hook_event_name"`
	SessionID     string `json:"session_id,omitempty"`
	CWD           string `json:"cwd,omitempty"`
	MCPServerName string `json:"mcp_server_name"`
	Mode          string `json:"mode,omitempty"`
	ElicitationID string `json:"elicitation_id,omitempty"`

	// Elicitation only.
	Message         string          `json:"message,omitempty"`
	URL             string          `json:"url,omitempty"`
	RequestedSchema json.RawMessage `json:"requested_schema,omitempty"`

	// ElicitationResult only.
	Action  string                     `json:"action,omitempty"`
	Content map[string]json.RawMessage `json:"content,omitempty"`
}

// mode returns the input's mode, form when it has none.
func (in *Input) mode() string {
	if in.Mode == "" {
		return ModeForm
	}
	return in.Mode
}

// Output is a hook's answer on standard output (or an http hook's response body) that
// overrides the elicitation's action.
type Output struct {
	HookSpecificOutput SpecificOutput `json:"hookSpecificOutput"`
}

// SpecificOutput is the event's part of an Output.
type SpecificOutput struct {
	HookEventName string `json:"hookEventName"`
	Action        string `json:"action"`
}

// Refusal returns the Output that refuses the request (Elicitation) or forces a decline
// (ElicitationResult).
func Refusal(event string) Output {
	return Output{SpecificOutput{HookEventName: event, Action: "decline"}}
}
