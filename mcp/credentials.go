package mcp

import (
	"context"
	"errors"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/urlflow/urlflow/ask"
	"github.com/urlflow/urlflow/oauth/thirdparty"
	"github.com/urlflow/urlflow/proxy"
	"github.com/urlflow/urlflow/slots"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/credentials"
	"github.com/urlflow/urlflow/state/flow"
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
		return nil, fmt.Errorf("there is no secret named %q; the secrets urlflow can store are: %s",
			name, strings.Join(s.opts.Slots.Names(), ", "))
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
		return nil, fmt.Errorf("the secret %s is only stored; urlflow has no API configured to use it with", slot.Name)
	}
	req := args.request()
	// Refuse what can never work before asking the user for anything.
	if err := proxy.Check(slot.API, req); err != nil {
		return nil, err
	}

	n := s.need(t, state.KindSecret, slot.Name, nil, secretPurpose(slot, "call its API for you"))
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
	var (
		locked  *proxy.LockedError
		carried *proxy.CarriedError
	)
	switch {
	case errors.As(err, &locked):
		// Locked again between the store and this read: the next call asks again.
		return nil, fmt.Errorf("your %s is locked (%s); call call_api again to ask the user to enter it again", slot.Label, locked.Reason)
	case errors.Is(err, proxy.ErrUnopenable):
		return nil, fmt.Errorf("urlflow cannot open your stored %s (its key may have been retired); store it again with set_secret and replace set to true", slot.Label)
	case errors.As(err, &carried) && !carried.Locked:
		return nil, fmt.Errorf("urlflow refused this request and sent nothing: its %s carries your stored %s, or a form of it. "+
			"urlflow could not lock the key just now; do not send it in a request: urlflow adds it itself", carried.Where, slot.Label)
	case errors.As(err, &carried):
		return nil, fmt.Errorf("urlflow refused this request and sent nothing: its %s carries your stored %s, or a form of it. "+
			"No request needs to carry the key: urlflow adds it itself. To protect it, urlflow has locked it: the next call_api "+
			"with name %s asks the user to enter it again in the browser", carried.Where, slot.Label, slot.Name)
	case err != nil:
		return nil, fmt.Errorf("call_api %s %s: %w", strings.ToUpper(args.Method), args.Path, err)
	}
	res := apiResult(resp)
	if weak {
		res.Content = append(res.Content, &sdk.TextContent{Text: weakNote(slot)})
	}
	return res, nil
}

// request is the upstream request of call_api's arguments.
func (a callAPIArgs) request() upstream.Request {
	return upstream.Request{Method: a.Method, Path: a.Path, Query: a.Query, Body: a.Body}
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
	var lines []string
	for _, c := range conns {
		label := c.Name
		if slot, ok := s.opts.Slots.Lookup(c.Name); ok {
			label = slot.Label
		} else if p, ok := s.opts.Providers.Lookup(c.Name); ok {
			label = p.Label
		}
		views = append(views, connectionView{Connection: c, Label: label})
		name := c.Name
		if c.Service != "" {
			name += ", held for the service " + c.Service
		}
		line := fmt.Sprintf("- %s (%s): stored %s", label, name, c.StoredAt.UTC().Format("2006-01-02 15:04 UTC"))
		if c.Kind == state.KindOAuth {
			line = fmt.Sprintf("- %s (%s): connected as %s with %s, %s", label, name, c.Account,
				orNone(strings.Join(c.Scopes, " ")), c.StoredAt.UTC().Format("2006-01-02 15:04 UTC"))
			if c.RefreshedAt != nil {
				line += ", refreshed " + c.RefreshedAt.UTC().Format("2006-01-02 15:04 UTC")
			}
			if c.NeedsReconnect {
				line += ", needs to be connected again"
			}
		}
		if c.VerifiedAt != nil {
			line += ", verified " + c.VerifiedAt.UTC().Format("2006-01-02 15:04 UTC")
		}
		if c.LastUsedAt != nil {
			line += ", last used " + c.LastUsedAt.UTC().Format("2006-01-02 15:04 UTC")
		} else {
			line += ", not used yet"
		}
		if c.LockedAt != nil {
			line += fmt.Sprintf(", LOCKED since %s because %s: the next call_api with it asks the user to enter it again",
				c.LockedAt.UTC().Format("2006-01-02 15:04 UTC"), c.LockReason)
		}
		if c.Weak {
			line += ", WEAK: stored before urlflow's strength minimum; suggest replacing it (set_secret with replace set to true)"
		}
		lines = append(lines, line)
	}
	text := "You have no stored secrets."
	if len(lines) > 0 {
		text = "Your stored secrets (values are never shown):\n" + strings.Join(lines, "\n")
	}
	return &sdk.CallToolResult{
		Content:           []sdk.Content{&sdk.TextContent{Text: text}},
		StructuredContent: map[string]any{"connections": views},
	}, nil
}

func orNone(s string) string {
	if s == "" {
		return "no scopes"
	}
	return s
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
	text := fmt.Sprintf("Your %s is deleted from urlflow. Tools can no longer use it; set_secret stores a new one.", slot.Label)
	if !deleted {
		text = fmt.Sprintf("You had no %s stored; nothing was deleted.", slot.Label)
	}
	return &sdk.CallToolResult{
		Content:           []sdk.Content{&sdk.TextContent{Text: text}},
		StructuredContent: map[string]any{"name": slot.Name, "deleted": deleted},
	}, nil
}

// disconnectProvider revokes the third-party connection called name at the provider where
// it can, and deletes it.
func (s *Server) disconnectProvider(ctx context.Context, t turn, name string, p *thirdparty.Provider) (*sdk.CallToolResult, error) {
	deleted, revokeErr, err := s.opts.Keeper.Disconnect(ctx, t.user, name, p, state.ActorClient)
	if err != nil {
		return nil, s.unavailable(ctx, err)
	}
	revoked := deleted && revokeErr == nil
	if deleted && revokeErr != nil && !errors.Is(revokeErr, thirdparty.ErrNoRevocation) {
		s.log.WarnContext(ctx, "revocation failed; tokens deleted anyway", "provider", p.Name, "err", revokeErr)
	}
	return &sdk.CallToolResult{
		Content:           []sdk.Content{&sdk.TextContent{Text: p.DisconnectedText(deleted, revokeErr)}},
		StructuredContent: map[string]any{"name": p.Name, "deleted": deleted, "revoked": revoked},
	}, nil
}
