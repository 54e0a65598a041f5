package providers

import (
	"context"
	"net/http"
	"strings"

	"golang.org/x/oauth2"
)

// linear is Linear. It wants scopes separated by commas, the account comes from its
// GraphQL API, and revocation is authenticated by the token itself.
type linear struct{ standard }

func (linear) configure(p *Provider) {
	p.Label = "Linear"
	p.config.Endpoint = oauth2.Endpoint{AuthURL: "https://linear.app/oauth/authorize",
		TokenURL: "https://api.linear.app/oauth/token", AuthStyle: oauth2.AuthStyleInParams}
	p.config.Scopes = []string{"read"}
	p.scopeSep = ","
	p.API = bearerAPI("https://api.linear.app")
}

func (linear) readsAccountItself() {}

func (linear) account(ctx context.Context, p *Provider, t *Token) (Account, error) {
	req, err := newBearerRequest(ctx, http.MethodPost, "https://api.linear.app/graphql", t.AccessToken,
		strings.NewReader(`{"query":"{ viewer { id name } }"}`))
	if err != nil {
		return Account{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	var doc map[string]any
	if err := p.doJSON(req, &doc); err != nil {
		return Account{}, err
	}
	return accountFrom(doc, AccountConfig{ID: "data.viewer.id", Name: "data.viewer.name"})
}

func (linear) revoke(ctx context.Context, p *Provider, t *Token) error {
	req, err := newBearerRequest(ctx, http.MethodPost, "https://api.linear.app/oauth/revoke", t.AccessToken, nil)
	if err != nil {
		return err
	}
	return p.send(req)
}
