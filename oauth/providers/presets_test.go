package providers

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"
)

// These tests hold the presets to the providers' documented behaviour
// (docs/provider-presets.md): a stand-in answers as each provider's documentation says, at
// the provider's real URLs, and the tests check what the preset sent and what it made of the
// answers.

func TestPresetAuthorizationURLs(t *testing.T) {
	tests := []struct {
		name     string
		preset   string
		edit     func(*Config)
		scopes   []string          // asked for by connect; the preset's defaults if nil
		endpoint string            // scheme, host and path
		params   map[string]string // exact values; "" means absent
		pkce     bool
	}{
		{name: "github", preset: "github", endpoint: "https://github.com/login/oauth/authorize",
			params: map[string]string{"scope": "read:user"}, pkce: true},
		{name: "github scopes are space-separated", preset: "github", scopes: []string{"repo", "gist"},
			endpoint: "https://github.com/login/oauth/authorize", params: map[string]string{"scope": "repo gist"}, pkce: true},
		{name: "github auth_params are added", preset: "github", edit: func(c *Config) { c.AuthParams = map[string]string{"allow_signup": "false"} },
			endpoint: "https://github.com/login/oauth/authorize", params: map[string]string{"allow_signup": "false"}, pkce: true},
		{name: "google asks for offline access and a fresh consent", preset: "google", endpoint: "https://accounts.google.com/o/oauth2/v2/auth",
			params: map[string]string{"scope": "openid email profile", "access_type": "offline", "prompt": "consent", "include_granted_scopes": "true"}, pkce: true},
		{name: "microsoft common", preset: "microsoft", endpoint: "https://login.microsoftonline.com/common/oauth2/v2.0/authorize",
			params: map[string]string{"scope": "openid profile email offline_access User.Read"}, pkce: true},
		{name: "microsoft tenant in the path", preset: "microsoft", edit: func(c *Config) { c.Tenant = "72f988bf-86f1-41af-91ab-2d7cd011db47" },
			endpoint: "https://login.microsoftonline.com/72f988bf-86f1-41af-91ab-2d7cd011db47/oauth2/v2.0/authorize",
			params:   map[string]string{"scope": "openid profile email offline_access User.Read"}, pkce: true},
		{name: "microsoft tenant by domain name", preset: "microsoft", edit: func(c *Config) { c.Tenant = "contoso.onmicrosoft.com" },
			endpoint: "https://login.microsoftonline.com/contoso.onmicrosoft.com/oauth2/v2.0/authorize",
			params:   map[string]string{"scope": "openid profile email offline_access User.Read"}, pkce: true},
		{name: "slack asks user scopes with user_scope and no PKCE", preset: "slack", endpoint: "https://slack.com/oauth/v2/authorize",
			params: map[string]string{"user_scope": "users:read", "scope": ""}},
		{name: "slack user scopes are comma-separated", preset: "slack", scopes: []string{"users:read", "chat:write"},
			endpoint: "https://slack.com/oauth/v2/authorize", params: map[string]string{"user_scope": "users:read,chat:write", "scope": ""}},
		{name: "gitlab", preset: "gitlab", endpoint: "https://gitlab.com/oauth/authorize",
			params: map[string]string{"scope": "read_user"}, pkce: true},
		{name: "atlassian names the audience and asks consent", preset: "atlassian", endpoint: "https://auth.atlassian.com/authorize",
			params: map[string]string{"scope": "read:me offline_access", "audience": "api.atlassian.com", "prompt": "consent"}, pkce: true},
		{name: "notion has no scopes and no PKCE", preset: "notion", endpoint: "https://api.notion.com/v1/oauth/authorize",
			params: map[string]string{"owner": "user", "scope": ""}},
		{name: "linear", preset: "linear", endpoint: "https://linear.app/oauth/authorize",
			params: map[string]string{"scope": "read"}, pkce: true},
		{name: "linear scopes are comma-separated", preset: "linear", scopes: []string{"read", "write"},
			endpoint: "https://linear.app/oauth/authorize", params: map[string]string{"scope": "read,write"}, pkce: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStandIn(t)
			p := s.preset(t, tt.preset, tt.edit)
			u, err := url.Parse(p.AuthCodeURL(testState, testVerifier, tt.scopes))
			if err != nil {
				t.Fatal(err)
			}
			if got := u.Scheme + "://" + u.Host + u.Path; got != tt.endpoint {
				t.Errorf("endpoint %s, want %s", got, tt.endpoint)
			}
			if got, want := p.AuthorizationOrigin(), "https://"+u.Host; got != want {
				t.Errorf("AuthorizationOrigin %s, want %s", got, want)
			}
			q := u.Query()
			wantValues(t, "authorization URL", q, map[string]string{"response_type": "code", "client_id": testClientID,
				"redirect_uri": testRedirectURI, "state": testState})
			wantValues(t, "authorization URL", q, tt.params)
			pkce := map[string]string{"code_challenge": "", "code_challenge_method": ""}
			if tt.pkce {
				pkce = map[string]string{"code_challenge": oauth2.S256ChallengeFromVerifier(testVerifier), "code_challenge_method": "S256"}
			}
			wantValues(t, "authorization URL", q, pkce)
			if strings.Contains(u.RawQuery, testVerifier) || strings.Contains(u.RawQuery, testClientSecret) {
				t.Errorf("the authorization URL %s reveals the verifier or the client secret", u)
			}
			if len(s.requests()) != 0 {
				t.Errorf("AuthCodeURL sent %v", routesOf(s.requests()))
			}
		})
	}
}

