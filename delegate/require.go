package delegate

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Need is what a tool needs from its user: the credential of a secret slot or a provider
// that urlflow's configuration allows this server.
type Need struct {
	// Slot or Provider names it, one of the two.
	Slot, Provider string
	// Label tells apart several credentials of the slot or provider that your server holds
	// for one user (two GitHub accounts): 1 to 32 of a-z 0-9 _ -; empty for the default
	// account.
	Label string
	// Scopes are the access to ask of a provider (its default scopes when empty).
	Scopes []string
	// Message tells the user why, on urlflow's pages (a sentence naming your server when
	// empty).
	Message string
	// Offline asks the user, on urlflow's consent page, to let your server use the
	// credential while the user is away (background jobs): then Client.Offline reaches it
	// by the user's reference alone, until the user withdraws that on urlflow's
	// Connections page. A credential stored without it is asked for again.
	Offline bool
	// Metadata is your server's own: at most 16 entries, keys of letters, digits and . _ :
	// - (up to 40 bytes), 2 KB in all. urlflow keeps it with the flow and the credential it
	// stores and gives it back in their answers, events and webhooks; never to the user's
	// client. Not for secrets.
	Metadata map[string]string
}

// inputKey names the one input request of a 2026-07-28 input_required result.
const inputKey = "auth"

// firstModernVersion is the first protocol version whose clients retry a tool call with
// its input requests answered (multi round-trip) instead of being sent requests.
const firstModernVersion = "2026-07-28"

// Require returns the credential the tool's user has stored with urlflow for need, or,
// when there is none yet, the answer the tool returns instead, for the calling client:
//
//   - protocol 2026-07-28: an input_required result with urlflow's URL and requestState;
//     the client's retry of the call comes back here and gets the credential once the
//     user has finished (or input_required again, or the honest outcome);
//   - 2025-11-25 with URL mode, StylePush: it sends elicitation/create and waits, bounded,
//     for the user, then returns the credential (or the honest outcome: declined, still
//     waiting, ...);
//   - 2025-11-25 with URL mode, StyleError: the URL-elicitation-required error (-32042),
//     returned as err, as it is; the client gets notifications/elicitation/complete when
//     the user has finished (see Follow and WebhookHandler) and calls the tool again;
//   - a client without URL mode: a result that tells the user to open the URL in their
//     browser and call again.
//
// The user is the one whose access token (aud: this server's resource) came with the
// request; urlflow checks it and never accepts it as anything else. Other errors are
// *APIError or errors reaching urlflow.
func (c *Client) Require(ctx context.Context, req *mcp.CallToolRequest, need Need) (*Credential, *mcp.CallToolResult, error) {
	token := userToken(req)
	if token == "" {
		return nil, nil, errors.New("delegate: the request carries no bearer token of its user: urlflow needs it as evidence of who the user is")
	}
	body := requestOf(need)
	body.Call = callOf(req)
	if info := req.ClientInfo(); info != nil {
		body.Client = &clientInfo{Name: info.Name, Title: info.Title, Version: info.Version}
	}
	modern := req.Extra != nil && modernVersion(req.Extra.Header.Get("Mcp-Protocol-Version"))
	retry := modern && req.Params.RequestState != ""
	if retry {
		body.RequestState = req.Params.RequestState
		if r, ok := req.Params.InputResponses[inputKey].(*mcp.ElicitResult); ok && r != nil {
			body.Action = r.Action
		}
	}
	ans, err := c.create(ctx, token, body, "")
	if err != nil {
		return nil, nil, err
	}
	if ans.Status == "stored" {
		return c.credential(need, token), nil, nil
	}
	e := ans.Elicitation
	if ans.Status == "ended" || e == nil {
		return nil, outcomeResult(e), nil
	}
	caps := req.ClientCapabilities()
	if caps == nil || caps.Elicitation == nil || caps.Elicitation.URL == nil {
		return nil, openItResult(e), nil
	}
	params := &mcp.ElicitParams{Mode: "url", URL: e.URL, ElicitationID: e.ID, Message: message(need)}
	switch {
	case retry:
		// The client answered and came back: wait a while for the user before asking again.
		return c.afterRetry(ctx, req, need, token, body, e)
	case modern:
		return nil, inputRequired(e, need, ans.RequestState), nil
	case c.opts.Style == StyleError:
		c.owe(e.ID, req.Session)
		return nil, nil, mcp.URLElicitationRequiredError([]*mcp.ElicitParams{params})
	}
	return c.push(ctx, req, need, token, params)
}

// modernVersion reports whether version, a protocol version as the request's header names
// it, is 2026-07-28 or later: a date (anything else is not).
func modernVersion(version string) bool {
	_, err := time.Parse(time.DateOnly, version)
	return err == nil && version >= firstModernVersion
}

// afterRetry waits for the elicitation of a 2026-07-28 retry to end (waitFor: RetryWait, or
// with progress), then answers with the credential, the outcome, or input_required again.
func (c *Client) afterRetry(ctx context.Context, req *mcp.CallToolRequest, need Need, token string, body createRequest, e *Elicitation) (*Credential, *mcp.CallToolResult, error) {
	if _, err := c.waitFor(ctx, req, e, c.opts.RetryWait); err != nil {
		return nil, nil, err
	}
	body.Action = "" // recorded already
	ans, err := c.create(ctx, token, body, "")
	if err != nil {
		return nil, nil, err
	}
	switch {
	case ans.Status == "stored":
		return c.credential(need, token), nil, nil
	case ans.Status == "ended" || ans.Elicitation == nil:
		return nil, outcomeResult(ans.Elicitation), nil
	}
	return nil, inputRequired(ans.Elicitation, need, ans.RequestState), nil
}

