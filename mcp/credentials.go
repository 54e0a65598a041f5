package mcp

import (
	"context"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/urlflow/urlflow/ask"
	"github.com/urlflow/urlflow/oauth/providers"
	"github.com/urlflow/urlflow/proxy"
	"github.com/urlflow/urlflow/slots"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/credentials"
	"github.com/urlflow/urlflow/upstream"
)

// The tools that use and manage stored credentials. None of them ever returns a value.

type callAPIArgs struct {
	Name   string            `json:"name" jsonschema:"the stored secret to use, by its slot name (for example demo_api_key)"`
	Method string            `json:"method" jsonschema:"the HTTP method, one of those the secret's configuration allows"`
	Path   string            `json:"path" jsonschema:"the path under the API's base URL, for example /whoami"`
	Query  map[string]string `json:"query,omitempty" jsonschema:"query parameters"`
	Body   string            `json:"body,omitempty" jsonschema:"the request body; sent as JSON when it is valid JSON"`
}

// disconnectArgs name a stored credential: urlflow's own, or one a delegating service holds.
type disconnectArgs struct {
	Name    string `json:"name" jsonschema:"the stored secret or connection, by its slot or provider name"`
	Service string `json:"service,omitempty" jsonschema:"the delegating service that holds it, as list_connections names it; leave out for urlflow's own"`
}

// slotFor returns the slot named name or an error listing the known ones.
func (s *Server) slotFor(name string) (*slots.Slot, error) {
	slot, ok := s.opts.Slots.Lookup(name)
	if !ok {
		return nil, noSuchSecretError(name, s.opts.Slots.Names())
	}
	return slot, nil
}

func (s *Server) callAPI(ctx context.Context, t turn, args callAPIArgs) (*sdk.CallToolResult, error) {
	if p, ok := s.opts.Providers.Lookup(args.Name); ok {
		return s.callProvider(ctx, t, p, args)
	}
	slot, err := s.slotFor(args.Name)
	if err != nil {
		return nil, err
	}
	if slot.API == nil {
		return nil, storedOnlyError(slot)
	}
	req := args.request()
	// Refuse what can never work before asking the user for anything.
	if err := proxy.Check(slot.API, req); err != nil {
		return nil, err
	}

	n := s.need(t, state.KindSecret, slot.Name, nil, secretPurpose(ctx, slot, true))
	o, err := s.opts.Asker.Check(ctx, n)
	if err != nil {
		return nil, s.unavailable(ctx, err)
	}
	cred := o.Credential
	if o.Status != ask.Stored {
		// Ask for it first, the way set_secret does; the call goes on once it is stored.
		if _, res, err := s.askFor(ctx, t, n, o); res != nil || err != nil {
			return res, err
		}
		if cred, err = s.opts.Credentials.Get(ctx, t.user, slot.Name); err != nil {
			return nil, s.unavailable(ctx, err)
		}
	}
	use := proxy.Use{User: t.user, Name: slot.Name, Actor: state.ActorClient, Via: "a call_api request"}
	resp, weak, err := s.proxy.Secret(ctx, use, slot, cred, req)
	if err != nil {
		return nil, secretCallError(slot, args, err)
	}
	res := apiResult(resp)
	if weak {
		res.Content = append(res.Content, &sdk.TextContent{Text: weakNote(ctx, slot)})
	}
	return res, nil
}

// request is the upstream request of call_api's arguments.
func (a callAPIArgs) request() upstream.Request {
	return upstream.Request{Method: a.Method, Path: a.Path, Query: upstream.QueryOf(a.Query), Body: a.Body}
}

// apiResult is call_api's answer: the status and body as text, and the response as
// structuredContent.
func apiResult(resp *upstream.Response) *sdk.CallToolResult {
	text := fmt.Sprintf("HTTP %d", resp.Status)
	if resp.Redirected != "" {
		text += " (a redirect outside the API's base URL, not followed: " + resp.Redirected + ")"
	}
	if resp.Body != "" {
		text += "\n\n" + resp.Body
	}
	return &sdk.CallToolResult{
		Content:           []sdk.Content{&sdk.TextContent{Text: text}},
		StructuredContent: resp,
	}
}

// connectionView is one entry of list_connections.
type connectionView struct {
	credentials.Connection
	Label string `json:"label"`
}

func (s *Server) listConnections(ctx context.Context, t turn, _ struct{}) (*sdk.CallToolResult, error) {
	conns, err := s.opts.Credentials.Connections(ctx, t.user, func(c *credentials.Credential) bool {
		return s.opts.Asker.Weak(ctx, t.user, c)
	})
	if err != nil {
		return nil, s.unavailable(ctx, err)
	}
	views := make([]connectionView, 0, len(conns))
	for _, c := range conns {
		label := c.Name
		if slot, ok := s.opts.Slots.Lookup(c.Name); ok {
			label = slot.Label
		} else if p, ok := s.opts.Providers.Lookup(c.Name); ok {
			label = p.Label
		}
		views = append(views, connectionView{Connection: c, Label: label})
	}
	return textResult(connectionsText(ctx, views), connectionsResult{Connections: views}), nil
}

func (s *Server) disconnect(ctx context.Context, t turn, args disconnectArgs) (*sdk.CallToolResult, error) {
	if strings.Contains(args.Service, "/") {
		return nil, fmt.Errorf("service %q: no such service", args.Service)
	}
	if p, ok := s.opts.Providers.Lookup(args.Name); ok {
		return s.disconnectProvider(ctx, t, credentials.Name(args.Service, p.Name), p)
	}
	slot, err := s.slotFor(args.Name)
	if err != nil {
		return nil, err
	}
	deleted, err := s.opts.Credentials.Delete(ctx, t.user, credentials.Name(args.Service, slot.Name), state.ActorClient, "disconnect tool")
	if err != nil {
		return nil, s.unavailable(ctx, err)
	}
	text := secretDeletedText(ctx, slot.Label)
	if !deleted {
		text = noSecretToDeleteText(ctx, slot.Label)
	}
	return textResult(text, secretDeletedResult{Deleted: deleted, Name: slot.Name}), nil
}

// disconnectProvider revokes the third-party connection called name at the provider where
// it can, and deletes it.
func (s *Server) disconnectProvider(ctx context.Context, t turn, name string, p *providers.Provider) (*sdk.CallToolResult, error) {
	d, err := s.opts.Keeper.Disconnect(ctx, t.user, name, p, state.ActorClient, "disconnect tool")
	if err != nil {
		return nil, s.unavailable(ctx, err)
	}
	return textResult(d.Text(), accountDisconnectedResult{Deleted: d.Deleted, Name: p.Name, Revoked: d.Revoked()}), nil
}
