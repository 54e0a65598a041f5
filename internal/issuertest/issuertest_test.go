package issuertest

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/oauth2"
)

const callback = "https://urlflow.example/auth/callback"

// authURL is an authorization request of the registered client for callback, with the
// challenge of verifier.
func authURL(i *Issuer, verifier string, edit func(url.Values)) string {
	q := url.Values{"response_type": {"code"}, "client_id": {i.ClientID}, "redirect_uri": {callback},
		"scope": {"openid"}, "state": {"st"}, "nonce": {"n-1"},
		"code_challenge": {oauth2.S256ChallengeFromVerifier(verifier)}, "code_challenge_method": {"S256"}}
	if edit != nil {
		edit(q)
	}
	return i.AuthorizationEndpoint + "?" + q.Encode()
}

// post sends form to endpoint with the client's credentials in HTTP basic authentication,
// form-encoded as RFC 6749 wants, and returns the status and the JSON answer.
func post(t *testing.T, endpoint, id, secret string, form url.Values) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(id), url.QueryEscape(secret))
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var answer map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		t.Fatalf("%s answered %d without JSON: %v", endpoint, resp.StatusCode, err)
	}
	return resp.StatusCode, answer
}

func TestCodeIsExchangedOnceForTheRightClientRedirectAndVerifier(t *testing.T) {
	t.Parallel()
	i := Start(t)
	i.AllowRedirect(callback)
	i.SetAnswer(Answer{User: User{Subject: "alice"}})
	const verifier = "verifier-0123456789-0123456789-0123456789"
	tests := []struct {
		name   string
		secret string
		form   url.Values // over a correct exchange
		status int
		error  string
	}{
		{name: "wrong client secret", secret: "wrong", status: 401, error: "invalid_client"},
		{name: "another redirect URI", form: url.Values{"redirect_uri": {callback + "/other"}}, status: 400, error: "invalid_grant"},
		{name: "another verifier", form: url.Values{"code_verifier": {verifier + "x"}}, status: 400, error: "invalid_grant"},
		{name: "no verifier", form: url.Values{"code_verifier": nil}, status: 400, error: "invalid_grant"},
		{name: "another grant type", form: url.Values{"grant_type": {"refresh_token"}}, status: 400, error: "unsupported_grant_type"},
		{name: "right", status: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			back := i.Authorize(t, authURL(i, verifier, nil))
			form := url.Values{"grant_type": {"authorization_code"}, "code": {back.Query().Get("code")},
				"redirect_uri": {callback}, "code_verifier": {verifier}}
			for k, v := range tt.form {
				form[k] = v
			}
			secret := i.ClientSecret
			if tt.secret != "" {
				secret = tt.secret
			}
			status, answer := post(t, i.TokenEndpoint, i.ClientID, secret, form)
			if status != tt.status || (tt.error != "" && answer["error"] != tt.error) {
				t.Fatalf("got %d %v, want %d %s", status, answer, tt.status, tt.error)
			}
			if tt.status != 200 {
				return
			}
			if answer["id_token"] == nil || answer["access_token"] == nil {
				t.Fatalf("answer %v without tokens", answer)
			}
			if status, answer := post(t, i.TokenEndpoint, i.ClientID, secret, form); status != 400 || answer["error"] != "invalid_grant" {
				t.Fatalf("the code was exchanged twice: %d %v", status, answer)
			}
		})
	}
}

func TestAuthorizationIsSentBackOnlyToARegisteredRedirect(t *testing.T) {
	t.Parallel()
	i := Start(t)
	i.AllowRedirect(callback)
	i.SetAnswer(Answer{User: User{Subject: "alice"}})
	for name, u := range map[string]string{
		"unregistered redirect": authURL(i, "v", func(q url.Values) { q.Set("redirect_uri", "https://evil.example/cb") }),
		"unknown client":        authURL(i, "v", func(q url.Values) { q.Set("client_id", "stranger") }),
	} {
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Get(u)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: got %d, want 400 and no redirect", name, resp.StatusCode)
		}
	}
	back := i.Authorize(t, authURL(i, "v", func(q url.Values) { q.Del("code_challenge") }))
	if q := back.Query(); q.Get("error") != "invalid_request" || q.Has("code") || q.Get("state") != "st" {
		t.Errorf("a request without PKCE got back %v", q)
	}
	i.SetAnswer(Answer{Error: "access_denied", Iss: i.URL})
	if q := i.Authorize(t, authURL(i, "v", nil)).Query(); q.Get("error") != "access_denied" || q.Get("iss") != i.URL || q.Has("code") {
		t.Errorf("a refusal got back %v", q)
	}
}

func TestIntrospectionKnowsOnlyItsOpaqueTokensAndItsClient(t *testing.T) {
	t.Parallel()
	i := Start(t)
	token := i.OpaqueToken(map[string]any{"sub": "alice", "scope": "mcp"})
	if status, answer := post(t, i.IntrospectionEndpoint, i.ClientID, i.ClientSecret, url.Values{"token": {token}}); status != 200 ||
		answer["active"] != true || answer["sub"] != "alice" {
		t.Errorf("registered token: %d %v", status, answer)
	}
	if status, answer := post(t, i.IntrospectionEndpoint, i.ClientID, i.ClientSecret, url.Values{"token": {"other"}}); status != 200 ||
		len(answer) != 1 || answer["active"] != false {
		t.Errorf("unknown token: %d %v", status, answer)
	}
	if status, _ := post(t, i.IntrospectionEndpoint, i.ClientID, "wrong", url.Values{"token": {token}}); status != 401 {
		t.Errorf("wrong client secret: %d", status)
	}
	if got := i.Requests(i.IntrospectionEndpoint); got != 3 {
		t.Errorf("Requests = %d, want 3", got)
	}
}
