package web

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/audit"
	"github.com/urlflow/urlflow/state/credentials"
	"github.com/urlflow/urlflow/state/flow"
	"github.com/urlflow/urlflow/web/api"
)

func TestWithoutReleaseNoEndpointGivesAServiceTheCredential(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	f.storeFor(t, weather, "alice", validKey)
	alice := f.userTokenFor(t, "alice", weather)

	var bodies []string
	call := func(method, path, body string) answer {
		got := f.asService(t, weather, method, path, alice, body)
		bodies = append(bodies, got.Body)
		return got
	}
	stored := call(http.MethodPost, "/api/v1/elicitations", createDemoKey)
	stored.want(t, http.StatusOK, `"stored"`)
	replace := created(t, call(http.MethodPost, "/api/v1/elicitations", `{"slot": "demo_api_key", "replace": true}`), http.StatusCreated)
	call(http.MethodGet, "/api/v1/elicitations/"+replace.ID, "").want(t, http.StatusOK)
	call(http.MethodPost, "/api/v1/proxy", `{"slot": "demo_api_key", "method": "POST", "path": "/echo", "body": "{}"}`).want(t, http.StatusOK)
	call(http.MethodPost, "/api/v1/release", `{"slot": "demo_api_key"}`).want(t, http.StatusForbidden, "may not receive credentials", "/api/v1/proxy")
	call(http.MethodPost, "/api/v1/elicitations/"+replace.ID+"/cancel", "").want(t, http.StatusOK)
	for _, b := range bodies {
		if strings.Contains(b, validKey) {
			t.Errorf("an answer to weather carries the secret: %s", b)
		}
	}
	if slices.ContainsFunc(f.audited(t, "alice"), func(e audit.Event) bool { return e.Event == audit.CredentialRelease }) {
		t.Error("a refused release is in the audit trail")
	}
}

func TestAServiceWithReleaseReceivesItsOwnSecretAndTheUserSeesIt(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	alice := f.userTokenFor(t, "alice", keyholder)
	release := `{"slot": "demo_api_key"}`
	f.asService(t, keyholder, http.MethodPost, "/api/v1/release", alice, release).want(t, http.StatusConflict, `"reason":"not_stored"`)

	f.storeFor(t, weather, "alice", validKey) // weather's is weather's alone
	f.asService(t, keyholder, http.MethodPost, "/api/v1/release", alice, release).want(t, http.StatusConflict, `"reason":"not_stored"`)
	f.storeFor(t, keyholder, "alice", validKey)

	got := f.asService(t, keyholder, http.MethodPost, "/api/v1/release", alice, release)
	var ans api.ReleaseAnswer
	got.decode(t, &ans)
	if got.Status != http.StatusOK || ans.Secret != validKey || ans.Kind != state.KindSecret || ans.Target != demoSlot || ans.AccessToken != "" {
		t.Fatalf("release answered %d %s, want keyholder's secret", got.Status, got.Body)
	}
	if cc := got.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control %q, want no-store", cc)
	}
	log := f.audited(t, "alice")
	last := log[len(log)-1]
	if last.Event != audit.CredentialRelease || last.Actor != state.ActorService || last.Credential != credentials.Name(keyholder, demoSlot) ||
		!strings.Contains(last.Reason, keyholder) {
		t.Errorf("the audit log ends with %+v, want the release to keyholder", last)
	}
	if strings.Contains(f.logs.String(), validKey) {
		t.Error("the log carries the secret")
	}
	if n := f.counter(t, `urlflow_credentials_released_total{kind="secret"}`); n != 1 {
		t.Errorf("counted %d releases", n)
	}

	// Another user's token, and a locked secret, get nothing.
	f.asService(t, keyholder, http.MethodPost, "/api/v1/release", f.userTokenFor(t, "bob", keyholder), release).want(t, http.StatusConflict, `"reason":"not_stored"`)
	f.asService(t, keyholder, http.MethodPost, "/api/v1/proxy", alice,
		`{"slot": "demo_api_key", "method": "GET", "path": "/whoami", "query": {"k": "`+validKey+`"}}`).want(t, http.StatusUnprocessableEntity, "carried")
	locked := f.asService(t, keyholder, http.MethodPost, "/api/v1/release", alice, release)
	locked.want(t, http.StatusConflict, `"reason":"locked"`)
	if strings.Contains(locked.Body, validKey) {
		t.Error("the refusal carries the secret")
	}
}

