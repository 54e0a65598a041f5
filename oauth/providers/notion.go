package providers

import (
	"context"
	"errors"
	"net/http"

	"golang.org/x/oauth2"
)

// notion is Notion's public integrations. It has no scopes (the user picks pages at
// consent) and no documented PKCE; its token requests are JSON with basic authentication
// and a Notion-Version header; its tokens do not expire; and the account is in the token
// answer (owner.user), not behind a userinfo endpoint.
type notion struct{}

// notionVersion is the Notion-Version header Notion's API wants.
const notionVersion = "2022-06-28"

func (notion) configure(p *Provider) {
	p.Label = "Notion"
	p.config.Endpoint = oauth2.Endpoint{AuthURL: "https://api.notion.com/v1/oauth/authorize",
		TokenURL: "https://api.notion.com/v1/oauth/token", AuthStyle: oauth2.AuthStyleInHeader}
	p.config.Scopes = nil
	p.authParams["owner"] = "user"
	p.noPKCE = true
	p.revocation = "https://api.notion.com/v1/oauth/revoke"
	p.API = bearerAPI("https://api.notion.com/v1")
}

func (n notion) exchange(ctx context.Context, p *Provider, code, _ string) (*Token, error) {
	return n.token(ctx, p, map[string]string{"grant_type": "authorization_code", "code": code, "redirect_uri": p.config.RedirectURL})
}

func (n notion) refresh(ctx context.Context, p *Provider, refreshToken string) (*Token, error) {
	return n.token(ctx, p, map[string]string{"grant_type": "refresh_token", "refresh_token": refreshToken})
}

// token posts a token request and reads the account from the answer: one Notion user may
// connect several workspaces, so the workspace is part of the account's ID.
func (n notion) token(ctx context.Context, p *Provider, body map[string]string) (*Token, error) {
	req, err := n.request(ctx, p, p.config.Endpoint.TokenURL, body)
	if err != nil {
		return nil, err
	}
	var answer struct {
		tokenAnswer
		WorkspaceID   string `json:"workspace_id"`
		WorkspaceName string `json:"workspace_name"`
		Owner         struct {
			User struct {
				ID   string `json:"id"`
				Name string `json:"name"`
			} `json:"user"`
		} `json:"owner"`
	}
	if err := p.tokenRequest(req, body["grant_type"], &answer); err != nil {
		return nil, err
	}
	t, err := answer.token()
	if err != nil || answer.Owner.User.ID == "" {
		return t, err
	}
	t.Account = Account{ID: answer.Owner.User.ID, Name: answer.Owner.User.Name}
	if answer.WorkspaceID != "" {
		t.Account.ID = answer.WorkspaceID + "/" + t.Account.ID
	}
	if answer.WorkspaceName != "" {
		t.Account.Name += " in " + answer.WorkspaceName
	}
	return t, nil
}

func (notion) readsAccountItself() {}

// account is the owner the token answer named.
func (notion) account(_ context.Context, _ *Provider, t *Token) (Account, error) {
	if t.Account.ID == "" {
		return Account{}, errors.New("the token answer named no owner")
	}
	return t.Account, nil
}

func (n notion) revoke(ctx context.Context, p *Provider, t *Token) error {
	req, err := n.request(ctx, p, p.revocation, map[string]string{"token": t.AccessToken})
	if err != nil {
		return err
	}
	return p.send(req)
}

// request returns a JSON POST to u, authenticated as the client, with Notion's version.
func (notion) request(ctx context.Context, p *Provider, u string, body map[string]string) (*http.Request, error) {
	req, err := newJSONRequest(ctx, http.MethodPost, u, body)
	if err != nil {
		return nil, err
	}
	req.SetBasicAuth(p.config.ClientID, p.config.ClientSecret)
	req.Header.Set("Notion-Version", notionVersion)
	return req, nil
}