func TestPresetExchange(t *testing.T) {
	tests := []struct {
		preset       string
		tokenRoute   string
		tokenAnswer  http.HandlerFunc
		checkRequest func(t *testing.T, r sentRequest)
		accountRoute string // "" when the token answer names the account
		account      http.HandlerFunc
		checkAccount func(t *testing.T, r sentRequest)
		want         Token
		expiresIn    time.Duration
	}{
		{
			preset:     "github",
			tokenRoute: "POST github.com/login/oauth/access_token",
			// GitHub answers form-encoded unless asked otherwise, with comma-separated scopes.
			tokenAnswer: replyForm(200, "access_token=gho_16C7e42F292c6912E7710c838347Ae178B4a&scope=repo%2Cgist&token_type=bearer"),
			checkRequest: func(t *testing.T, r sentRequest) {
				r.wantNoAuthorization(t)
				wantValues(t, "token request", r.form(t), map[string]string{"client_id": testClientID, "client_secret": testClientSecret,
					"code": testCode, "redirect_uri": testRedirectURI, "code_verifier": testVerifier, "grant_type": "authorization_code"})
			},
			accountRoute: "GET api.github.com/user",
			account:      replyJSON(200, `{"login":"octocat","id":1,"node_id":"MDQ6VXNlcjE=","type":"User","name":"monalisa octocat","email":null}`),
			checkAccount: func(t *testing.T, r sentRequest) { r.wantBearer(t, "gho_16C7e42F292c6912E7710c838347Ae178B4a") },
			want: Token{AccessToken: "gho_16C7e42F292c6912E7710c838347Ae178B4a", TokenType: "Bearer", Scopes: []string{"repo", "gist"},
				Account: Account{ID: "1", Name: "octocat"}},
		},
		{
			preset:     "google",
			tokenRoute: "POST oauth2.googleapis.com/token",
			tokenAnswer: replyJSON(200, `{"access_token":"ya29.a0AfH6SMBx3Vn","expires_in":3599,"refresh_token":"1//0gLmN8xW-refresh",`+
				`"scope":"openid https://www.googleapis.com/auth/userinfo.email https://www.googleapis.com/auth/userinfo.profile",`+
				`"token_type":"Bearer","id_token":"eyJhbGciOiJSUzI1NiJ9.e30.c2ln"}`),
			checkRequest: func(t *testing.T, r sentRequest) {
				r.wantNoAuthorization(t)
				wantValues(t, "token request", r.form(t), map[string]string{"client_id": testClientID, "client_secret": testClientSecret,
					"code": testCode, "redirect_uri": testRedirectURI, "code_verifier": testVerifier, "grant_type": "authorization_code"})
			},
			accountRoute: "GET openidconnect.googleapis.com/v1/userinfo",
			account: replyJSON(200, `{"sub":"110169484474386276334","name":"Ada Lovelace","given_name":"Ada",`+
				`"email":"ada@example.com","email_verified":true,"picture":"https://lh3.googleusercontent.com/a/x"}`),
			checkAccount: func(t *testing.T, r sentRequest) { r.wantBearer(t, "ya29.a0AfH6SMBx3Vn") },
			want: Token{AccessToken: "ya29.a0AfH6SMBx3Vn", RefreshToken: "1//0gLmN8xW-refresh", TokenType: "Bearer",
				Scopes:  []string{"openid", "https://www.googleapis.com/auth/userinfo.email", "https://www.googleapis.com/auth/userinfo.profile"},
				Account: Account{ID: "110169484474386276334", Name: "ada@example.com"}},
			expiresIn: 3599 * time.Second,
		},
		{
			preset:     "microsoft",
			tokenRoute: "POST login.microsoftonline.com/common/oauth2/v2.0/token",
			tokenAnswer: replyJSON(200, `{"token_type":"Bearer","scope":"openid profile email User.Read","expires_in":4523,"ext_expires_in":4523,`+
				`"access_token":"EwBwA8l6BAAUO9chh8cJscQLmU","refresh_token":"M.C107_BAY.-CVz7","id_token":"eyJ0eXAiOiJKV1QifQ.e30.c2ln"}`),
			checkRequest: func(t *testing.T, r sentRequest) {
				r.wantNoAuthorization(t)
				wantValues(t, "token request", r.form(t), map[string]string{"client_id": testClientID, "client_secret": testClientSecret,
					"code": testCode, "redirect_uri": testRedirectURI, "code_verifier": testVerifier, "grant_type": "authorization_code"})
			},
			accountRoute: "GET graph.microsoft.com/v1.0/me",
			account: replyJSON(200, `{"@odata.context":"https://graph.microsoft.com/v1.0/$metadata#users/$entity",`+
				`"id":"87d349ed-44d7-43e1-9a83-5f2406dee5bd","displayName":"Adele Vance","userPrincipalName":"AdeleV@contoso.com","mail":"AdeleV@contoso.com"}`),
			checkAccount: func(t *testing.T, r sentRequest) { r.wantBearer(t, "EwBwA8l6BAAUO9chh8cJscQLmU") },
			want: Token{AccessToken: "EwBwA8l6BAAUO9chh8cJscQLmU", RefreshToken: "M.C107_BAY.-CVz7", TokenType: "Bearer",
				Scopes: []string{"openid", "profile", "email", "User.Read"}, Account: Account{ID: "87d349ed-44d7-43e1-9a83-5f2406dee5bd", Name: "AdeleV@contoso.com"}},
			expiresIn: 4523 * time.Second,
		},
		{
			preset:     "slack",
			tokenRoute: "POST slack.com/api/oauth.v2.access",
			// A user-token-only install: the user token is nested, there is no top-level one.
			tokenAnswer: replyJSON(200, `{"ok":true,"app_id":"A0KRD7HC3","authed_user":{"id":"U1234","scope":"users:read,chat:write",`+
				`"access_token":"xoxe.xoxp-1-Mi0yLTEy","token_type":"user","refresh_token":"xoxe-1-My0xLTIx","expires_in":43200},`+
				`"team":{"id":"T9TK3CUKW","name":"Slack Softball Team"},"enterprise":null,"is_enterprise_install":false}`),
			checkRequest: func(t *testing.T, r sentRequest) {
				r.wantBasicClient(t)
				wantValues(t, "token request", r.form(t), map[string]string{"code": testCode, "redirect_uri": testRedirectURI,
					"client_secret": "", "code_verifier": ""})
			},
			accountRoute: "POST slack.com/api/auth.test",
			account: replyJSON(200, `{"ok":true,"url":"https://softball.slack.com/","team":"Slack Softball Team","user":"grace",`+
				`"team_id":"T9TK3CUKW","user_id":"U1234"}`),
			checkAccount: func(t *testing.T, r sentRequest) { r.wantBearer(t, "xoxe.xoxp-1-Mi0yLTEy") },
			want: Token{AccessToken: "xoxe.xoxp-1-Mi0yLTEy", RefreshToken: "xoxe-1-My0xLTIx", TokenType: "Bearer",
				Scopes: []string{"users:read", "chat:write"}, Account: Account{ID: "T9TK3CUKW/U1234", Name: "grace in Slack Softball Team"}},
			expiresIn: 12 * time.Hour,
		},
		{
			preset:     "gitlab",
			tokenRoute: "POST gitlab.com/oauth/token",
			tokenAnswer: replyJSON(200, `{"access_token":"de6780bc506a0446309bd9362820ba8aed28aa506c71eedbe1c5c4f9dd350e54","token_type":"bearer",`+
				`"expires_in":7200,"refresh_token":"8257e65c97202ed1726cf9571600918f3bffb2544b26e00a61df9897668c33a1","scope":"read_user","created_at":1607635748}`),
			checkRequest: func(t *testing.T, r sentRequest) {
				r.wantNoAuthorization(t)
				wantValues(t, "token request", r.form(t), map[string]string{"client_id": testClientID, "client_secret": testClientSecret,
					"code": testCode, "redirect_uri": testRedirectURI, "code_verifier": testVerifier, "grant_type": "authorization_code"})
			},
			accountRoute: "GET gitlab.com/api/v4/user",
			account:      replyJSON(200, `{"id":1,"username":"john_smith","name":"John Smith","state":"active","web_url":"https://gitlab.com/john_smith"}`),
			checkAccount: func(t *testing.T, r sentRequest) {
				r.wantBearer(t, "de6780bc506a0446309bd9362820ba8aed28aa506c71eedbe1c5c4f9dd350e54")
			},
			want: Token{AccessToken: "de6780bc506a0446309bd9362820ba8aed28aa506c71eedbe1c5c4f9dd350e54",
				RefreshToken: "8257e65c97202ed1726cf9571600918f3bffb2544b26e00a61df9897668c33a1", TokenType: "Bearer",
				Scopes: []string{"read_user"}, Account: Account{ID: "1", Name: "john_smith"}},
			expiresIn: 2 * time.Hour,
		},
		{
			preset:     "atlassian",
			tokenRoute: "POST auth.atlassian.com/oauth/token",
			tokenAnswer: replyJSON(200, `{"access_token":"eyJraWQiOiJhY2Nlc3MifQ.access","expires_in":3600,"token_type":"Bearer",`+
				`"refresh_token":"eyJraWQiOiJyZWZyZXNoIn0.refresh","scope":"read:me offline_access"}`),
			checkRequest: func(t *testing.T, r sentRequest) {
				// JSON, with the client's credentials in the body.
				r.wantNoAuthorization(t)
				wantFields(t, "token request", r.json(t), map[string]string{"grant_type": "authorization_code", "client_id": testClientID,
					"client_secret": testClientSecret, "code": testCode, "redirect_uri": testRedirectURI})
			},
			accountRoute: "GET api.atlassian.com/me",
			account: replyJSON(200, `{"account_type":"atlassian","account_id":"112233:aabbccdd-1234-5678","email":"mia@example.com",`+
				`"name":"Mia Krystof","picture":"https://avatar-management.example/mk.png","account_status":"active","nickname":"mkrystof"}`),
			checkAccount: func(t *testing.T, r sentRequest) { r.wantBearer(t, "eyJraWQiOiJhY2Nlc3MifQ.access") },
			want: Token{AccessToken: "eyJraWQiOiJhY2Nlc3MifQ.access", RefreshToken: "eyJraWQiOiJyZWZyZXNoIn0.refresh", TokenType: "Bearer",
				Scopes: []string{"read:me", "offline_access"}, Account: Account{ID: "112233:aabbccdd-1234-5678", Name: "Mia Krystof"}},
			expiresIn: time.Hour,
		},
		{
			preset:     "notion",
			tokenRoute: "POST api.notion.com/v1/oauth/token",
			// No expires_in and no scope; the account is the owner in the answer.
			tokenAnswer: replyJSON(200, `{"access_token":"ntn_4f6bdb2e1a","token_type":"bearer","refresh_token":"nrt_9c1d7e3b5a",`+
				`"bot_id":"b3414d65-9e1f-4c4d-8b6e-2f3c1a0e5d77","workspace_id":"d2d1e0f4-7a41-4b8e-9c3d-5e6f7a8b9c0d",`+
				`"workspace_name":"Acme HQ","workspace_icon":"https://www.notion.so/images/acme.png",`+
				`"owner":{"type":"user","user":{"object":"user","id":"06f4bd1c-2a3b-4c5d-8e9f-0a1b2c3d4e5f","name":"Ada Lovelace",`+
				`"avatar_url":null,"type":"person","person":{"email":"ada@example.com"}}},"duplicated_template_id":null,"request_id":"req-1"}`),
			checkRequest: func(t *testing.T, r sentRequest) {
				r.wantBasicClient(t)
				if v := r.Header.Get("Notion-Version"); v == "" {
					t.Error("token request without Notion-Version")
				}
				wantFields(t, "token request", r.json(t), map[string]string{"grant_type": "authorization_code", "code": testCode,
					"redirect_uri": testRedirectURI, "client_secret": "", "code_verifier": ""})
			},
			want: Token{AccessToken: "ntn_4f6bdb2e1a", RefreshToken: "nrt_9c1d7e3b5a", TokenType: "Bearer",
				Account: Account{ID: "d2d1e0f4-7a41-4b8e-9c3d-5e6f7a8b9c0d/06f4bd1c-2a3b-4c5d-8e9f-0a1b2c3d4e5f", Name: "Ada Lovelace in Acme HQ"}},
		},
		{
			preset:     "linear",
			tokenRoute: "POST api.linear.app/oauth/token",
			// Scopes are asked for with commas but granted with spaces.
			tokenAnswer: replyJSON(200, `{"access_token":"lin_oauth_8f8a9b","token_type":"Bearer","expires_in":86399,"scope":"read write",`+
				`"refresh_token":"lin_refresh_2c4e6a"}`),
			checkRequest: func(t *testing.T, r sentRequest) {
				r.wantNoAuthorization(t)
				wantValues(t, "token request", r.form(t), map[string]string{"client_id": testClientID, "client_secret": testClientSecret,
					"code": testCode, "redirect_uri": testRedirectURI, "code_verifier": testVerifier, "grant_type": "authorization_code"})
			},
			accountRoute: "POST api.linear.app/graphql",
			account:      replyJSON(200, `{"data":{"viewer":{"id":"2e7c0a4e-6b1f-4f0e-9a51-7d3c2b1a0f9e","name":"Ada Lovelace"}}}`),
			checkAccount: func(t *testing.T, r sentRequest) {
				r.wantBearer(t, "lin_oauth_8f8a9b")
				if q, _ := r.json(t)["query"].(string); !strings.Contains(q, "viewer") {
					t.Errorf("GraphQL query %q does not read the viewer", q)
				}
			},
			want: Token{AccessToken: "lin_oauth_8f8a9b", RefreshToken: "lin_refresh_2c4e6a", TokenType: "Bearer",
				Scopes: []string{"read", "write"}, Account: Account{ID: "2e7c0a4e-6b1f-4f0e-9a51-7d3c2b1a0f9e", Name: "Ada Lovelace"}},
			expiresIn: 86399 * time.Second,
		},
	}
	for _, tt := range tests {
		t.Run(tt.preset, func(t *testing.T) {
			s := newStandIn(t)
			p := s.preset(t, tt.preset, nil)
			s.handle(tt.tokenRoute, tt.tokenAnswer)
			if tt.accountRoute != "" {
				s.handle(tt.accountRoute, tt.account)
			}
			tok, err := p.Exchange(context.Background(), testCode, testVerifier)
			if err != nil {
				t.Fatalf("Exchange: %v", err)
			}
			wantToken(t, tok, tt.want, tt.expiresIn)

			reqs := s.requests()
			want := []string{tt.tokenRoute}
			if tt.accountRoute != "" {
				want = append(want, tt.accountRoute)
			}
			if got := routesOf(reqs); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("sent %q, want %q", got, want)
			}
			tt.checkRequest(t, reqs[0])
			if tt.checkAccount != nil {
				tt.checkAccount(t, reqs[1])
			}
		})
	}
}

