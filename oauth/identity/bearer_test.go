package identity

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/urlflow/urlflow/state"
)

const metadataURL = "https://urlflow.example/.well-known/oauth-protected-resource/mcp"

// scoped is a Verifier that gives the tokens of d the scopes named for their user.
type scoped struct {
	*Dev
	scopes map[string][]string
}

func (s scoped) Verify(ctx context.Context, token string) (Claims, error) {
	c, err := s.Dev.Verify(ctx, token)
	c.Scopes = s.scopes[c.User.Subject]
	return c, err
}

// unreachable is a Verifier whose issuer does not answer.
type unreachable struct{}

func (unreachable) Verify(context.Context, string) (Claims, error) {
	return Claims{}, errors.New("dial tcp 10.0.0.1:443: connection refused")
}

// answer is what a request to a handler behind RequireBearer got.
type answer struct {
	status    int
	challenge string
	error     string
	caller    *Caller // what the handler saw; nil if it was not reached
}

func serve(t *testing.T, h func(http.Handler) http.Handler, authorization string) answer {
	t.Helper()
	var seen *Caller
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, ok := CallerFrom(r.Context())
		if !ok {
			t.Error("the handler was reached without a caller")
		}
		seen = &c
	})
	req := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	rec := httptest.NewRecorder()
	h(next).ServeHTTP(rec, req)
	a := answer{status: rec.Code, challenge: rec.Header().Get("WWW-Authenticate"), caller: seen}
	if seen == nil {
		var body struct{ Error string }
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatalf("a refusal that is not JSON: %q", rec.Body)
		}
		a.error = body.Error
	}
	return a
}

func TestRequireBearerAnswersAsRFC6750Says(t *testing.T) {
	dev := NewDev([]byte(strings.Repeat("k", 32)), "https://urlflow.example/mcp")
	other := NewDev([]byte(strings.Repeat("k", 32)), "https://elsewhere.example/mcp")
	token := func(d *Dev, name string) string {
		tok, err := d.Issue(name)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	operators := NewOperators([]string{"operator-token-0123456789"}, nil)
	check := RequireBearer(scoped{dev, map[string][]string{"alice": {"mcp", "extra"}, "bob": {"extra"}}},
		BearerOptions{ResourceMetadataURL: metadataURL, Scopes: []string{"mcp"}})
	withOperators := RequireBearer(dev, BearerOptions{ResourceMetadataURL: metadataURL, Operators: operators})

	metadata := `resource_metadata="` + metadataURL + `"`
	for _, tt := range []struct {
		name          string
		check         func(http.Handler) http.Handler
		authorization string
		want          answer
	}{
		{"no header", check, "", answer{status: 401, challenge: "Bearer " + metadata, error: "a bearer token is required"}},
		{"basic authentication", check, "Basic YWxpY2U6c2VjcmV0", answer{status: 401, challenge: "Bearer " + metadata, error: "a bearer token is required"}},
		{"three fields", check, "Bearer tok-one tok-two", answer{status: 401, challenge: "Bearer " + metadata, error: "a bearer token is required"}},
		{"garbage", check, "Bearer not-a-token", answer{status: 401,
			challenge: `Bearer error="invalid_token", error_description="malformed", ` + metadata,
			error:     "the bearer token is not valid: malformed"}},
		{"another audience", check, "Bearer " + token(other, "alice"), answer{status: 401,
			challenge: `Bearer error="invalid_token", error_description="wrong audience", ` + metadata,
			error:     "the bearer token is not valid: wrong audience"}},
		{"a user without the scope", check, "Bearer " + token(dev, "bob"), answer{status: 403,
			challenge: `Bearer error="insufficient_scope", scope="mcp", ` + metadata,
			error:     "the token lacks the scopes mcp"}},
		{"an operator where operators are not accepted", check, "Bearer operator-token-0123456789", answer{status: 401,
			challenge: `Bearer error="invalid_token", error_description="malformed", ` + metadata,
			error:     "the bearer token is not valid: malformed"}},
		{"a user with the scope", check, "bearer " + token(dev, "alice"), answer{status: 200,
			caller: &Caller{Claims: Claims{User: dev.User("alice"), Scopes: []string{"mcp", "extra"}}}}},
		{"an operator where operators are accepted", withOperators, "Bearer operator-token-0123456789", answer{status: 200,
			caller: &Caller{Operator: true}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := serve(t, tt.check, tt.authorization)
			if got.caller != nil && tt.want.caller != nil {
				got.caller.Claims.Expiry = tt.want.caller.Claims.Expiry
			}
			if got.status != tt.want.status || got.challenge != tt.want.challenge || got.error != tt.want.error ||
				(got.caller == nil) != (tt.want.caller == nil) ||
				(got.caller != nil && (got.caller.Operator != tt.want.caller.Operator || got.caller.Claims.User != tt.want.caller.Claims.User ||
					strings.Join(got.caller.Claims.Scopes, " ") != strings.Join(tt.want.caller.Claims.Scopes, " "))) {
				t.Errorf("got %+v (caller %+v)\nwant %+v (caller %+v)", got, got.caller, tt.want, tt.want.caller)
			}
			if strings.Contains(got.challenge+got.error, strings.TrimPrefix(tt.authorization, "Bearer ")) && tt.authorization != "" && got.status != 200 {
				t.Error("the refusal quotes the token")
			}
		})
	}
}

// TestATokenThatCannotBeCheckedIsNotCalledInvalid: when the issuer does not answer, the
// client is not told to sign in again (401) and the reason stays in the log.
func TestATokenThatCannotBeCheckedIsNotCalledInvalid(t *testing.T) {
	var logs bytes.Buffer
	got := serve(t, RequireBearer(unreachable{}, BearerOptions{ResourceMetadataURL: metadataURL,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))}), "Bearer some-token")
	if got.status != http.StatusServiceUnavailable || got.challenge != "" || strings.Contains(got.error, "10.0.0.1") {
		t.Fatalf("got %+v, want 503 without a challenge or the detail", got)
	}
	if !strings.Contains(logs.String(), "10.0.0.1") {
		t.Fatalf("the detail is not in the log: %s", logs.String())
	}
}

