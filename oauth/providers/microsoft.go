package providers

import (
	"context"
	"regexp"
	"strings"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/endpoints"
)

// microsoft is the Microsoft identity platform (v2.0 endpoints) for one tenant, or for
// many: common, organizations or consumers.
type microsoft struct {
	standard
	tenant string
}

// newMicrosoft returns the preset for tenant (common when empty).
func newMicrosoft(tenant string) microsoft {
	if tenant == "" {
		tenant = "common"
	}
	return microsoft{tenant: tenant}
}

func (m microsoft) configure(p *Provider) {
	p.Label = "Microsoft"
	p.config.Endpoint = withAuthStyle(endpoints.AzureAD(m.tenant), oauth2.AuthStyleInParams)
	p.config.Scopes = []string{"openid", "profile", "email", "offline_access", "User.Read"}
	p.account = AccountConfig{URL: "https://graph.microsoft.com/v1.0/me", ID: "id", Name: "userPrincipalName"}
	p.API = bearerAPI("https://graph.microsoft.com")
}

// tenantIDPattern matches a Microsoft tenant ID, a GUID.
var tenantIDPattern = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// issuerMatches checks an iss against https://login.microsoftonline.com/{tenant id}/v2.0,
// the issuer of every tenant, and against the tenant when it is fixed.
func (m microsoft) issuerMatches(iss string) bool {
	rest, ok := strings.CutPrefix(iss, "https://login.microsoftonline.com/")
	tid, ok2 := strings.CutSuffix(rest, "/v2.0")
	// A real issuer names its tenant by ID, never by the {tenantid} template.
	if !ok || !ok2 || !tenantIDPattern.MatchString(tid) {
		return false
	}
	switch m.tenant {
	case "common", "organizations", "consumers":
		return true
	}
	return strings.EqualFold(tid, m.tenant)
}

// revoke deletes nothing at Microsoft, which has no per-application revocation: disconnect
// deletes the tokens.
func (microsoft) revoke(context.Context, *Provider, *Token) error { return ErrNoRevocation }
