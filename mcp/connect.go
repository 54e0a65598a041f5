package mcp

import (
	"context"
	"errors"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/urlflow/urlflow/ask"
	"github.com/urlflow/urlflow/oauth/providers"
	"github.com/urlflow/urlflow/proxy"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/credentials"
)

type connectArgs struct {
	Provider string   `json:"provider" jsonschema:"the provider to connect, by its configuration name (for example github)"`
	Scopes   []string `json:"scopes,omitempty" jsonschema:"access to ask for, as the provider names it; the provider's defaults if empty"`
}

// providerFor returns the provider named name or an error listing the known ones.
func (s *Server) providerFor(name string) (*providers.Provider, error) {
	p, ok := s.opts.Providers.Lookup(name)
	if !ok {
		return nil, noSuchProviderError(name, s.opts.Providers.Names())
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
	n := s.need(t, state.KindOAuth, p.Name, args.Scopes, connectPurpose(ctx, p, false))
	o, err := s.opts.Asker.Check(ctx, n) // any connection does when no scopes are asked for
	if err != nil {
		return nil, s.unavailable(ctx, err)
	}
	if o.Status == ask.Stored {
		return connected(connectedResult{Provider: p.Name, Account: o.Credential.Account,
			Message: alreadyConnectedText(ctx, p.Label, o.Credential.Account)}), nil
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
	return connected(connectedResult{Provider: p.Name, Account: c.Account, ElicitationID: e.ID,
		Message: connectedText(ctx, p.Label, c.Account)}), nil
}

// connected is connect's result for a connected account.
func connected(r connectedResult) *sdk.CallToolResult {
	r.Status = "connected"
	return textResult(r.Message, r)
}

// callProvider is call_api for a third-party connection: the access token is injected as
// the provider's API says. A missing connection, or one the provider no longer honours, is
// asked for first, in the same call. An access token the API refuses (401) is refreshed
// once and the call made again.
func (s *Server) callProvider(ctx context.Context, t turn, p *providers.Provider, args callAPIArgs) (*sdk.CallToolResult, error) {
	if p.API == nil {
		return nil, noProviderAPIError(p)
	}
	req := args.request()
	if err := proxy.Check(p.API, req); err != nil {
		return nil, err
	}
	use := proxy.Use{User: t.user, Name: p.Name, Actor: state.ActorClient, Via: "a call_api request"}
	resp, err := s.proxy.Provider(ctx, use, p, req)
	if errors.Is(err, providers.ErrNotConnected) || errors.Is(err, providers.ErrReconnect) {
		n := s.need(t, state.KindOAuth, p.Name, p.DefaultScopes(), connectPurpose(ctx, p, true))
		// The proxy has just read the connection: missing, or no longer honoured.
		missing := ask.Outcome{Status: ask.Missing}
		if errors.Is(err, providers.ErrReconnect) {
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
		return nil, carriedTokenError(p, carried)
	case errors.Is(err, proxy.ErrNoToken):
		return nil, s.connectionError(ctx, p, err)
	case err != nil:
		return nil, args.failed(err)
	}
	return apiResult(resp), nil
}

// connectionError says what went wrong with a connection's tokens.
func (s *Server) connectionError(ctx context.Context, p *providers.Provider, err error) error {
	if errors.Is(err, providers.ErrReconnect) {
		return reconnectError(p)
	}
	s.log.ErrorContext(ctx, "connection tokens unusable", "provider", p.Name, "err", err)
	return noWorkingTokenError(p)
}