func TestAServiceWithReleaseReceivesAFreshAccessTokenNeverTheRefreshToken(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	f := newFixture(t, fixtureOptions{provider: p})
	alice := f.userTokenFor(t, "alice", keyholder)
	v := created(t, f.asService(t, keyholder, http.MethodPost, "/api/v1/elicitations", alice, `{"provider": "acme"}`), http.StatusCreated)
	b := f.browser(t, "alice")
	b.get(b.atProvider(b.startConnect(v.ID, b.open(v.ID)))).want(t, http.StatusOK, "connected")
	f.wantState(t, v.ID, flow.Complete)

	got := f.asService(t, keyholder, http.MethodPost, "/api/v1/release", alice, `{"provider": "acme"}`)
	var ans api.ReleaseAnswer
	got.decode(t, &ans)
	issued, _ := p.tokens()
	if got.Status != http.StatusOK || ans.Kind != state.KindOAuth || len(issued) != 1 || ans.AccessToken != issued[0] || ans.Secret != "" || ans.ExpiresAt.IsZero() {
		t.Fatalf("release answered %d %s, want Acme's access token (issued %v) with its expiry", got.Status, got.Body, issued)
	}
	if strings.Contains(strings.ToLower(got.Body), "refresh") {
		t.Errorf("the answer names a refresh token: %s", got.Body)
	}
	f.asService(t, weather, http.MethodPost, "/api/v1/release", f.userTokenFor(t, "alice", weather), `{"provider": "acme"}`).
		want(t, http.StatusForbidden, "may not receive credentials")
}

func TestTheConsentPageSaysWhetherTheServiceWillHoldTheCredential(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	for service, says := range map[string]string{
		weather:   "the service is never given it",
		keyholder: "it is allowed to receive it itself: from then on it holds it too",
	} {
		v := created(t, f.asService(t, service, http.MethodPost, "/api/v1/elicitations", f.userTokenFor(t, "alice", service), createDemoKey), http.StatusCreated)
		f.browser(t, "alice").open(v.ID).want(t, http.StatusOK, "Verified by urlflow", says)
	}
}

// A credential provided on pages that promised the service would never be given it is not
// released, even once the service may receive credentials.
func TestAReleaseKeepsThePromiseThePagesMade(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	// Asked for before keyholder had release: the flow was created without it.
	e := f.newFlow(t, "alice", func(n *flow.NewElicitation) { n.Service = keyholder })
	b := f.browser(t, "alice")
	b.open(e.ID).want(t, http.StatusOK, "the service is never given it")
	b.submit(e.ID, b.continueToForm(e.ID), validKey).want(t, http.StatusOK)
	f.wantState(t, e.ID, flow.Complete)

	alice := f.userTokenFor(t, "alice", keyholder)
	got := f.asService(t, keyholder, http.MethodPost, "/api/v1/release", alice, `{"slot": "demo_api_key"}`)
	got.want(t, http.StatusConflict, `"reason":"not_releasable"`)
	if strings.Contains(got.Body, validKey) {
		t.Error("the refusal carries the secret")
	}
	// Asked again with replace, on pages that say it will be given: released.
	v := created(t, f.asService(t, keyholder, http.MethodPost, "/api/v1/elicitations", alice, `{"slot": "demo_api_key", "replace": true}`), http.StatusCreated)
	b.open(v.ID).want(t, http.StatusOK, "allowed to receive it itself")
	b.submit(v.ID, b.continueToForm(v.ID), validKey).want(t, http.StatusOK)
	f.asService(t, keyholder, http.MethodPost, "/api/v1/release", alice, `{"slot": "demo_api_key"}`).want(t, http.StatusOK, validKey)
}
