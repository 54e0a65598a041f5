package e2e

import (
	"bufio"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v5"
)

// idp is a real OpenID provider (oidc-provider, e2e/idp) run for one test. Its signing
// key is the test's, so that the test can also mint tokens that are bad on purpose.
type idp struct {
	t      *testing.T
	Issuer string
	key    *rsa.PrivateKey
	cmd    *exec.Cmd
	log    *syncBuffer
}

const idpKeyID = "e2e-key"

// startIDP starts the provider with config (see e2e/idp/README.md); the signing key is
// added to it.
func startIDP(t *testing.T, config map[string]any) *idp {
	t.Helper()
	dir, err := filepath.Abs("idp")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules")); err != nil {
		t.Fatalf("e2e/idp has no node_modules: run `npm ci --prefix e2e/idp` (the README's test command does)")
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	jwk, err := json.Marshal(jose.JSONWebKey{Key: key, KeyID: idpKeyID, Algorithm: "RS256", Use: "sig"})
	if err != nil {
		t.Fatal(err)
	}
	config["jwks"] = map[string]any{"keys": []json.RawMessage{jwk}}
	raw, _ := json.Marshal(config)
	p := &idp{t: t, key: key, log: &syncBuffer{}}
	p.cmd = exec.Command("node", filepath.Join(dir, "idp.mjs"), "--config-json", string(raw))
	p.cmd.Stderr = p.log
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start the OpenID provider: %v", err)
	}
	t.Cleanup(func() {
		p.cmd.Process.Signal(syscall.SIGTERM)
		p.cmd.Wait()
	})
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var ev struct{ Event, Issuer string }
			if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Event == "ready" {
				ready <- ev.Issuer
			}
		}
	}()
	select {
	case p.Issuer = <-ready:
	case <-time.After(30 * time.Second):
		t.Fatalf("the OpenID provider did not start:\n%s", p.log.String())
	}
	return p
}

// mint signs claims with the provider's key (or with key, when not nil).
func (p *idp) mint(claims jwt.MapClaims, key *rsa.PrivateKey) string {
	p.t.Helper()
	if key == nil {
		key = p.key
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
	tok.Header["kid"] = idpKeyID
	tok.Header["typ"] = "at+jwt"
	s, err := tok.SignedString(key)
	if err != nil {
		p.t.Fatal(err)
	}
	return s
}

// codeCatcher is a loopback redirect URI that hands over the authorization codes it gets.
type codeCatcher struct {
	URL   string
	codes chan url.Values
}

func newCodeCatcher(t *testing.T) *codeCatcher {
	c := &codeCatcher{codes: make(chan url.Values, 4)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/callback" {
			http.NotFound(w, r) // the browser's favicon request
			return
		}
		c.codes <- r.URL.Query()
		io.WriteString(w, "received; you can close this tab")
	}))
	t.Cleanup(srv.Close)
	c.URL = srv.URL + "/callback"
	return c
}

// testClientID is a public client the tests register to get real access tokens.
const testClientID = "e2e-cli"

// accessToken gets a real access token for resource by the authorization code flow with
// PKCE, with person signing in at the provider as account in Chromium.
func (p *idp) accessToken(t *testing.T, c *codeCatcher, person *person, account, password, resource string) string {
	t.Helper()
	verifier := rand.Text() + rand.Text()
	sum := sha256.Sum256([]byte(verifier))
	q := url.Values{
		"client_id": {testClientID}, "response_type": {"code"}, "redirect_uri": {c.URL},
		"scope": {"mcp"}, "resource": {resource}, "state": {"s1"},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"},
	}
	person.Navigate(t, p.Issuer+"/auth?"+q.Encode())
	p.login(t, person, account, password)
	var got url.Values
	select {
	case got = <-c.codes:
	case <-time.After(30 * time.Second):
		t.Fatalf("no authorization code:\n%s", person.Text(t, "body"))
	}
	if got.Get("iss") != p.Issuer || got.Get("code") == "" {
		t.Fatalf("authorization response: %v", got)
	}
	resp, err := http.PostForm(p.Issuer+"/token", url.Values{
		"grant_type": {"authorization_code"}, "code": {got.Get("code")}, "redirect_uri": {c.URL},
		"client_id": {testClientID}, "code_verifier": {verifier}, "resource": {resource},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tok struct {
		AccessToken string `json:"access_token"`
		Error       string `json:"error"`
	}
	json.NewDecoder(resp.Body).Decode(&tok)
	if tok.AccessToken == "" {
		t.Fatalf("token endpoint: %d %s", resp.StatusCode, tok.Error)
	}
	return tok.AccessToken
}

// login signs person in at the provider's login page, if it shows, and approves consent,
// if asked.
func (p *idp) login(t *testing.T, person *person, account, password string) {
	t.Helper()
	if strings.Contains(person.HTML(t), `name="password"`) {
		person.Fill(t, `input[name="login"]`, account)
		person.Fill(t, `input[name="password"]`, password)
		person.Submit(t, `button#submit`)
	}
	if strings.Contains(person.HTML(t), `id="approve"`) {
		person.Submit(t, `button#approve`)
	}
}

// testClient is the provider configuration of the public client accessToken uses.
func testClient(c *codeCatcher) map[string]any {
	return map[string]any{"client_id": testClientID, "redirect_uris": []string{c.URL},
		"token_endpoint_auth_method": "none", "grant_types": []string{"authorization_code"}}
}