func TestGitHubAppExchangeKeepsTheExpiringTokenAndItsRefreshToken(t *testing.T) {
	s := newStandIn(t)
	p := s.preset(t, "github", nil)
	s.handle("POST github.com/login/oauth/access_token", replyForm(200, "access_token=ghu_16C7e42F292c6912E7710c8383&expires_in=28800"+
		"&refresh_token=ghr_1B4a2e77838347a7E420ce178F2E7c6912E169246c34E1ccbF66C46812d16D5B1A9Dc86A1498&refresh_token_expires_in=15811200&scope=&token_type=bearer"))
	s.handle("GET api.github.com/user", replyJSON(200, `{"login":"octocat","id":583231}`))
	tok, err := p.Exchange(context.Background(), testCode, testVerifier)
	if err != nil {
		t.Fatal(err)
	}
	wantToken(t, tok, Token{AccessToken: "ghu_16C7e42F292c6912E7710c8383",
		RefreshToken: "ghr_1B4a2e77838347a7E420ce178F2E7c6912E169246c34E1ccbF66C46812d16D5B1A9Dc86A1498",
		TokenType:    "Bearer", Account: Account{ID: "583231", Name: "octocat"}}, 8*time.Hour)
}

func TestSlackAccountKeepsTheExchangeNamesWhenAuthTestFails(t *testing.T) {
	s := newStandIn(t)
	p := s.preset(t, "slack", nil)
	s.handle("POST slack.com/api/oauth.v2.access", replyJSON(200, `{"ok":true,"app_id":"A0KRD7HC3","authed_user":{"id":"U1234",`+
		`"scope":"users:read","access_token":"xoxp-1234","token_type":"user"},"team":{"id":"T9TK3CUKW","name":"Softball"},"enterprise":null}`))
	s.handle("POST slack.com/api/auth.test", replyJSON(200, `{"ok":false,"error":"invalid_auth"}`))
	tok, err := p.Exchange(context.Background(), testCode, testVerifier)
	if err != nil {
		t.Fatal(err)
	}
	wantToken(t, tok, Token{AccessToken: "xoxp-1234", TokenType: "Bearer", Scopes: []string{"users:read"},
		Account: Account{ID: "T9TK3CUKW/U1234", Name: "U1234 in Softball"}}, 0)
}