// TestForSDKHandsTheUserToTheSDK: the MCP SDK's handler behind ForSDK reads the user that
// RequireBearer verified, with issuer and subject in its UserID.
func TestForSDKHandsTheUserToTheSDK(t *testing.T) {
	dev := NewDev([]byte(strings.Repeat("k", 32)), "https://urlflow.example/mcp")
	tok, err := dev.Issue("alice")
	if err != nil {
		t.Fatal(err)
	}
	var seen *auth.TokenInfo
	h := RequireBearer(dev, BearerOptions{})(ForSDK(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = auth.TokenInfoFromContext(r.Context())
	})))
	req := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	h.ServeHTTP(httptest.NewRecorder(), req)
	if u, ok := UserOf(seen); !ok || u != dev.User("alice") || seen.UserID != dev.User("alice").ID() {
		t.Fatalf("the SDK saw %+v", seen)
	}
}

// fixedClaims verifies every token as the claims it holds.
type fixedClaims Claims

func (f fixedClaims) Verify(context.Context, string) (Claims, error) { return Claims(f), nil }

// clients is a ServiceKeys with one service, weather, whose client is weather-client and
// whose client credentials tokens must carry the scope urlflow:delegate.
type clients struct{}

func (clients) ServiceOf(string) (string, bool) { return "", false }
func (clients) ServiceOfClient(id string) (string, []string, bool) {
	return "weather", []string{"urlflow:delegate"}, id == "weather-client"
}

