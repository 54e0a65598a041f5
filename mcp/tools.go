package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/urlflow/urlflow/ask"
	"github.com/urlflow/urlflow/internal/locale"
	"github.com/urlflow/urlflow/recovery"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/flow"
)

// turn is one tool call as urlflow's tools see it, whatever the protocol era: the era, the
// SDK's request, and the user of its verified token.
type turn struct {
	era  era
	req  *sdk.CallToolRequest
	user state.User
}

// client returns what the calling client says about itself (self-reported): from the
// request's _meta in 2026-07-28, from initialize before.
func (t turn) client() state.ClientInfo { return clientInfo(t.req.ClientInfo()) }

// clientInfo is where what a client says about itself enters urlflow, in either era: the
// name, title and version, bounded and cleaned (state.NewClientInfo).
func clientInfo(impl *sdk.Implementation) state.ClientInfo {
	if impl == nil {
		return state.ClientInfo{}
	}
	return state.NewClientInfo(impl.Name, impl.Title, impl.Version)
}

// urlMode reports whether the calling client declared URL-mode elicitation.
func (t turn) urlMode() bool {
	caps := t.req.ClientCapabilities()
	return caps != nil && caps.Elicitation != nil && caps.Elicitation.URL != nil
}

// sessionID is the MCP session of a 2025-11-25 call; 2026-07-28 calls have none.
func (t turn) sessionID() string {
	if t.era == era2026 || t.req.Session == nil {
		return ""
	}
	return t.req.Session.ID()
}

var errNoUser = errors.New("this request carries no verified user; sign in to urlflow and try again")

// tool adapts one of s's tools to the SDK for era e: it runs in the language of the
// request's user (inLanguageOf).
func tool[In any](s *Server, e era, fn func(context.Context, turn, In) (*sdk.CallToolResult, error)) sdk.ToolHandlerFor[In, any] {
	return func(ctx context.Context, req *sdk.CallToolRequest, in In) (*sdk.CallToolResult, any, error) {
		user, ok := userOf(req.Extra)
		if !ok {
			return nil, nil, errNoUser
		}
		res, err := fn(s.inLanguageOf(ctx, user), turn{era: e, req: req, user: user}, in)
		return res, nil, err
	}
}

// addTool adds one of urlflow's tools to srv for era e. Its input schema is inferred from
// In once, here, and kept as JSON: the SDK validates arguments with it as with an
// inferred schema, and tools/list copies it instead of encoding a jsonschema.Schema
// again on every call (which took a third of urlflow's CPU in a tools/list).
func addTool[In any](s *Server, srv *sdk.Server, e era, t *sdk.Tool, fn func(context.Context, turn, In) (*sdk.CallToolResult, error)) {
	schema, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("tool %s: input schema: %v", t.Name, err)) // a programming error
	}
	raw, err := json.Marshal(schema)
	if err != nil {
		panic(fmt.Sprintf("tool %s: input schema: %v", t.Name, err))
	}
	t.InputSchema = json.RawMessage(raw)
	sdk.AddTool(srv, t, tool(s, e, fn))
	registeredTools.Store(t.Name, true)
}

// registeredTools holds the names of urlflow's tools, so that a span names a tools/call by
// its tool only when it is one of them (traceReceived): any other name is the client's text.
var registeredTools sync.Map

