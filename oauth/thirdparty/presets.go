package thirdparty

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/urlflow/urlflow/upstream"
	"golang.org/x/oauth2"
)

// Presets know each provider's endpoints, default scopes, how to read the account, how to
// revoke, and where it departs from plain OAuth 2.0. They follow the providers'
// documentation (docs/provider-presets.md, with sources) and are tested against local
// stand-ins of those documented answers, not against the live providers.
var presets = map[string]func(p *Provider, cfg Config){
	"github":    presetGitHub,
	"google":    presetGoogle,
	"microsoft": presetMicrosoft,
	"slack":     presetSlack,
	"gitlab":    presetGitLab,
	"atlassian": presetAtlassian,
	"notion":    presetNotion,
	"linear":    presetLinear,
}

func presetNames() []string { return slices.Sorted(maps.Keys(presets)) }

// api returns a bearer-token API at base.
func api(base string) *upstream.API {
	return &upstream.API{BaseURL: base, Methods: []string{"GET", "POST", "PUT", "PATCH", "DELETE"},
		Inject: upstream.Injection{Header: "Authorization", Template: "Bearer {secret}"}}
}

func presetGitHub(p *Provider, _ Config) {
	p.Label = "GitHub"
	p.config.Endpoint = oauth2.Endpoint{AuthURL: "https://github.com/login/oauth/authorize",
		TokenURL: "https://github.com/login/oauth/access_token", AuthStyle: oauth2.AuthStyleInParams}
	p.config.Scopes = []string{"read:user"}
	p.account = AccountConfig{URL: "https://api.github.com/user", ID: "id", Name: "login"}
	p.API = api("https://api.github.com")
	// GitHub answers the token request form-encoded unless asked; x/oauth2 reads both. It
	// revokes a whole grant with DELETE /applications/{client_id}/grant.
	p.dialect.revoke = func(ctx context.Context, p *Provider, t *Token) error {
		body, _ := json.Marshal(map[string]string{"access_token": t.AccessToken})
		req, err := http.NewRequestWithContext(ctx, http.MethodDelete,
			"https://api.github.com/applications/"+url.PathEscape(p.config.ClientID)+"/grant", bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.SetBasicAuth(p.config.ClientID, p.config.ClientSecret)
		req.Header.Set("Accept", "application/vnd.github+json")
		req.Header.Set("Content-Type", "application/json")
		return p.send(req)
	}
}

func presetGoogle(p *Provider, _ Config) {
	p.Label = "Google"
	p.config.Endpoint = oauth2.Endpoint{AuthURL: "https://accounts.google.com/o/oauth2/v2/auth",
		TokenURL: "https://oauth2.googleapis.com/token", AuthStyle: oauth2.AuthStyleInParams}
	p.config.Scopes = []string{"openid", "email", "profile"}
	p.issuer = "https://accounts.google.com" // Google sends iss on the redirect, unannounced
	p.userinfo = "https://openidconnect.googleapis.com/v1/userinfo"
	p.revocation = "https://oauth2.googleapis.com/revoke"
	p.account = AccountConfig{URL: p.userinfo, ID: "sub", Name: "email"}
	// A refresh token only with offline access, and again only with a fresh consent.
	p.authParams["access_type"] = "offline"
	p.authParams["prompt"] = "consent"
	p.authParams["include_granted_scopes"] = "true"
	p.API = api("https://www.googleapis.com")
	// Google's revocation takes the token alone, without client authentication.
	p.dialect.revoke = func(ctx context.Context, p *Provider, t *Token) error {
		token := t.RefreshToken
		if token == "" {
			token = t.AccessToken
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.revocation, strings.NewReader(url.Values{"token": {token}}.Encode()))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		return p.send(req)
	}
}

// tenantIDPattern matches a Microsoft tenant ID, a GUID.
var tenantIDPattern = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

func presetMicrosoft(p *Provider, cfg Config) {
	tenant := cfg.Tenant
	if tenant == "" {
		tenant = "common"
	}
	p.Label = "Microsoft"
	base := "https://login.microsoftonline.com/" + url.PathEscape(tenant) + "/oauth2/v2.0"
	p.config.Endpoint = oauth2.Endpoint{AuthURL: base + "/authorize", TokenURL: base + "/token", AuthStyle: oauth2.AuthStyleInParams}
	p.config.Scopes = []string{"openid", "profile", "email", "offline_access", "User.Read"}
	p.account = AccountConfig{URL: "https://graph.microsoft.com/v1.0/me", ID: "id", Name: "userPrincipalName"}
	p.API = api("https://graph.microsoft.com")
	// Multi-tenant: the issuer is https://login.microsoftonline.com/{tenant id}/v2.0, so an
	// iss on the redirect is checked against that pattern (and the tenant, when fixed).
	p.dialect.issuerMatches = func(iss string) bool {
		rest, ok := strings.CutPrefix(iss, "https://login.microsoftonline.com/")
		tid, ok2 := strings.CutSuffix(rest, "/v2.0")
		// A real issuer names its tenant by ID, never by the {tenantid} template.
		if !ok || !ok2 || !tenantIDPattern.MatchString(tid) {
			return false
		}
		switch tenant {
		case "common", "organizations", "consumers":
			return true
		}
		return strings.EqualFold(tid, tenant)
	}
	// Microsoft has no per-application revocation: disconnect deletes the tokens.
	p.dialect.revoke = func(context.Context, *Provider, *Token) error { return ErrNoRevocation }
}

func presetGitLab(p *Provider, _ Config) {
	p.Label = "GitLab"
	p.config.Endpoint = oauth2.Endpoint{AuthURL: "https://gitlab.com/oauth/authorize",
		TokenURL: "https://gitlab.com/oauth/token", AuthStyle: oauth2.AuthStyleInParams}
	p.config.Scopes = []string{"read_user"}
	p.revocation = "https://gitlab.com/oauth/revoke"
	p.account = AccountConfig{URL: "https://gitlab.com/api/v4/user", ID: "id", Name: "username"}
	p.API = api("https://gitlab.com/api/v4")
}

func presetAtlassian(p *Provider, _ Config) {
	p.Label = "Atlassian"
	p.config.Endpoint = oauth2.Endpoint{AuthURL: "https://auth.atlassian.com/authorize",
		TokenURL: "https://auth.atlassian.com/oauth/token", AuthStyle: oauth2.AuthStyleInParams}
	p.config.Scopes = []string{"read:me", "offline_access"}
	p.authParams["audience"] = "api.atlassian.com"
	p.authParams["prompt"] = "consent"
	p.account = AccountConfig{URL: "https://api.atlassian.com/me", ID: "account_id", Name: "name"}
	p.API = api("https://api.atlassian.com")
	// Atlassian's token endpoint takes JSON, client credentials in the body.
	p.dialect.exchange = func(ctx context.Context, p *Provider, code, verifier string) (*Token, error) {
		return p.jsonToken(ctx, map[string]string{"grant_type": "authorization_code", "client_id": p.config.ClientID,
			"client_secret": p.config.ClientSecret, "code": code, "redirect_uri": p.config.RedirectURL, "code_verifier": verifier}, false)
	}
	p.dialect.refresh = func(ctx context.Context, p *Provider, refreshToken string) (*Token, error) {
		return p.jsonToken(ctx, map[string]string{"grant_type": "refresh_token", "client_id": p.config.ClientID,
			"client_secret": p.config.ClientSecret, "refresh_token": refreshToken}, false)
	}
	p.dialect.revoke = func(context.Context, *Provider, *Token) error { return ErrNoRevocation }
}

// notionVersion is the Notion-Version header Notion's API wants.
const notionVersion = "2022-06-28"

func presetNotion(p *Provider, _ Config) {
	p.Label = "Notion"
	p.config.Endpoint = oauth2.Endpoint{AuthURL: "https://api.notion.com/v1/oauth/authorize",
		TokenURL: "https://api.notion.com/v1/oauth/token", AuthStyle: oauth2.AuthStyleInHeader}
	p.config.Scopes = nil // Notion has no scopes: the user picks pages at consent
	p.authParams["owner"] = "user"
	p.noPKCE = true // not documented for Notion
	p.revocation = "https://api.notion.com/v1/oauth/revoke"
	p.API = api("https://api.notion.com/v1")
	// JSON token requests with basic authentication; no expires_in; the account is in the
	// token response (owner.user), not behind a userinfo endpoint.
	p.dialect.exchange = func(ctx context.Context, p *Provider, code, verifier string) (*Token, error) {
		return p.jsonToken(ctx, map[string]string{"grant_type": "authorization_code", "code": code, "redirect_uri": p.config.RedirectURL}, true)
	}
	p.dialect.refresh = func(ctx context.Context, p *Provider, refreshToken string) (*Token, error) {
		return p.jsonToken(ctx, map[string]string{"grant_type": "refresh_token", "refresh_token": refreshToken}, true)
	}
	p.dialect.account = func(_ context.Context, _ *Provider, t *Token) (Account, error) {
		if t.Account.ID == "" {
			return Account{}, fmt.Errorf("the token answer named no owner")
		}
		return t.Account, nil
	}
	p.dialect.revoke = func(ctx context.Context, p *Provider, t *Token) error {
		body, _ := json.Marshal(map[string]string{"token": t.AccessToken})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.revocation, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.SetBasicAuth(p.config.ClientID, p.config.ClientSecret)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Notion-Version", notionVersion)
		return p.send(req)
	}
}

func presetLinear(p *Provider, _ Config) {
	p.Label = "Linear"
	p.config.Endpoint = oauth2.Endpoint{AuthURL: "https://linear.app/oauth/authorize",
		TokenURL: "https://api.linear.app/oauth/token", AuthStyle: oauth2.AuthStyleInParams}
	p.config.Scopes = []string{"read"}
	p.scopeSep = "," // Linear wants scopes separated by commas
	p.API = api("https://api.linear.app")
	// The account comes from GraphQL; revocation is authenticated by the token itself.
	p.dialect.account = func(ctx context.Context, p *Provider, t *Token) (Account, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://api.linear.app/graphql",
			strings.NewReader(`{"query":"{ viewer { id name } }"}`))
		if err != nil {
			return Account{}, err
		}
		req.Header.Set("Authorization", "Bearer "+t.AccessToken)
		req.Header.Set("Content-Type", "application/json")
		var doc map[string]any
		if err := p.doJSON(req, &doc); err != nil {
			return Account{}, err
		}
		return accountFrom(doc, AccountConfig{ID: "data.viewer.id", Name: "data.viewer.name"})
	}
	p.dialect.revoke = func(ctx context.Context, p *Provider, t *Token) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://api.linear.app/oauth/revoke", nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+t.AccessToken)
		return p.send(req)
	}
}