func TestPresetExchangeErrorNamesTheErrorAndNoSecret(t *testing.T) {
	// The error descriptions echo what was sent, as some providers do: none of it may reach
	// the error.
	echo := "code " + testCode + " for client secret " + testClientSecret
	tests := []struct {
		preset string
		route  string
		answer http.HandlerFunc
		code   string
	}{
		{"github", "POST github.com/login/oauth/access_token",
			replyForm(200, "error=bad_verification_code&error_description="+url.QueryEscape(echo)+
				"&error_uri=https%3A%2F%2Fdocs.github.com%2Fapps%2Fmanaging-oauth-apps%2Ftroubleshooting-oauth-app-access-token-request-errors%2F%23bad-verification-code"),
			"bad_verification_code"},
		{"google", "POST oauth2.googleapis.com/token", replyJSON(400, `{"error":"invalid_grant","error_description":"`+echo+`"}`), "invalid_grant"},
		{"microsoft", "POST login.microsoftonline.com/common/oauth2/v2.0/token",
			replyJSON(400, `{"error":"invalid_grant","error_description":"AADSTS70008: The provided authorization code or refresh token has expired. `+echo+`",`+
				`"error_codes":[70008],"timestamp":"2026-01-12 10:00:00Z","trace_id":"t","correlation_id":"c"}`), "invalid_grant"},
		{"slack", "POST slack.com/api/oauth.v2.access", replyJSON(200, `{"ok":false,"error":"invalid_code","warning":"`+echo+`"}`), "invalid_code"},
		{"gitlab", "POST gitlab.com/oauth/token", replyJSON(400, `{"error":"invalid_grant","error_description":"`+echo+`"}`), "invalid_grant"},
		{"atlassian", "POST auth.atlassian.com/oauth/token", replyJSON(400, `{"error":"invalid_grant","error_description":"`+echo+`"}`), "invalid_grant"},
		{"notion", "POST api.notion.com/v1/oauth/token", replyJSON(400, `{"error":"invalid_grant","error_description":"`+echo+`","request_id":"r"}`), "invalid_grant"},
		{"linear", "POST api.linear.app/oauth/token", replyJSON(400, `{"error":"invalid_grant","error_description":"`+echo+`"}`), "invalid_grant"},
	}
	for _, tt := range tests {
		t.Run(tt.preset, func(t *testing.T) {
			s := newStandIn(t)
			p := s.preset(t, tt.preset, nil)
			s.handle(tt.route, tt.answer)
			tok, err := p.Exchange(context.Background(), testCode, testVerifier)
			if err == nil {
				t.Fatalf("Exchange succeeded with %+v", tok)
			}
			if !strings.Contains(err.Error(), tt.code) {
				t.Errorf("the error %q does not name %s", err, tt.code)
			}
			if errors.Is(err, ErrReconnect) {
				t.Errorf("a refused code is ErrReconnect: %v", err)
			}
			wantNoSecret(t, err)
			if got := routesOf(s.requests()); len(got) != 1 {
				t.Errorf("sent %q, want the token request once", got)
			}
		})
	}
}

