package providers

import (
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/endpoints"
)

// gitLab is GitLab.com, plain OAuth 2.0 with an RFC 7009 revocation endpoint.
type gitLab struct{ standard }

func (gitLab) configure(p *Provider) {
	p.Label = "GitLab"
	p.config.Endpoint = withAuthStyle(endpoints.GitLab, oauth2.AuthStyleInParams)
	p.config.Scopes = []string{"read_user"}
	p.revocation = "https://gitlab.com/oauth/revoke"
	p.account = AccountConfig{URL: "https://gitlab.com/api/v4/user", ID: "id", Name: "username"}
	p.API = bearerAPI("https://gitlab.com/api/v4")
}