// inputRequired is the input_required result that asks a 2026-07-28 client to send its
// user to e. Its URL-mode request has no elicitationId: that era's request has none, and
// no completion notification refers to it.
func inputRequired(e *Elicitation, need Need, requestState string) *mcp.CallToolResult {
	params := &mcp.ElicitParams{Mode: "url", URL: e.URL, Message: message(need)}
	return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{inputKey: params}, RequestState: requestState}
}

// push sends elicitation/create, reports the client's answer to urlflow (an accept is
// consent, never success), and waits for the user (waitFor: PushWait, or with progress).
func (c *Client) push(ctx context.Context, req *mcp.CallToolRequest, need Need, token string, params *mcp.ElicitParams) (*Credential, *mcp.CallToolResult, error) {
	id := params.ElicitationID
	c.owe(id, req.Session)
	e := Elicitation{ID: id, URL: params.URL} // what an answer refused as late (409) leaves
	res, err := req.Session.Elicit(ctx, params)
	if err != nil {
		// No answer is not an answer: the user may still finish in the browser, as with
		// urlflow's own tools (the flow is not ended for it).
		c.log.Info("elicitation/create failed; waiting for the user anyway", "elicitation_id", id, "err", err)
	} else if _, err := c.do(ctx, http.MethodPost, "elicitations/"+id+"/answer", "", map[string]string{"action": res.Action}, &e); err != nil {
		var apiErr *APIError
		if !errors.As(err, &apiErr) || apiErr.Status != http.StatusConflict {
			return nil, nil, err
		}
	}
	e.URL = params.URL // the answer has it only while the flow runs
	cur, err := c.waitFor(ctx, req, &e, c.opts.PushWait)
	if err != nil {
		return nil, nil, err
	}
	if !cur.Ended() {
		return nil, waitingResult(cur), nil
	}
	c.settle(cur) // the notification before the result
	if cur.State != "complete" {
		return nil, outcomeResult(cur), nil
	}
	again := requestOf(need)
	again.Message = "" // asked already: this create finds the credential
	ans, err := c.create(ctx, token, again, "")
	if err != nil {
		return nil, nil, err
	}
	if ans.Status != "stored" {
		// Removed between its completion and now (disconnected): ask again next call.
		return nil, openItResult(ans.Elicitation), nil
	}
	return c.credential(need, token), nil, nil
}

// userToken is the bearer token the user sent with req.
func userToken(req *mcp.CallToolRequest) string {
	if req.Extra == nil {
		return ""
	}
	scheme, token, _ := strings.Cut(req.Extra.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// callOf binds a requestState to the tool and its arguments.
func callOf(req *mcp.CallToolRequest) string {
	var v any
	if len(req.Params.Arguments) > 0 && json.Unmarshal(req.Params.Arguments, &v) != nil {
		v = string(req.Params.Arguments)
	}
	canonical, _ := json.Marshal(v) // maps encode with sorted keys
	sum := sha256.Sum256(canonical)
	call := req.Params.Name + ":" + base64.RawURLEncoding.EncodeToString(sum[:])
	if len(call) > 200 {
		call = call[len(call)-200:]
	}
	return call
}

// message is the text shown with the URL in the client.
func message(need Need) string {
	what := need.Slot
	if what == "" {
		what = need.Provider + " account"
	}
	return fmt.Sprintf("Open this link in your browser to provide your %s (this tool needs it). It is entered on urlflow, never here.", what)
}

// result is a tool result with text for the model and the user, and the same as
// structured content.
func result(status, text string, e *Elicitation) *mcp.CallToolResult {
	structured := map[string]any{"status": status}
	if e != nil {
		structured["elicitationId"], structured["state"] = e.ID, e.State
		if e.URL != "" {
			structured["url"], structured["expiresAt"] = e.URL, e.ExpiresAt
		}
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: structured}
}

// openItResult tells a user whose client cannot open URLs to open it themselves.
func openItResult(e *Elicitation) *mcp.CallToolResult {
	if e == nil || e.URL == "" {
		return result("user_action_required", "The credential this tool needs is not available yet. Call the tool again.", e)
	}
	return result("user_action_required", "This tool needs a credential that you enter on urlflow, in your own browser. "+
		"Open "+e.URL+" (you sign in there; the link alone grants nothing), then call the tool again.", e)
}

// waitingResult says that the user has not finished yet.
func waitingResult(e *Elicitation) *mcp.CallToolResult {
	return result("user_action_required", "Still waiting for you to finish at "+e.URL+
		". Call the tool again once you are done.", e)
}

// outcomeResult says how an elicitation ended without the credential.
func outcomeResult(e *Elicitation) *mcp.CallToolResult {
	if e == nil {
		return result("ended", "The request for the credential ended without it. Call the tool again to ask again.", nil)
	}
	return result(e.State, "The request for the credential ended: "+e.State+". Nothing was stored. Call the tool again to ask again.", e)
}