func TestExchangeFailsWhenTheAccountCannotBeRead(t *testing.T) {
	s := newStandIn(t)
	p := s.preset(t, "gitlab", nil)
	s.handle("POST gitlab.com/oauth/token", replyJSON(200, `{"access_token":"glpat-access-secret","token_type":"bearer","expires_in":7200,"refresh_token":"glrt-refresh-secret"}`))
	s.handle("GET gitlab.com/api/v4/user", replyJSON(401, `{"message":"401 Unauthorized glpat-access-secret"}`))
	_, err := p.Exchange(context.Background(), testCode, testVerifier)
	if err == nil || !strings.Contains(err.Error(), "account") || !strings.Contains(err.Error(), "401") {
		t.Fatalf("Exchange: %v, want an error about the account read", err)
	}
	wantNoSecret(t, err, "glpat-access-secret", "glrt-refresh-secret")
}

// connected is a token as Exchange left it, to refresh or revoke.
func connected() *Token {
	return &Token{AccessToken: "old-access-token", RefreshToken: "old-refresh-token", TokenType: "Bearer",
		Expiry: time.Now().Add(-time.Minute), Scopes: []string{"old-scope"}, Account: Account{ID: "42", Name: "someone"}}
}

func TestPresetRefresh(t *testing.T) {
	formRefresh := func(t *testing.T, r sentRequest) {
		r.wantNoAuthorization(t)
		wantValues(t, "refresh request", r.form(t), map[string]string{"grant_type": "refresh_token", "refresh_token": "old-refresh-token",
			"client_id": testClientID, "client_secret": testClientSecret})
	}
	tests := []struct {
		preset       string
		route        string
		answer       http.HandlerFunc
		checkRequest func(t *testing.T, r sentRequest)
		want         Token // the account is always kept
		expiresIn    time.Duration
	}{
		{preset: "github", route: "POST github.com/login/oauth/access_token",
			answer:       replyForm(200, "access_token=ghu_new&expires_in=28800&refresh_token=ghr_new&refresh_token_expires_in=15811200&scope=&token_type=bearer"),
			checkRequest: formRefresh, want: Token{AccessToken: "ghu_new", RefreshToken: "ghr_new", Scopes: []string{"old-scope"}}, expiresIn: 8 * time.Hour},
		// Google does not rotate: the refresh token is kept.
		{preset: "google", route: "POST oauth2.googleapis.com/token",
			answer:       replyJSON(200, `{"access_token":"ya29.new","expires_in":3599,"scope":"openid https://www.googleapis.com/auth/userinfo.email","token_type":"Bearer"}`),
			checkRequest: formRefresh, want: Token{AccessToken: "ya29.new", RefreshToken: "old-refresh-token",
				Scopes: []string{"openid", "https://www.googleapis.com/auth/userinfo.email"}}, expiresIn: 3599 * time.Second},
		{preset: "microsoft", route: "POST login.microsoftonline.com/common/oauth2/v2.0/token",
			answer:       replyJSON(200, `{"token_type":"Bearer","scope":"User.Read","expires_in":3900,"ext_expires_in":3900,"access_token":"EwB.new","refresh_token":"M.C107.new"}`),
			checkRequest: formRefresh, want: Token{AccessToken: "EwB.new", RefreshToken: "M.C107.new", Scopes: []string{"User.Read"}}, expiresIn: 3900 * time.Second},
		// Slack's refresh answer is flat, and calls the token "user".
		{preset: "slack", route: "POST slack.com/api/oauth.v2.access",
			answer: replyJSON(200, `{"ok":true,"app_id":"A0KRD7HC3","scope":"users:read,chat:write","token_type":"user",`+
				`"access_token":"xoxe.xoxp-1-new","refresh_token":"xoxe-1-new","expires_in":43200,"team":{"id":"T9TK3CUKW","name":"Softball"},`+
				`"enterprise":null,"is_enterprise_install":false}`),
			checkRequest: func(t *testing.T, r sentRequest) {
				r.wantBasicClient(t)
				wantValues(t, "refresh request", r.form(t), map[string]string{"grant_type": "refresh_token", "refresh_token": "old-refresh-token", "client_secret": ""})
			},
			want: Token{AccessToken: "xoxe.xoxp-1-new", RefreshToken: "xoxe-1-new", Scopes: []string{"users:read", "chat:write"}}, expiresIn: 12 * time.Hour},
		{preset: "gitlab", route: "POST gitlab.com/oauth/token",
			answer:       replyJSON(200, `{"access_token":"gl-new","token_type":"bearer","expires_in":7200,"refresh_token":"gl-refresh-new","scope":"read_user","created_at":1607635748}`),
			checkRequest: formRefresh, want: Token{AccessToken: "gl-new", RefreshToken: "gl-refresh-new", Scopes: []string{"read_user"}}, expiresIn: 2 * time.Hour},
		{preset: "atlassian", route: "POST auth.atlassian.com/oauth/token",
			answer: replyJSON(200, `{"access_token":"at-new","expires_in":3600,"token_type":"Bearer","refresh_token":"at-refresh-new","scope":"read:me offline_access"}`),
			checkRequest: func(t *testing.T, r sentRequest) {
				r.wantNoAuthorization(t)
				wantFields(t, "refresh request", r.json(t), map[string]string{"grant_type": "refresh_token", "refresh_token": "old-refresh-token",
					"client_id": testClientID, "client_secret": testClientSecret})
			},
			want: Token{AccessToken: "at-new", RefreshToken: "at-refresh-new", Scopes: []string{"read:me", "offline_access"}}, expiresIn: time.Hour},
		// Notion rotates and sends no expiry.
		{preset: "notion", route: "POST api.notion.com/v1/oauth/token",
			answer: replyJSON(200, `{"access_token":"ntn_new","token_type":"bearer","refresh_token":"nrt_new","bot_id":"b","workspace_id":"w",`+
				`"workspace_name":"Acme HQ","owner":{"type":"user","user":{"object":"user","id":"u","name":"Ada"}},"request_id":"r"}`),
			checkRequest: func(t *testing.T, r sentRequest) {
				r.wantBasicClient(t)
				if r.Header.Get("Notion-Version") == "" {
					t.Error("refresh request without Notion-Version")
				}
				wantFields(t, "refresh request", r.json(t), map[string]string{"grant_type": "refresh_token", "refresh_token": "old-refresh-token", "client_secret": ""})
			},
			want: Token{AccessToken: "ntn_new", RefreshToken: "nrt_new", Scopes: []string{"old-scope"}}},
		{preset: "linear", route: "POST api.linear.app/oauth/token",
			answer:       replyJSON(200, `{"access_token":"lin-new","token_type":"Bearer","expires_in":86399,"scope":"read write","refresh_token":"lin-refresh-new"}`),
			checkRequest: formRefresh, want: Token{AccessToken: "lin-new", RefreshToken: "lin-refresh-new", Scopes: []string{"read", "write"}}, expiresIn: 86399 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.preset, func(t *testing.T) {
			s := newStandIn(t)
			p := s.preset(t, tt.preset, nil)
			s.handle(tt.route, tt.answer)
			old := connected()
			next, err := p.Refresh(context.Background(), old)
			if err != nil {
				t.Fatalf("Refresh: %v", err)
			}
			want := tt.want
			want.TokenType, want.Account = "Bearer", old.Account
			wantToken(t, next, want, tt.expiresIn)
			r := s.only(t)
			if r.route() != tt.route {
				t.Errorf("sent %s, want %s", r.route(), tt.route)
			}
			tt.checkRequest(t, r)
		})
	}
}

