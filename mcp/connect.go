package mcp

import (
	"context"
	"errors"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/urlflow/urlflow/oauth/thirdparty"
	"github.com/urlflow/urlflow/proxy"
	"github.com/urlflow/urlflow/state"
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
	c, err := s.opts.Credentials.Get(ctx, t.user, p.Name)
	switch {
	case err == nil && !c.NeedsReconnect && c.Covers(args.Scopes):
		return connected(p, c.Account, "Your "+p.Label+" account is already connected as "+c.Account+"; nothing was asked."), nil
	case err != nil && !errors.Is(err, state.ErrNotFound):
		return nil, s.unavailable(ctx, err)
	}
	e, res, err := s.askConnect(ctx, t, p, args.Scopes, "Connect your "+p.Label+" account so that urlflow can use it for you.")
	if res != nil || err != nil {
		return res, err
	}
	c, err = s.opts.Credentials.Get(ctx, t.user, p.Name)
	if err != nil {
		return nil, s.unavailable(ctx, err)
	}
	res = connected(p, c.Account, "Your "+p.Label+" account is connected as "+c.Account+". urlflow keeps its tokens "+
		"encrypted and uses them for you; they are never shown in this conversation.")
	res.StructuredContent.(map[string]any)["elicitationId"] = e.ID
	return res, nil
}

// askConnect takes the user through a connection to p.
func (s *Server) askConnect(ctx context.Context, t turn, p *thirdparty.Provider, scopes []string, purpose string) (*flow.Elicitation, *sdk.CallToolResult, error) {
	if len(scopes) == 0 {
		scopes = p.DefaultScopes()
	}
	return s.askFor(ctx, t, ask{kind: state.KindOAuth, target: p.Name, purpose: purpose, scopes: scopes})
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
		purpose := "Connect your " + p.Label + " account so that urlflow can call its API for you."
		if errors.Is(err, thirdparty.ErrReconnect) {
			purpose = p.Label + " no longer accepts the connection urlflow had; connect your account again."
		}
		if _, res, err := s.askConnect(ctx, t, p, nil, purpose); res != nil || err != nil {
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
