package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v5"
)

// idp is a real OpenID provider (oidc-provider, e2e/idp) run for the tests. Its signing key
// is the test's, so that the test can also mint tokens that are bad on purpose.
type idp struct {
	Issuer string
	key    *rsa.PrivateKey
	cmd    *exec.Cmd
	log    *syncBuffer
}

const idpKeyID = "e2e-key"

// startIDP starts a provider with config (see e2e/idp/README.md) for one test; the signing
// key is added to it.
func startIDP(t *testing.T, config map[string]any) *idp {
	t.Helper()
	p, err := launchIDP(config)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.stop)
	return p
}

// issuer is the deployment's issuer that the tests of urlflow serve share, started by the
// first test that needs it. Each test registers its own clients and resource (register),
// so the tests stay apart: their users are the same two accounts, but every test has its
// own urlflow, Redis and browser contexts.
var issuer struct {
	once sync.Once
	p    *idp
	err  error
}

// sharedIssuer returns the package's issuer, starting it on first use.
func sharedIssuer(t *testing.T) *idp {
	t.Helper()
	issuer.once.Do(func() {
		issuer.p, issuer.err = launchIDP(map[string]any{
			"role": "issuer",
			"accounts": []map[string]any{
				{"id": "alice", "password": "alice-pw", "email": "alice@example.test", "name": "Alice"},
				{"id": "bob", "password": "bob-pw", "email": "bob@example.test", "name": "Bob"},
			},
			"consent": "auto",
			// Delegating services may authenticate with client credentials.
			"clientCredentials": true,
		})
	})
	if issuer.err != nil {
		t.Fatal(issuer.err)
	}
	return issuer.p
}

// stopSharedIssuer stops the package's issuer, if it was started.
func stopSharedIssuer() {
	if issuer.p != nil {
		issuer.p.stop()
	}
}

// launchIDP starts a provider with config; the caller stops it.
func launchIDP(config map[string]any) (*idp, error) {
	dir, err := filepath.Abs("idp")
	if err != nil {
		return nil, err
	}
	if _, err := npmPackage("idp", "oidc-provider"); err != nil {
		return nil, err
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	jwk, err := json.Marshal(jose.JSONWebKey{Key: key, KeyID: idpKeyID, Algorithm: "RS256", Use: "sig"})
	if err != nil {
		return nil, err
	}
	config["jwks"] = map[string]any{"keys": []json.RawMessage{jwk}}
	raw, _ := json.Marshal(config)
	p := &idp{key: key, log: &syncBuffer{}}
	p.cmd = exec.Command("node", filepath.Join(dir, "idp.mjs"), "--config-json", string(raw))
	p.cmd.Stderr = p.log
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the OpenID provider: %w", err)
	}
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
		return p, nil
	case <-time.After(60 * time.Second): // half a second alone; see selftest.mjs's start
		p.stop()
		return nil, fmt.Errorf("the OpenID provider did not start:\n%s", p.log.String())
	}
}

func (p *idp) stop() {
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.cmd.Wait()
}

// TestTheTestProviderBehavesAsItsREADMESays runs e2e/idp/selftest.mjs, which starts idp.mjs
// in each of its modes (with the same node and flags as launchIDP) and checks over HTTP what
// e2e/idp/README.md promises. The other tests take the provider's refusals as the truth: an
// expired, revoked or reused token refused, a replayed code or refresh token revoking the
// grant, each refresh counted once. A provider that accepted too much, after an upgrade of
// oidc-provider or a change to idp.mjs, would let them pass; this test would fail.
func TestTheTestProviderBehavesAsItsREADMESays(t *testing.T) {
	t.Parallel()
	if _, err := npmPackage("idp", "oidc-provider"); err != nil {
		t.Fatal(err)
	}
	script, err := filepath.Abs(filepath.Join("idp", "selftest.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	// 7 s alone, about 30 s beside the other tests, 40 s beside 16 busy loops; the bound only
	// turns a hang into a failure that shows the output.
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script)
	// A process group of its own, so that a timeout also ends the providers it started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node idp/selftest.mjs: %v\n%s", err, out)
	}
}

// register adds a client (what "/test/clients") or a resource ("/test/resources") to the
// running provider.
func (p *idp) register(t *testing.T, what string, metadata map[string]any) {
	t.Helper()
	body, _ := json.Marshal(metadata)
	resp, err := http.Post(p.Issuer+what, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		answer, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST %s: %d %s", what, resp.StatusCode, answer)
	}
}

// mint signs claims with the provider's key (or with key, when not nil).
func (p *idp) mint(t *testing.T, claims jwt.MapClaims, key *rsa.PrivateKey) string {
	t.Helper()
	if key == nil {
		key = p.key
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
	tok.Header["kid"] = idpKeyID
	tok.Header["typ"] = "at+jwt"
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// codeCatcher is a public client of the provider whose loopback redirect URI hands over the
// authorization codes it gets.
type codeCatcher struct {
	ClientID string
	URL      string
	codes    chan url.Values
}

func newCodeCatcher(t *testing.T) *codeCatcher {
	c := &codeCatcher{ClientID: "e2e-cli-" + rand.Text()[:8], codes: make(chan url.Values, 4)}
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

// accessToken gets a real access token for resource by the authorization code flow with
// PKCE, with person signing in at the provider as account in Chromium.
func (p *idp) accessToken(t *testing.T, c *codeCatcher, person *person, account, password, resource string) string {
	t.Helper()
	verifier := rand.Text() + rand.Text()
	sum := sha256.Sum256([]byte(verifier))
	q := url.Values{
		"client_id": {c.ClientID}, "response_type": {"code"}, "redirect_uri": {c.URL},
		"scope": {"mcp"}, "resource": {resource}, "state": {"s1"},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"},
	}
	person.Navigate(t, p.Issuer+"/auth?"+q.Encode())
	p.login(t, person, account, password)
	var got url.Values
	select {
	case got = <-c.codes:
	case <-time.After(60 * time.Second): // half a second alone; see selftest.mjs's start
		t.Fatalf("no authorization code:\n%s", person.Text(t, "body"))
	}
	if got.Get("iss") != p.Issuer || got.Get("code") == "" {
		t.Fatalf("authorization response: %v", got)
	}
	resp, err := http.PostForm(p.Issuer+"/token", url.Values{
		"grant_type": {"authorization_code"}, "code": {got.Get("code")}, "redirect_uri": {c.URL},
		"client_id": {c.ClientID}, "code_verifier": {verifier}, "resource": {resource},
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

// metadata is the provider configuration of the public client accessToken uses.
func (c *codeCatcher) metadata() map[string]any {
	return map[string]any{"client_id": c.ClientID, "redirect_uris": []string{c.URL},
		"token_endpoint_auth_method": "none", "grant_types": []string{"authorization_code"}}
}
