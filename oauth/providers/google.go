package providers

import (
	"context"
	"net/url"

	"golang.org/x/oauth2"
)

// google is Google's OpenID provider, with a preset rather than discovery for what
// discovery does not say: a refresh token comes only with offline access, and again only
// with a fresh consent. The authorization endpoint is the one Google's discovery document
// names; x/oauth2's endpoints.Google still has the older /o/oauth2/auth.
type google struct{ standard }

func (google) configure(p *Provider) {
	p.Label = "Google"
	p.config.Endpoint = oauth2.Endpoint{AuthURL: "https://accounts.google.com/o/oauth2/v2/auth",
		TokenURL: "https://oauth2.googleapis.com/token", AuthStyle: oauth2.AuthStyleInParams}
	p.config.Scopes = []string{"openid", "email", "profile"}
	p.issuer = "https://accounts.google.com" // Google sends iss on the redirect, unannounced
	p.userinfo = "https://openidconnect.googleapis.com/v1/userinfo"
	p.revocation = "https://oauth2.googleapis.com/revoke"
	p.account = AccountConfig{URL: p.userinfo, ID: "sub", Name: "email"}
	p.authParams["access_type"] = "offline"
	p.authParams["prompt"] = "consent"
	p.authParams["include_granted_scopes"] = "true"
	p.API = bearerAPI("https://www.googleapis.com")
}

// revoke revokes the grant: Google's revocation takes the token alone, without client
// authentication.
func (google) revoke(ctx context.Context, p *Provider, t *Token) error {
	token := t.RefreshToken
	if token == "" {
		token = t.AccessToken
	}
	req, err := newFormRequest(ctx, p.revocation, url.Values{"token": {token}})
	if err != nil {
		return err
	}
	return p.send(req)
}
