package providers

import (
	"context"
	"net/http"
	"net/url"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/endpoints"
)

// gitHub is GitHub's OAuth app flow. It answers the token request form-encoded unless
// asked (x/oauth2 reads both), and revokes a whole grant with DELETE
// /applications/{client_id}/grant.
type gitHub struct{ standard }

func (gitHub) configure(p *Provider) {
	p.Label = "GitHub"
	p.config.Endpoint = withAuthStyle(endpoints.GitHub, oauth2.AuthStyleInParams)
	p.config.Scopes = []string{"read:user"}
	p.account = AccountConfig{URL: "https://api.github.com/user", ID: "id", Name: "login"}
	p.API = bearerAPI("https://api.github.com")
}

func (gitHub) revoke(ctx context.Context, p *Provider, t *Token) error {
	req, err := newJSONRequest(ctx, http.MethodDelete, "https://api.github.com/applications/"+url.PathEscape(p.config.ClientID)+"/grant",
		map[string]string{"access_token": t.AccessToken})
	if err != nil {
		return err
	}
	req.SetBasicAuth(p.config.ClientID, p.config.ClientSecret)
	req.Header.Set("Accept", "application/vnd.github+json")
	return p.send(req)
}
