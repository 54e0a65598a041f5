package providers

import (
	"golang.org/x/oauth2"

	"github.com/urlflow/urlflow/upstream"
)

// A preset is a built-in provider, one type per file: the settings it starts the provider
// from (endpoints, default scopes, how to read the account, the API), which the
// configuration may override, and its dialect, where the provider departs from plain OAuth
// 2.0. The presets follow the providers' documentation (docs/provider-presets.md, with
// sources) and are tested against local stand-ins of those documented answers, not
// against the live providers.
type preset interface {
	dialect
	// configure gives p the preset's settings.
	configure(p *Provider)
}

// presets makes the preset of each name for a provider's configuration.
var presets = map[string]func(Config) preset{
	"github":    func(Config) preset { return gitHub{} },
	"google":    func(Config) preset { return google{} },
	"microsoft": func(cfg Config) preset { return newMicrosoft(cfg.Tenant) },
	"slack":     func(Config) preset { return slack{} },
	"gitlab":    func(Config) preset { return gitLab{} },
	"atlassian": func(Config) preset { return atlassian{} },
	"notion":    func(Config) preset { return notion{} },
	"linear":    func(Config) preset { return linear{} },
}

// bearer injects the access token as a bearer token, the way most providers' APIs take it.
var bearer = upstream.Injection{Header: "Authorization", Template: "Bearer {secret}"}

// bearerAPI returns the API at base that takes the access token as a bearer token.
func bearerAPI(base string) *upstream.API {
	return &upstream.API{BaseURL: base, Methods: []string{"GET", "POST", "PUT", "PATCH", "DELETE"}, Inject: bearer}
}

// withAuthStyle returns e with the client authentication style.
func withAuthStyle(e oauth2.Endpoint, style oauth2.AuthStyle) oauth2.Endpoint {
	e.AuthStyle = style
	return e
}