func presetSlack(p *Provider, _ Config) {
	p.Label = "Slack"
	p.config.Endpoint = oauth2.Endpoint{AuthURL: "https://slack.com/oauth/v2/authorize",
		TokenURL: "https://slack.com/api/oauth.v2.access", AuthStyle: oauth2.AuthStyleInHeader}
	p.config.Scopes = []string{"users:read"}
	p.scopeSep, p.scopeParam = ",", "user_scope"
	p.noPKCE = true // turning PKCE on at Slack makes the app public for good: state protects the flow
	p.API = api("https://slack.com/api")
	// Slack asks for user-token scopes with user_scope (commas), answers HTTP 200 with
	// {"ok": false} on errors, nests the user token in authed_user, and calls its tokens
	// "user" rather than "Bearer".
	p.dialect.exchange = func(ctx context.Context, p *Provider, code, verifier string) (*Token, error) {
		form := url.Values{"code": {code}, "redirect_uri": {p.config.RedirectURL}}
		var r struct {
			OK         bool   `json:"ok"`
			Error      string `json:"error"`
			AuthedUser struct {
				ID           string `json:"id"`
				Scope        string `json:"scope"`
				AccessToken  string `json:"access_token"`
				RefreshToken string `json:"refresh_token"`
				ExpiresIn    int64  `json:"expires_in"`
			} `json:"authed_user"`
			Team struct {
				ID   string `json:"id"`
				Name string `json:"name"`
			} `json:"team"`
		}
		if err := p.slackPost(ctx, form, &r); err != nil {
			return nil, err
		}
		if !r.OK || r.AuthedUser.AccessToken == "" {
			return nil, fmt.Errorf("exchange the code: Slack answered %q", r.Error)
		}
		t := &Token{AccessToken: r.AuthedUser.AccessToken, RefreshToken: r.AuthedUser.RefreshToken, TokenType: "Bearer",
			Scopes:  scopeList(r.AuthedUser.Scope),
			Account: Account{ID: r.Team.ID + "/" + r.AuthedUser.ID, Name: r.AuthedUser.ID + " in " + r.Team.Name}}
		if r.AuthedUser.ExpiresIn > 0 {
			t.Expiry = time.Now().Add(time.Duration(r.AuthedUser.ExpiresIn) * time.Second)
		}
		return t, nil
	}
	p.dialect.refresh = func(ctx context.Context, p *Provider, refreshToken string) (*Token, error) {
		var r struct {
			OK           bool   `json:"ok"`
			Error        string `json:"error"`
			AccessToken  string `json:"access_token"`
			RefreshToken string `json:"refresh_token"`
			ExpiresIn    int64  `json:"expires_in"`
			Scope        string `json:"scope"`
		}
		if err := p.slackPost(ctx, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refreshToken}}, &r); err != nil {
			return nil, err
		}
		if !r.OK {
			return nil, fmt.Errorf("%w: Slack answered %q", ErrReconnect, r.Error)
		}
		if r.AccessToken == "" {
			return nil, errors.New("refresh the token: Slack's answer has no access token")
		}
		t := &Token{AccessToken: r.AccessToken, RefreshToken: r.RefreshToken, TokenType: "Bearer",
			Scopes: scopeList(r.Scope)}
		if r.ExpiresIn > 0 {
			t.Expiry = time.Now().Add(time.Duration(r.ExpiresIn) * time.Second)
		}
		return t, nil
	}
	p.dialect.account = func(ctx context.Context, p *Provider, t *Token) (Account, error) {
		// The exchange already read team and user; auth.test gives the user's handle.
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://slack.com/api/auth.test", nil)
		if err != nil {
			return Account{}, err
		}
		req.Header.Set("Authorization", "Bearer "+t.AccessToken)
		var r struct {
			OK   bool   `json:"ok"`
			User string `json:"user"`
			Team string `json:"team"`
		}
		if err := p.doJSON(req, &r); err != nil || !r.OK {
			return t.Account, nil // the handle is for display only
		}
		return Account{ID: t.Account.ID, Name: r.User + " in " + r.Team}, nil
	}
	p.dialect.revoke = func(ctx context.Context, p *Provider, t *Token) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://slack.com/api/auth.revoke", nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+t.AccessToken)
		var r struct {
			OK    bool   `json:"ok"`
			Error string `json:"error"`
		}
		if err := p.doJSON(req, &r); err != nil {
			return err
		}
		if !r.OK {
			return fmt.Errorf("auth.revoke answered %q", r.Error)
		}
		return nil
	}
}