func TestPresetRefreshRefusedMeansReconnect(t *testing.T) {
	tests := []struct {
		preset string
		route  string
		answer http.HandlerFunc
		code   string
	}{
		{"github", "POST github.com/login/oauth/access_token", replyForm(200, "error=bad_refresh_token&error_description=The+refresh+token+passed+is+incorrect+or+expired.&error_uri=https%3A%2F%2Fdocs.github.com"), "bad_refresh_token"},
		{"google", "POST oauth2.googleapis.com/token", replyJSON(400, `{"error":"invalid_grant","error_description":"Token has been expired or revoked."}`), "invalid_grant"},
		{"microsoft", "POST login.microsoftonline.com/common/oauth2/v2.0/token", replyJSON(400, `{"error":"invalid_grant","error_description":"AADSTS700082: The refresh token has expired due to inactivity.","error_codes":[700082]}`), "invalid_grant"},
		{"slack", "POST slack.com/api/oauth.v2.access", replyJSON(200, `{"ok":false,"error":"invalid_refresh_token"}`), "invalid_refresh_token"},
		{"gitlab", "POST gitlab.com/oauth/token", replyJSON(400, `{"error":"invalid_grant","error_description":"The provided authorization grant is invalid, expired, revoked, does not match the redirection URI used in the authorization request, or was issued to another client."}`), "invalid_grant"},
		{"atlassian", "POST auth.atlassian.com/oauth/token", replyJSON(403, `{"error":"invalid_grant","error_description":"Unknown or invalid refresh token."}`), "invalid_grant"},
		{"notion", "POST api.notion.com/v1/oauth/token", replyJSON(400, `{"error":"invalid_grant","error_description":"Invalid refresh token.","request_id":"r"}`), "invalid_grant"},
		{"linear", "POST api.linear.app/oauth/token", replyJSON(400, `{"error":"invalid_grant","error_description":"The refresh token is invalid"}`), "invalid_grant"},
	}
	for _, tt := range tests {
		t.Run(tt.preset, func(t *testing.T) {
			s := newStandIn(t)
			p := s.preset(t, tt.preset, nil)
			s.handle(tt.route, tt.answer)
			_, err := p.Refresh(context.Background(), connected())
			if !errors.Is(err, ErrReconnect) {
				t.Fatalf("Refresh: %v, want ErrReconnect", err)
			}
			if !strings.Contains(err.Error(), tt.code) {
				t.Errorf("the error %q does not name %s", err, tt.code)
			}
			wantNoSecret(t, err, "old-refresh-token", "old-access-token")
		})
	}
}

func TestRefreshWithoutRefreshTokenMeansReconnectWithoutAsking(t *testing.T) {
	for name := range presets {
		t.Run(name, func(t *testing.T) {
			s := newStandIn(t)
			p := s.preset(t, name, nil)
			tok := connected()
			tok.RefreshToken = ""
			if _, err := p.Refresh(context.Background(), tok); !errors.Is(err, ErrReconnect) {
				t.Errorf("Refresh: %v, want ErrReconnect", err)
			}
			if reqs := s.requests(); len(reqs) != 0 {
				t.Errorf("sent %q", routesOf(reqs))
			}
		})
	}
}

func TestRefreshFailingForOtherReasonsIsNotReconnect(t *testing.T) {
	// A provider that cannot be reached or fails is no reason to make the user connect again.
	tokenRoutes := map[string]string{
		"github":    "POST github.com/login/oauth/access_token",
		"google":    "POST oauth2.googleapis.com/token",
		"microsoft": "POST login.microsoftonline.com/common/oauth2/v2.0/token",
		"slack":     "POST slack.com/api/oauth.v2.access",
		"gitlab":    "POST gitlab.com/oauth/token",
		"atlassian": "POST auth.atlassian.com/oauth/token",
		"notion":    "POST api.notion.com/v1/oauth/token",
		"linear":    "POST api.linear.app/oauth/token",
	}
	for name, route := range tokenRoutes {
		t.Run(name+"/unreachable", func(t *testing.T) {
			s := newStandIn(t)
			p := s.preset(t, name, nil)
			s.srv.Close()
			_, err := p.Refresh(context.Background(), connected())
			if err == nil || errors.Is(err, ErrReconnect) {
				t.Fatalf("Refresh: %v, want an error that is not ErrReconnect", err)
			}
			wantNoSecret(t, err, "old-refresh-token", "old-access-token")
		})
		t.Run(name+"/server error", func(t *testing.T) {
			s := newStandIn(t)
			p := s.preset(t, name, nil)
			s.handle(route, replyJSON(503, `{"error":"temporarily_unavailable"}`))
			_, err := p.Refresh(context.Background(), connected())
			if err == nil || errors.Is(err, ErrReconnect) {
				t.Fatalf("Refresh: %v, want an error that is not ErrReconnect", err)
			}
			wantNoSecret(t, err, "old-refresh-token", "old-access-token")
		})
	}
}