func (s *Server) addTools(srv *sdk.Server, e era) {
	addTool(s, srv, e, &sdk.Tool{
		Name:  "set_secret",
		Title: "Store a secret",
		Description: "Ask the user to enter a secret (such as an API key) in their own browser and store it " +
			"encrypted in urlflow. The secret never passes through this conversation; the result only says " +
			"whether it is stored. If it is already stored, nothing is asked unless replace is true.",
	}, s.setSecret)
	addTool(s, srv, e, &sdk.Tool{
		Name:  "call_api",
		Title: "Call an API with a stored secret",
		Description: "Make an HTTP request to the API a stored secret belongs to. urlflow adds the secret " +
			"itself, as the secret's configuration says; the result has the status, selected headers and " +
			"body, never the secret (it is redacted even when the API echoes it). The path stays under the " +
			"API's base URL. If the secret is not stored yet, the user is asked for it first, as with set_secret.",
	}, s.callAPI)
	addTool(s, srv, e, &sdk.Tool{
		Name:  "connect",
		Title: "Connect a third-party account",
		Description: "Ask the user to connect their account at a third-party provider (by OAuth, in their own " +
			"browser). urlflow keeps the tokens and uses them for call_api; they never pass through this " +
			"conversation. scopes asks for more access than the provider's defaults.",
	}, s.connect)
	addTool(s, srv, e, &sdk.Tool{
		Name:  "list_connections",
		Title: "List stored secrets",
		Description: "List the secrets urlflow keeps for you, for its own tools and for the MCP servers that " +
			"delegate to it (service): name, kind, when each was stored, verified and last used. Never their values.",
	}, s.listConnections)
	addTool(s, srv, e, &sdk.Tool{
		Name:  "disconnect",
		Title: "Delete a stored secret",
		Description: "Delete one of your stored secrets from urlflow, or one a delegating MCP server holds (name its " +
			"service as list_connections does). Nothing can use it until it is stored again.",
	}, s.disconnect)
	addTool(s, srv, e, &sdk.Tool{
		Name:  "elicitation_status",
		Title: "Check a request",
		Description: "Return the state of one of your elicitations (pending, consented, in_progress, complete, " +
			"failed, unknown, declined, cancelled, expired) with its history. With waitSeconds (at most 60) " +
			"it waits that long for the elicitation to end.",
	}, s.elicitationStatus)
	addTool(s, srv, e, &sdk.Tool{
		Name:  "cancel_elicitation",
		Title: "Withdraw a request",
		Description: "Cancel one of your elicitations that is still running. Its link stops working and " +
			"nothing is stored. An elicitation that has already ended is left as it is.",
	}, s.cancelElicitation)
}

type setSecretArgs struct {
	Name    string `json:"name" jsonschema:"the secret to store, by its slot name (for example demo_api_key)"`
	Replace bool   `json:"replace,omitempty" jsonschema:"true to replace a secret that is already stored"`
}

func (s *Server) setSecret(ctx context.Context, t turn, args setSecretArgs) (*sdk.CallToolResult, error) {
	slot, err := s.slotFor(args.Name)
	if err != nil {
		return nil, err
	}
	n := s.need(t, state.KindSecret, slot.Name, nil, secretPurpose(ctx, slot, false))
	n.Replace = args.Replace
	o, err := s.opts.Asker.Check(ctx, n)
	if err != nil {
		return nil, s.unavailable(ctx, err)
	}
	if o.Status == ask.Stored {
		res := alreadyStored(ctx, slot.Label, slot.Name)
		if s.opts.Asker.Weak(ctx, t.user, o.Credential) {
			res.Content = append(res.Content, &sdk.TextContent{Text: weakNote(ctx, slot)})
		}
		return res, nil
	}
	e, res, err := s.askFor(ctx, t, n, o)
	if res != nil || err != nil {
		return res, err
	}
	return stored(ctx, slot.Label, slot.Name, e.ID), nil
}

// errUnavailable is what a tool says when urlflow's store fails.
var errUnavailable = errors.New("urlflow could not reach its store; nothing was changed, please try again in a moment")

// unavailable logs err and returns errUnavailable: the detail (addresses, Redis messages)
// stays in the log.
func (s *Server) unavailable(ctx context.Context, err error) error {
	s.log.ErrorContext(ctx, "tool failed", "err", err)
	return errUnavailable
}

type elicitationArgs struct {
	ElicitationID string `json:"elicitationId" jsonschema:"the ID of the elicitation"`
}

type statusArgs struct {
	ElicitationID string `json:"elicitationId" jsonschema:"the ID of the elicitation"`
	WaitSeconds   int    `json:"waitSeconds,omitempty" jsonschema:"wait up to this many seconds (at most 60) for the elicitation to end"`
}