func TestTokensThatNameNoUserOrAnotherActorAreNotAUsers(t *testing.T) {
	t.Parallel()
	clientOnly := fixedClaims{User: userOf("weather-client"), ClientID: "weather-client", Scopes: []string{"urlflow:delegate"}}
	exchanged := fixedClaims{User: userOf("alice"), Actor: "weather-client"}
	mcp := func(v Verifier) func(http.Handler) http.Handler {
		return RequireBearer(v, BearerOptions{ResourceMetadataURL: metadataURL})
	}
	api := func(v Verifier) func(http.Handler) http.Handler {
		return RequireBearer(v, BearerOptions{ResourceMetadataURL: metadataURL, Services: clients{}})
	}
	if a := serve(t, mcp(clientOnly), "Bearer t"); a.status != http.StatusUnauthorized || !strings.Contains(a.error, "names no user") ||
		!strings.Contains(a.error, "only a user's token is accepted here") {
		t.Errorf("a client's own token at /mcp: %+v", a)
	}
	if a := serve(t, api(clientOnly), "Bearer t"); a.caller == nil || a.caller.Service != "weather" {
		t.Errorf("weather's client token at the API: %+v, want the service weather", a)
	}
	other := fixedClaims{User: userOf("other-client"), ClientID: "other-client"}
	if a := serve(t, api(other), "Bearer t"); a.status != http.StatusUnauthorized {
		t.Errorf("another client's token at the API: %+v", a)
	}
	for _, h := range []func(Verifier) func(http.Handler) http.Handler{mcp, api} {
		if a := serve(t, h(exchanged), "Bearer t"); a.status != http.StatusUnauthorized || !strings.Contains(a.error, "exchanged for another party") {
			t.Errorf("an exchanged token: %+v", a)
		}
	}
}

func userOf(subject string) state.User {
	return state.User{Issuer: "https://id.example", Subject: subject}
}

// A service's client credentials token authenticates it only with the scopes the service
// requires: without them it is refused as RFC 6750 says (403 insufficient_scope, naming the
// service's scopes), opts.Refused hears why, and the handler is not reached.
func TestAServiceClientTokenWithoutTheServiceScopesIsRefused(t *testing.T) {
	t.Parallel()
	var refused []string
	check := func(scopes ...string) answer {
		v := fixedClaims{User: userOf("weather-client"), ClientID: "weather-client", Scopes: scopes}
		return serve(t, RequireBearer(v, BearerOptions{ResourceMetadataURL: metadataURL, Scopes: []string{"mcp"}, Services: clients{},
			Refused: func(_ *http.Request, why string) { refused = append(refused, why) }}), "Bearer t")
	}
	for _, scopes := range [][]string{nil, {"mcp"}, {"urlflow:delegated", "openid"}} {
		refused = nil
		got := check(scopes...)
		want := answer{status: http.StatusForbidden,
			challenge: `Bearer error="insufficient_scope", scope="urlflow:delegate", resource_metadata="` + metadataURL + `"`,
			error:     "the client credentials token of the service weather lacks the scopes urlflow:delegate"}
		if got != want {
			t.Errorf("scopes %q: got %+v\nwant %+v", scopes, got, want)
		}
		if len(refused) != 1 || !strings.Contains(refused[0], "weather") || !strings.Contains(refused[0], "urlflow:delegate") {
			t.Errorf("scopes %q: refused %q, want one reason naming weather and urlflow:delegate", scopes, refused)
		}
	}
	// The users' scopes are not asked of a service's token: its own are.
	if got := check("urlflow:delegate"); got.caller == nil || got.caller.Service != "weather" {
		t.Errorf("a token with the service's scope: %+v, want the service weather", got)
	}
}

// ForSDK hands the SDK users only: an operator or a service that RequireBearer let through
// (where its options accept them) never reaches the MCP handler, and is refused for
// naming no user.
func TestForSDKHandsTheSDKUsersOnly(t *testing.T) {
	t.Parallel()
	for _, c := range []Caller{{Operator: true}, {Service: "weather"}} {
		reached := false
		h := ForSDK(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached = true }))
		req := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		req.Header.Set("Authorization", "Bearer t")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, withCaller(req, c))
		if reached || rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), "no user") {
			t.Errorf("%+v: reached %v, status %d %q, want 401 for naming no user", c, reached, rec.Code, rec.Body)
		}
	}
}