func TestPresetRevoke(t *testing.T) {
	tests := []struct {
		preset       string
		route        string
		answer       http.HandlerFunc
		checkRequest func(t *testing.T, r sentRequest)
	}{
		// The whole grant, with the client's credentials and the access token in JSON.
		{"github", "DELETE api.github.com/applications/" + testClientID + "/grant", reply(204, "text/plain", ""),
			func(t *testing.T, r sentRequest) {
				r.wantBasicClient(t)
				wantFields(t, "revocation", r.json(t), map[string]string{"access_token": "old-access-token"})
			}},
		// The refresh token (which ends the grant) alone, without client authentication.
		{"google", "POST oauth2.googleapis.com/revoke", replyJSON(200, `{}`),
			func(t *testing.T, r sentRequest) {
				r.wantNoAuthorization(t)
				wantValues(t, "revocation", r.form(t), map[string]string{"token": "old-refresh-token", "client_id": "", "client_secret": ""})
			}},
		// RFC 7009 with the client's credentials in the form.
		{"gitlab", "POST gitlab.com/oauth/revoke", replyJSON(200, `{}`),
			func(t *testing.T, r sentRequest) {
				r.wantNoAuthorization(t)
				wantValues(t, "revocation", r.form(t), map[string]string{"token": "old-refresh-token", "client_id": testClientID, "client_secret": testClientSecret})
			}},
		{"slack", "POST slack.com/api/auth.revoke", replyJSON(200, `{"ok":true,"revoked":true}`),
			func(t *testing.T, r sentRequest) { r.wantBearer(t, "old-access-token") }},
		{"notion", "POST api.notion.com/v1/oauth/revoke", replyJSON(200, `{"request_id":"9a1b2c3d"}`),
			func(t *testing.T, r sentRequest) {
				r.wantBasicClient(t)
				if r.Header.Get("Notion-Version") == "" {
					t.Error("revocation without Notion-Version")
				}
				wantFields(t, "revocation", r.json(t), map[string]string{"token": "old-access-token"})
			}},
		// Authenticated by the token itself.
		{"linear", "POST api.linear.app/oauth/revoke", reply(200, "text/plain", ""),
			func(t *testing.T, r sentRequest) { r.wantBearer(t, "old-access-token") }},
	}
	for _, tt := range tests {
		t.Run(tt.preset, func(t *testing.T) {
			s := newStandIn(t)
			p := s.preset(t, tt.preset, nil)
			s.handle(tt.route, tt.answer)
			if err := p.Revoke(context.Background(), connected()); err != nil {
				t.Fatalf("Revoke: %v", err)
			}
			r := s.only(t)
			if r.route() != tt.route {
				t.Errorf("sent %s, want %s", r.route(), tt.route)
			}
			tt.checkRequest(t, r)
		})
	}
	for _, preset := range []string{"microsoft", "atlassian"} {
		t.Run(preset+" has no revocation", func(t *testing.T) {
			s := newStandIn(t)
			p := s.preset(t, preset, nil)
			if err := p.Revoke(context.Background(), connected()); !errors.Is(err, ErrNoRevocation) {
				t.Errorf("Revoke: %v, want ErrNoRevocation", err)
			}
			if reqs := s.requests(); len(reqs) != 0 {
				t.Errorf("sent %q", routesOf(reqs))
			}
		})
	}
}

func TestPresetRevokeRefusedIsAnErrorWithoutSecrets(t *testing.T) {
	tests := []struct {
		preset string
		route  string
		answer http.HandlerFunc
	}{
		{"github", "DELETE api.github.com/applications/" + testClientID + "/grant", replyJSON(422, `{"message":"Validation Failed old-access-token"}`)},
		{"google", "POST oauth2.googleapis.com/revoke", replyJSON(400, `{"error":"invalid_token","error_description":"Token expired or revoked"}`)},
		{"gitlab", "POST gitlab.com/oauth/revoke", replyJSON(403, `{"error":"unauthorized_client"}`)},
		{"slack", "POST slack.com/api/auth.revoke", replyJSON(200, `{"ok":false,"error":"invalid_auth"}`)},
		{"notion", "POST api.notion.com/v1/oauth/revoke", replyJSON(401, `{"object":"error","status":401,"code":"unauthorized","message":"API token is invalid."}`)},
		{"linear", "POST api.linear.app/oauth/revoke", replyJSON(400, `{"error":"unable to revoke"}`)},
	}
	for _, tt := range tests {
		t.Run(tt.preset, func(t *testing.T) {
			s := newStandIn(t)
			p := s.preset(t, tt.preset, nil)
			s.handle(tt.route, tt.answer)
			err := p.Revoke(context.Background(), connected())
			if err == nil || errors.Is(err, ErrNoRevocation) {
				t.Fatalf("Revoke: %v, want an error", err)
			}
			wantNoSecret(t, err, "old-refresh-token", "old-access-token")
		})
	}
}

