package providers

import (
	"context"
	"net/http"

	"golang.org/x/oauth2"
)

// atlassian is Atlassian Cloud (3LO). Its token endpoint takes JSON with the client
// credentials in the body, and it has no revocation.
type atlassian struct{ standard }

func (atlassian) configure(p *Provider) {
	p.Label = "Atlassian"
	p.config.Endpoint = oauth2.Endpoint{AuthURL: "https://auth.atlassian.com/authorize",
		TokenURL: "https://auth.atlassian.com/oauth/token", AuthStyle: oauth2.AuthStyleInParams}
	p.config.Scopes = []string{"read:me", "offline_access"}
	p.authParams["audience"] = "api.atlassian.com"
	p.authParams["prompt"] = "consent"
	p.account = AccountConfig{URL: "https://api.atlassian.com/me", ID: "account_id", Name: "name"}
	p.API = bearerAPI("https://api.atlassian.com")
}

func (a atlassian) exchange(ctx context.Context, p *Provider, code, verifier string) (*Token, error) {
	return a.token(ctx, p, map[string]string{"grant_type": "authorization_code", "client_id": p.config.ClientID,
		"client_secret": p.config.ClientSecret, "code": code, "redirect_uri": p.config.RedirectURL, "code_verifier": verifier})
}

func (a atlassian) refresh(ctx context.Context, p *Provider, refreshToken string) (*Token, error) {
	return a.token(ctx, p, map[string]string{"grant_type": "refresh_token", "client_id": p.config.ClientID,
		"client_secret": p.config.ClientSecret, "refresh_token": refreshToken})
}

// token posts a token request.
func (atlassian) token(ctx context.Context, p *Provider, body map[string]string) (*Token, error) {
	req, err := newJSONRequest(ctx, http.MethodPost, p.config.Endpoint.TokenURL, body)
	if err != nil {
		return nil, err
	}
	var answer tokenAnswer
	if err := p.tokenRequest(req, body["grant_type"], &answer); err != nil {
		return nil, err
	}
	return answer.token()
}

func (atlassian) revoke(context.Context, *Provider, *Token) error { return ErrNoRevocation }
