package providers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/endpoints"
)

// slack is Slack's OAuth v2 for user tokens. It asks for user-token scopes with
// user_scope (commas), answers HTTP 200 with {"ok": false} on errors, and nests the user
// token in authed_user. Turning PKCE on at Slack makes the app public for good, so the
// state alone protects the flow.
type slack struct{}

func (slack) configure(p *Provider) {
	p.Label = "Slack"
	p.config.Endpoint = withAuthStyle(endpoints.Slack, oauth2.AuthStyleInHeader)
	p.config.Scopes = []string{"users:read"}
	p.scopeSep, p.scopeParam = ",", "user_scope"
	p.noPKCE = true
	p.API = bearerAPI("https://slack.com/api")
}

// slackAnswer is what every answer of Slack's Web API starts with.
type slackAnswer struct {
	OK    bool   `json:"ok"`
	Error string `json:"error"`
}

func (s slack) exchange(ctx context.Context, p *Provider, code, _ string) (*Token, error) {
	var answer struct {
		slackAnswer
		AuthedUser struct {
			ID string `json:"id"`
			tokenAnswer
		} `json:"authed_user"`
		Team struct {
			ID   string `json:"id"`
			Name string `json:"name"`
		} `json:"team"`
	}
	if err := s.token(ctx, p, url.Values{"code": {code}, "redirect_uri": {p.config.RedirectURL}}, &answer); err != nil {
		return nil, err
	}
	if !answer.OK || answer.AuthedUser.AccessToken == "" {
		return nil, fmt.Errorf("exchange the code: Slack answered %q", answer.Error)
	}
	t, err := answer.AuthedUser.token()
	if err != nil {
		return nil, err
	}
	t.Account = Account{ID: answer.Team.ID + "/" + answer.AuthedUser.ID, Name: answer.AuthedUser.ID + " in " + answer.Team.Name}
	return t, nil
}

func (s slack) refresh(ctx context.Context, p *Provider, refreshToken string) (*Token, error) {
	var answer struct {
		slackAnswer
		tokenAnswer
	}
	if err := s.token(ctx, p, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refreshToken}}, &answer); err != nil {
		return nil, err
	}
	if !answer.OK {
		return nil, fmt.Errorf("%w: Slack answered %q", ErrReconnect, answer.Error)
	}
	if answer.AccessToken == "" {
		return nil, errors.New("refresh the token: Slack's answer has no access token")
	}
	return answer.tokenAnswer.token()
}

// token posts form to Slack's token method with basic client authentication.
func (slack) token(ctx context.Context, p *Provider, form url.Values, answer any) error {
	req, err := newFormRequest(ctx, p.config.Endpoint.TokenURL, form)
	if err != nil {
		return err
	}
	req.SetBasicAuth(url.QueryEscape(p.config.ClientID), url.QueryEscape(p.config.ClientSecret))
	return p.doJSON(req, answer)
}

func (slack) readsAccountItself() {}

// account reads the user's handle with auth.test: the exchange already read team and
// user, and the handle is for display only, so a failure keeps what the exchange read.
func (slack) account(ctx context.Context, p *Provider, t *Token) (Account, error) {
	req, err := newBearerRequest(ctx, http.MethodPost, "https://slack.com/api/auth.test", t.AccessToken, nil)
	if err != nil {
		return Account{}, err
	}
	var answer struct {
		slackAnswer
		User string `json:"user"`
		Team string `json:"team"`
	}
	if err := p.doJSON(req, &answer); err != nil || !answer.OK {
		return t.Account, nil
	}
	return Account{ID: t.Account.ID, Name: answer.User + " in " + answer.Team}, nil
}

func (slack) revoke(ctx context.Context, p *Provider, t *Token) error {
	req, err := newBearerRequest(ctx, http.MethodPost, "https://slack.com/api/auth.revoke", t.AccessToken, nil)
	if err != nil {
		return err
	}
	var answer slackAnswer
	if err := p.doJSON(req, &answer); err != nil {
		return err
	}
	if !answer.OK {
		return fmt.Errorf("auth.revoke answered %q", answer.Error)
	}
	return nil
}