func TestPresetIssuerCheck(t *testing.T) {
	const (
		msa     = "9188040d-6c67-4c5b-b112-36a304b66dad"
		contoso = "72f988bf-86f1-41af-91ab-2d7cd011db47"
	)
	tests := []struct {
		name   string
		preset string
		tenant string
		iss    string
		ok     bool
	}{
		{"google without iss", "google", "", "", true},
		{"google's issuer", "google", "", "https://accounts.google.com", true},
		{"google, another issuer", "google", "", "https://evil.example", false},
		{"google, issuer without scheme", "google", "", "accounts.google.com", false},
		{"google, issuer with a trailing slash", "google", "", "https://accounts.google.com/", false},

		{"microsoft without iss", "microsoft", "", "", true},
		{"microsoft common, a tenant", "microsoft", "", "https://login.microsoftonline.com/" + contoso + "/v2.0", true},
		{"microsoft common, personal accounts", "microsoft", "", "https://login.microsoftonline.com/" + msa + "/v2.0", true},
		{"microsoft common, the template", "microsoft", "", "https://login.microsoftonline.com/{tenantid}/v2.0", false},
		{"microsoft common, a tenant that is no ID", "microsoft", "", "https://login.microsoftonline.com/evil/v2.0", false},
		{"microsoft common, another host", "microsoft", "", "https://login.evil.example/" + contoso + "/v2.0", false},
		{"microsoft common, http", "microsoft", "", "http://login.microsoftonline.com/" + contoso + "/v2.0", false},
		{"microsoft common, v1 issuer", "microsoft", "", "https://sts.windows.net/" + contoso + "/", false},
		{"microsoft common, no version", "microsoft", "", "https://login.microsoftonline.com/" + contoso, false},
		{"microsoft common, longer path", "microsoft", "", "https://login.microsoftonline.com/" + contoso + "/v2.0/x", false},
		{"microsoft common, deeper tenant", "microsoft", "", "https://login.microsoftonline.com/a/" + contoso + "/v2.0", false},
		{"microsoft organizations, a tenant", "microsoft", "organizations", "https://login.microsoftonline.com/" + contoso + "/v2.0", true},
		{"microsoft fixed tenant, itself", "microsoft", contoso, "https://login.microsoftonline.com/" + contoso + "/v2.0", true},
		{"microsoft fixed tenant, itself in capitals", "microsoft", contoso, "https://login.microsoftonline.com/" + strings.ToUpper(contoso) + "/v2.0", true},
		{"microsoft fixed tenant, another tenant", "microsoft", contoso, "https://login.microsoftonline.com/" + msa + "/v2.0", false},

		// Providers whose issuer urlflow does not know take no iss at all.
		{"github without iss", "github", "", "", true},
		{"github with an iss", "github", "", "https://github.com", false},
		{"slack without iss", "slack", "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStandIn(t)
			p := s.preset(t, tt.preset, func(c *Config) { c.Tenant = tt.tenant })
			err := p.CheckIssuer(tt.iss)
			if (err == nil) != tt.ok {
				t.Errorf("CheckIssuer(%q) = %v, want ok %v", tt.iss, err, tt.ok)
			}
		})
	}
}

func TestAllPresetsConfigureTogether(t *testing.T) {
	s := newStandIn(t)
	order := []string{"github", "google", "microsoft", "slack", "gitlab", "atlassian", "notion", "linear"}
	labels := []string{"GitHub", "Google", "Microsoft", "Slack", "GitLab", "Atlassian", "Notion", "Linear"}
	var configs []Config
	for _, name := range order {
		cfg := testConfig(name)
		cfg.Preset = name
		configs = append(configs, cfg)
	}
	ps, err := s.newProviders(configs...)
	if err != nil {
		t.Fatal(err)
	}
	if got := ps.Names(); strings.Join(got, ",") != strings.Join(order, ",") {
		t.Errorf("Names %v, want %v", got, order)
	}
	for i, name := range order {
		p, ok := ps.Lookup(name)
		if !ok || p.Label != labels[i] || p.API == nil || p.API.Base() == nil {
			t.Errorf("Lookup(%s) = %+v, %v", name, p, ok)
		}
	}
	if _, ok := ps.Lookup("bitbucket"); ok {
		t.Error("Lookup found an unconfigured provider")
	}
	if reqs := s.requests(); len(reqs) != 0 {
		t.Errorf("configuring presets sent %q", routesOf(reqs))
	}
}

func TestRefreshKeepsWhatTheProviderDoesNotSendAgain(t *testing.T) {
	tests := []struct {
		preset    string
		route     string
		answer    string
		want      Token
		expiresIn time.Duration
	}{
		// Notion's refresh_token is nullable.
		{"notion", "POST api.notion.com/v1/oauth/token", `{"access_token":"ntn_new","token_type":"bearer","refresh_token":null,"workspace_id":"w",` +
			`"owner":{"type":"user","user":{"object":"user","id":"u"}}}`,
			Token{AccessToken: "ntn_new", RefreshToken: "old-refresh-token", Scopes: []string{"old-scope"}}, 0},
		{"slack", "POST slack.com/api/oauth.v2.access", `{"ok":true,"token_type":"user","access_token":"xoxp-new","expires_in":43200}`,
			Token{AccessToken: "xoxp-new", RefreshToken: "old-refresh-token", Scopes: []string{"old-scope"}}, 12 * time.Hour},
		{"atlassian", "POST auth.atlassian.com/oauth/token", `{"access_token":"at-new","token_type":"Bearer"}`,
			Token{AccessToken: "at-new", RefreshToken: "old-refresh-token", Scopes: []string{"old-scope"}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.preset, func(t *testing.T) {
			s := newStandIn(t)
			p := s.preset(t, tt.preset, nil)
			s.handle(tt.route, replyJSON(200, tt.answer))
			old := connected()
			next, err := p.Refresh(context.Background(), old)
			if err != nil {
				t.Fatal(err)
			}
			want := tt.want
			want.TokenType, want.Account = "Bearer", old.Account
			wantToken(t, next, want, tt.expiresIn)
		})
	}
}

func TestSlackRefreshWithoutAccessTokenFails(t *testing.T) {
	s := newStandIn(t)
	p := s.preset(t, "slack", nil)
	s.handle("POST slack.com/api/oauth.v2.access", replyJSON(200, `{"ok":true,"token_type":"user"}`))
	if tok, err := p.Refresh(context.Background(), connected()); err == nil || errors.Is(err, ErrReconnect) {
		t.Fatalf("Refresh = %+v, %v; want an error that is not ErrReconnect", tok, err)
	}
}

// TestEveryPresetCanReadTheAccount: a preset reads the connected account at a URL it gives,
// or its own way; never at no URL.
func TestEveryPresetCanReadTheAccount(t *testing.T) {
	for name, newPreset := range presets {
		p := &Provider{authParams: map[string]string{}}
		d := newPreset(Config{})
		d.configure(p)
		if _, own := d.(ownAccountReader); p.account.URL == "" && !own {
			t.Errorf("preset %s gives no account URL and does not read the account its own way", name)
		}
	}
}
