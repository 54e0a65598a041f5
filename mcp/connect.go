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
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/credentials"
	"github.com/urlflow/urlflow/state/flow"
)

type connectArgs struct {
	Provider string   `json:"provider" jsonschema:"the provider to connect, by its configuration name (for example github)"`
	Scopes   []string `json:"scopes,omitempty" jsonschema:"access to ask for, as the provider names it; the provider's defaults if empty"`
}

// providerFor returns the provider named name or an error listing the known ones.
func (s *Server) providerFor(name string) (*thirdparty.Provider, error) {
	p, ok := s.opts.Providers.Lookup(name)
	if !ok {
		names := s.opts.Providers.Names()
		if len(names) == 0 {
			return nil, fmt.Errorf("there is no provider named %q; this urlflow has no third-party providers configured", name)
		}
		return nil, fmt.Errorf("there is no provider named %q; the providers are: %s", name, strings.Join(names, ", "))
	}
	return p, nil
}

func (s *Server) connect(ctx context.Context, t turn, args connectArgs) (*sdk.CallToolResult, error) {
	p, err := s.providerFor(args.Provider)
	if err != nil {
		return nil, err
	}
	scopes := args.Scopes
	if len(scopes) == 0 {
		scopes = p.DefaultScopes()
	}
	n := s.need(t, state.KindOAuth, p.Name, args.Scopes, connectPurpose(p, "use it for you"))
	o, err := s.opts.Asker.Check(ctx, n) // any connection does when no scopes are asked for
	if err != nil {
		return nil, s.unavailable(ctx, err)
	}
	if o.Status == ask.Stored {
		return connected(p, o.Credential.Account, "Your "+p.Label+" account is already connected as "+o.Credential.Account+"; nothing was asked."), nil
	}
	n.Scopes = scopes
	e, res, err := s.askFor(ctx, t, n, o)
	if res != nil || err != nil {
		return res, err
	}
	c, err := s.opts.Credentials.Get(ctx, t.user, p.Name)
	if err != nil {
		return nil, s.unavailable(ctx, err)
	}
	res = connected(p, c.Account, "Your "+p.Label+" account is connected as "+c.Account+". urlflow keeps its tokens "+
		"encrypted and uses them for you; they are never shown in this conversation.")
	res.StructuredContent.(map[string]any)["elicitationId"] = e.ID
	return res, nil
}

// connectPurpose is the reason the pages show for asking to connect p so that urlflow can
// do what for the user ("use it for you"), given how the connection it replaces stands.
func connectPurpose(p *thirdparty.Provider, what string) func(*flow.Replaced) string {
	return func(replacing *flow.Replaced) string {
		if replacing != nil && replacing.Reconnect {
			return p.Label + " no longer accepts the connection urlflow had; connect your account again."
		}
		return "Connect your " + p.Label + " account so that urlflow can " + what + "."
	}
}

func connected(p *thirdparty.Provider, account, message string) *sdk.CallToolResult {
	return &sdk.CallToolResult{
		Content: []sdk.Content{&sdk.TextContent{Text: message}},
		StructuredContent: map[string]any{"status": "connected", "provider": p.Name, "account": account,
			"message": message},
	}
}

// callProvider is call_api for a third-party connection: the access token is injected as
// the provider's API says. A missing connection, or one the provider no longer honours, is
// asked for first, in the same call. An access token the API refuses (401) is refreshed
// once and the call made again.
func (s *Server) callProvider(ctx context.Context, t turn, p *thirdparty.Provider, args callAPIArgs) (*sdk.CallToolResult, error) {
	if p.API == nil {
		return nil, fmt.Errorf("urlflow has no API configured for %s", p.Label)
	}
	req := args.request()
	if err := proxy.Check(p.API, req); err != nil {
		return nil, err
	}
	use := proxy.Use{User: t.user, Name: p.Name, Actor: state.ActorClient, Via: "a call_api request"}
	resp, err := s.proxy.Provider(ctx, use, p, req)
	if errors.Is(err, thirdparty.ErrNotConnected) || errors.Is(err, thirdparty.ErrReconnect) {
		n := s.need(t, state.KindOAuth, p.Name, p.DefaultScopes(), connectPurpose(p, "call its API for you"))
		// The proxy has just read the connection: missing, or no longer honoured.
		missing := ask.Outcome{Status: ask.Missing}
		if errors.Is(err, thirdparty.ErrReconnect) {
			missing.Credential = &credentials.Credential{Name: p.Name, Kind: state.KindOAuth, NeedsReconnect: true}
		}
		if _, res, err := s.askFor(ctx, t, n, missing); res != nil || err != nil {
			return res, err
		}
		resp, err = s.proxy.Provider(ctx, use, p, req)
	}
	var carried *proxy.CarriedError
	switch {
	case errors.As(err, &carried):
		return nil, fmt.Errorf("urlflow refused this request and sent nothing: its %s carries urlflow's access token for %s, "+
			"or a form of it. No request needs to carry it: urlflow adds it itself", carried.Where, p.Label)
	case errors.Is(err, proxy.ErrNoToken):
		return nil, s.connectionError(ctx, p, err)
	case err != nil:
		return nil, fmt.Errorf("call_api %s %s: %w", strings.ToUpper(args.Method), args.Path, err)
	}
	return apiResult(resp), nil
}

// connectionError says what went wrong with a connection's tokens.
func (s *Server) connectionError(ctx context.Context, p *thirdparty.Provider, err error) error {
	if errors.Is(err, thirdparty.ErrReconnect) {
		return fmt.Errorf("%s no longer accepts urlflow's connection; call connect with provider %s to connect again", p.Label, p.Name)
	}
	s.log.ErrorContext(ctx, "connection tokens unusable", "provider", p.Name, "err", err)
	return fmt.Errorf("urlflow could not get a working token for %s right now; nothing was changed, try again in a moment", p.Label)
}