// ownElicitation returns elicitation id if it belongs to user, and state.ErrNotFound for
// anything else. With seen, it may return the copy this replica last saw (Store.Seen):
// whose it is never changes, but its state may have.
func (s *Server) ownElicitation(ctx context.Context, user state.User, id string, seen bool) (*flow.Elicitation, error) {
	e, ok := s.opts.Flows.Seen(id)
	if !seen || !ok {
		var err error
		if e, err = s.opts.Flows.Read(ctx, id); err != nil {
			return nil, err
		}
	}
	if e.User != user {
		return nil, state.ErrNotFound
	}
	return e, nil
}

func (s *Server) elicitationStatus(ctx context.Context, t turn, args statusArgs) (*sdk.CallToolResult, error) {
	wake, stop := s.opts.Hub.Wait(args.ElicitationID)
	defer stop()
	e, err := s.ownElicitation(ctx, t.user, args.ElicitationID, false)
	if errors.Is(err, state.ErrNotFound) {
		return unknownElicitation(ctx, args.ElicitationID), nil
	}
	if err != nil {
		return nil, s.unavailable(ctx, err)
	}
	// Clamp the seconds before converting them, so that a huge waitSeconds cannot overflow.
	seconds := min(max(args.WaitSeconds, 0), int(s.opts.StatusWaitLimit/time.Second)+1)
	wait := min(time.Duration(seconds)*time.Second, s.opts.StatusWaitLimit)
	if wait > 0 && !e.State.Terminal() {
		if e, err = s.waitForEnd(ctx, e, wake, time.Now().Add(wait), nil); err != nil {
			return nil, err
		}
	}
	return s.statusResult(ctx, e)
}

func (s *Server) cancelElicitation(ctx context.Context, t turn, args elicitationArgs) (*sdk.CallToolResult, error) {
	e, err := s.ownElicitation(ctx, t.user, args.ElicitationID, true) // Apply reads what it must
	if errors.Is(err, state.ErrNotFound) {
		return unknownElicitation(ctx, args.ElicitationID), nil
	}
	if err != nil {
		return nil, s.unavailable(ctx, err)
	}
	cancelled, err := s.opts.Recovery.Cancel(ctx, e, flow.Act{Actor: state.ActorClient, Reason: "cancelled with cancel_elicitation"})
	var ended *recovery.Conflict
	switch {
	case errors.As(err, &ended):
		return s.notCancelled(ctx, ended.Elicitation)
	case errors.Is(err, state.ErrNotFound): // gone since this replica saw it
		return unknownElicitation(ctx, args.ElicitationID), nil
	case err != nil:
		return nil, s.unavailable(ctx, err)
	}
	return s.statusResult(ctx, cancelled)
}

// statusResult returns e's public view with its history.
func (s *Server) statusResult(ctx context.Context, e *flow.Elicitation) (*sdk.CallToolResult, error) {
	history, err := s.opts.Flows.History(ctx, e.ID)
	if err != nil {
		return nil, s.unavailable(ctx, err)
	}
	view := e.View(flow.ElicitationURL(s.opts.PublicURL, e.ID), history)
	return textResult(describe(e, s.asked(ctx, e), view.URL), view), nil
}

// notCancelled is cancel_elicitation's error result for e, which had already ended: its
// status, after saying that nothing was cancelled.
func (s *Server) notCancelled(ctx context.Context, e *flow.Elicitation) (*sdk.CallToolResult, error) {
	res, err := s.statusResult(ctx, e)
	if err != nil {
		return nil, err
	}
	text := res.Content[0].(*sdk.TextContent)
	text.Text = notCancelledText(ctx) + text.Text
	res.IsError = true
	return res, nil
}

// inLanguageOf returns ctx with the language user last read urlflow's pages in, else the
// catalog's default: the words of results come in it. Without an answer from Redis, the
// words come in the default: the call goes on.
func (s *Server) inLanguageOf(ctx context.Context, user state.User) context.Context {
	var lang string
	if s.opts.Languages != nil {
		var err error
		if lang, err = s.opts.Languages.Of(ctx, user); err != nil {
			s.log.WarnContext(ctx, "the language of the user is unknown; the results speak the default", "err", err)
		}
	}
	return locale.With(ctx, s.catalog.Negotiate(lang, ""))
}