// slackPost posts form to Slack's token method with basic client authentication.
func (p *Provider) slackPost(ctx context.Context, form url.Values, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.config.Endpoint.TokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(p.config.ClientID), url.QueryEscape(p.config.ClientSecret))
	return p.doJSON(req, v)
}

// jsonToken posts a JSON token request (Atlassian, Notion) and reads the answer: access and
// refresh token, expires_in if any, and, for Notion, the owner as the account.
func (p *Provider) jsonToken(ctx context.Context, body map[string]string, basic bool) (*Token, error) {
	doc, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.config.Endpoint.TokenURL, bytes.NewReader(doc))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if basic {
		req.SetBasicAuth(p.config.ClientID, p.config.ClientSecret)
		req.Header.Set("Notion-Version", notionVersion)
	}
	var r struct {
		AccessToken   string `json:"access_token"`
		RefreshToken  string `json:"refresh_token"`
		ExpiresIn     int64  `json:"expires_in"`
		Scope         string `json:"scope"`
		WorkspaceID   string `json:"workspace_id"`
		WorkspaceName string `json:"workspace_name"`
		Owner         struct {
			User struct {
				ID   string `json:"id"`
				Name string `json:"name"`
			} `json:"user"`
		} `json:"owner"`
	}
	if err := p.doJSON(req, &r); err != nil {
		var pe *providerError
		if errors.As(err, &pe) && refusal(pe.status) && body["grant_type"] == "refresh_token" {
			return nil, fmt.Errorf("%w: %v", ErrReconnect, err)
		}
		return nil, fmt.Errorf("token request: %w", err)
	}
	if r.AccessToken == "" {
		return nil, fmt.Errorf("token request: the answer has no access token")
	}
	t := &Token{AccessToken: r.AccessToken, RefreshToken: r.RefreshToken, TokenType: "Bearer", Scopes: strings.Fields(r.Scope)}
	if r.ExpiresIn > 0 {
		t.Expiry = time.Now().Add(time.Duration(r.ExpiresIn) * time.Second)
	}
	if r.Owner.User.ID != "" {
		name := r.Owner.User.Name
		if r.WorkspaceName != "" {
			name += " in " + r.WorkspaceName
		}
		// One Notion user may connect several workspaces: the workspace is part of the key.
		id := r.Owner.User.ID
		if r.WorkspaceID != "" {
			id = r.WorkspaceID + "/" + id
		}
		t.Account = Account{ID: id, Name: name}
	}
	return t, nil
}
