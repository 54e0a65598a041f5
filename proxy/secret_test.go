package proxy

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/urlflow/urlflow/demoapi"
	"github.com/urlflow/urlflow/slots"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/audit"
	"github.com/urlflow/urlflow/state/credentials"
	"github.com/urlflow/urlflow/state/vault"
	"github.com/urlflow/urlflow/upstream"
)

// demoKey is a valid, strong demo key that fits in a path segment, so that a path can carry it.
const demoKey = "demo_Q7mZp9Lw2Rv8Kd4Xn6Hs3J"

// Who uses a secret: urlflow's own call_api, and a delegating service's proxy request.
var (
	ownUse     = Use{Name: "demo_api_key", Actor: state.ActorClient, Via: "a call_api request"}
	serviceUse = Use{Name: credentials.Name("svc", "demo_api_key"), Actor: state.ActorService, Via: "a proxy request of the service svc"}
)

// service returns the delegating service of u's credential, "" for urlflow's own.
func service(u Use) string {
	if s, _ := credentials.SplitName(u.Name); s != credentials.OwnService {
		return s
	}
	return ""
}

func TestTheStoredSecretIsInjectedAsTheSlotSaysAndRedactedFromTheAnswer(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	// A secret that URL escaping and base64 change, so that each form of it differs.
	const secret = "s3cr3t/tok+en=x&y-Q7mZp9Lw2Rv8"
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	header := func(name string) func(received) string {
		return func(r received) string { return r.Header.Get(name) }
	}
	basic := func(r received) string {
		user, pass, ok := (&http.Request{Header: r.Header}).BasicAuth()
		if !ok {
			return ""
		}
		return user + ":" + pass
	}
	query := func(r received) string {
		q, _ := url.ParseQuery(r.RawQuery)
		return q.Get("api_key")
	}
	tests := []struct {
		name   string
		inject upstream.Injection
		got    func(received) string // where the API finds the secret
		want   string
	}{
		{"a header with a template", upstream.Injection{Header: "Authorization", Template: "Bearer {secret}"}, header("Authorization"), "Bearer " + secret},
		{"a header as it is", upstream.Injection{Header: "X-Api-Key"}, header("X-Api-Key"), secret},
		{"a query parameter", upstream.Injection{Query: "api_key"}, query, secret},
		{"basic authentication's password", upstream.Injection{Basic: &upstream.BasicAuth{Username: "user", Password: "{secret}"}}, basic, "user:" + secret},
		{"basic authentication's username", upstream.Injection{Basic: &upstream.BasicAuth{Username: "{secret}"}}, basic, secret + ":"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := newAPIServer(t, echo)
			slot := newSlot(t, upstream.API{BaseURL: api.URL + "/v1", Inject: tt.inject,
				ResponseHeaders: []string{"Content-Type", "X-Echo"}})
			user := userNamed(tt.name)
			cred := f.enterSecret(t, user, "", "demo_api_key", secret, false)
			u := ownUse
			u.User = user

			resp, weak, err := f.proxy.Secret(t.Context(), u, slot, cred,
				upstream.Request{Method: "GET", Path: "/items", Query: url.Values{"page": {"2"}}})
			if err != nil {
				t.Fatalf("Secret: %v", err)
			}
			got := api.received()
			if len(got) != 1 {
				t.Fatalf("the API received %d requests, want 1", len(got))
			}
			if r := got[0]; r.Method != "GET" || r.Path != "/v1/items" || !strings.Contains(r.RawQuery, "page=2") || tt.got(r) != tt.want {
				t.Errorf("the API received %s %s?%s with the secret as %q, want %q", r.Method, r.Path, r.RawQuery, tt.got(r), tt.want)
			}
			if resp.Status != http.StatusOK || weak {
				t.Errorf("status %d, weak %v; want 200, not weak", resp.Status, weak)
			}
			answer := resp.Body + " " + resp.Headers["X-Echo"]
			if !strings.Contains(resp.Body, upstream.Redacted) || !strings.Contains(resp.Body, "GET /v1/items") || !strings.Contains(resp.Body, "page=2") {
				t.Errorf("the answer is not the API's, redacted: %q", resp.Body)
			}
			f.wantNotShown(t, "the answer", answer, secret, url.QueryEscape(secret), url.PathEscape(secret), b64(secret), b64(tt.want))
		})
	}
}

func TestTheDemoAPIAnswersForTheStoredKeyAndNeverShowsIt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	demo := newDemoSlot(t)
	api, slot := demo.api, demo.slot
	user := userNamed("ada")
	cred := f.enterSecret(t, user, "", "demo_api_key", demoKey, false)
	u := ownUse
	u.User = user

	resp, _, err := f.proxy.Secret(t.Context(), u, slot, cred, upstream.Request{Method: "GET", Path: "/whoami"})
	if err != nil || resp.Status != http.StatusOK || !strings.Contains(resp.Body, demoapi.Account(demoKey)) {
		t.Fatalf("GET /whoami = %+v, %v; want 200 naming the account %s", resp, err, demoapi.Account(demoKey))
	}
	resp, _, err = f.proxy.Secret(t.Context(), u, slot, cred, upstream.Request{Method: "POST", Path: "/echo", Body: `{"hello":"world"}`})
	if err != nil || resp.Status != http.StatusOK {
		t.Fatalf("POST /echo = %+v, %v", resp, err)
	}
	// The demo API echoes the Authorization header it received: the answer has it redacted,
	// the whole injected value.
	if !strings.Contains(resp.Body, `"Authorization":"`+upstream.Redacted+`"`) || !strings.Contains(resp.Body, `"body":"{\"hello\":\"world\"}"`) {
		t.Errorf("the echo is not the request with the key redacted: %s", resp.Body)
	}
	f.wantNotShown(t, "the answer", resp.Body, demoKey)
	if got := api.received(); len(got) != 2 || got[1].Header.Get("Authorization") != "Bearer "+demoKey || got[1].Body != `{"hello":"world"}` ||
		got[1].Header.Get("Content-Type") != "application/json" {
		t.Errorf("the API received %+v", got)
	}
}

func TestEveryUseIsRecordedAsTheCredentialsLastUse(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	api := newAPIServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/refused":
			http.Error(w, "no", http.StatusUnauthorized)
		case "/v1/broken":
			http.Error(w, "oops", http.StatusInternalServerError)
		default:
			w.Write([]byte("ok"))
		}
	}))
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	inject := upstream.Injection{Header: "Authorization", Template: "Bearer {secret}"}
	tests := []struct {
		name    string
		baseURL string
		path    string
		status  int   // of the answer
		err     error // instead of an answer
	}{
		{"an answer", api.URL + "/v1", "/ok", http.StatusOK, nil},
		{"a refusal by the API", api.URL + "/v1", "/refused", http.StatusUnauthorized, nil},
		{"a failure of the API", api.URL + "/v1", "/broken", http.StatusInternalServerError, nil},
		{"an API that cannot be reached", gone.URL, "/ok", 0, upstream.ErrUnreachable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			slot := newSlot(t, upstream.API{BaseURL: tt.baseURL, Inject: inject})
			for _, u := range []Use{ownUse, serviceUse} {
				u.User = userNamed(tt.name)
				cred := f.enterSecret(t, u.User, service(u), "demo_api_key", demoKey, false)
				for range 2 {
					f.clock.Advance(time.Minute)
					resp, _, err := f.proxy.Secret(t.Context(), u, slot, cred, upstream.Request{Method: "GET", Path: tt.path})
					last := f.lastUse(t, u.User, u.Name)
					if tt.err != nil {
						if !errors.Is(err, tt.err) || resp != nil {
							t.Fatalf("%s: Secret = %+v, %v; want %v", u.Name, resp, err, tt.err)
						}
						if last != nil {
							t.Errorf("%s: a call that reached no API is recorded as a use at %v", u.Name, last)
						}
						continue
					}
					if err != nil || resp.Status != tt.status {
						t.Fatalf("%s: Secret = %+v, %v; want status %d", u.Name, resp, err, tt.status)
					}
					if last == nil || !last.Equal(f.clock.Now()) {
						t.Errorf("%s: last use %v, want %v", u.Name, last, f.clock.Now())
					}
				}
				// A use is recorded on the credential, not in the audit trail, and locks nothing.
				if c := f.credential(t, u.User, u.Name); c.Locked() {
					t.Errorf("%s: locked by a plain use: %+v", u.Name, c)
				}
				if events := f.audited(t, u.User, u.Name); len(events) != 0 {
					t.Errorf("%s: audited %q", u.Name, events)
				}
			}
		})
	}
	if n := f.count(t, carriedCounter, state.KindSecret); n != 0 {
		t.Errorf("%d requests counted as carrying the secret, want none", n)
	}
}

func TestAWeakStoredSecretIsUsedAndReportedWeak(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	api := newAPIServer(t, echo)
	slot := newSlot(t, upstream.API{BaseURL: api.URL, Inject: upstream.Injection{Header: "X-Api-Key"}})
	tests := []struct {
		name, secret string
		weak         bool
	}{
		{"a strong secret", demoKey, false},
		{"a long secret of few characters", "demo_aaaaaaaaaaaaaaaa", true},
		{"a short secret", "k3Y!x9", true},
	}
	for _, tt := range tests {
		u := ownUse
		u.User = userNamed(tt.name)
		cred := f.enterSecret(t, u.User, "", "demo_api_key", tt.secret, false)
		resp, weak, err := f.proxy.Secret(t.Context(), u, slot, cred, upstream.Request{Method: "GET", Path: "/"})
		if err != nil || resp.Status != http.StatusOK || weak != tt.weak {
			t.Errorf("%s: Secret = %+v, weak %v, %v; want an answer, weak %v", tt.name, resp, weak, err, tt.weak)
		}
	}
	if got := api.received(); len(got) != len(tests) {
		t.Errorf("the API received %d requests, want %d: a weak secret is still used", len(got), len(tests))
	}
}

// demoSlot is the slot demo_api_key on a real demo API (package demoapi), with the server
// that serves it.
type demoSlot struct {
	api  *apiServer
	slot *slots.Slot
}

// newDemoSlot serves the demo API on loopback and returns the slot that calls it, with its
// secret as a bearer token, by GET and POST.
func newDemoSlot(t *testing.T) *demoSlot {
	t.Helper()
	api := newAPIServer(t, demoapi.Handler())
	return &demoSlot{api: api, slot: newSlot(t, upstream.API{BaseURL: api.URL + demoapi.Prefix, Methods: []string{"GET", "POST"},
		Inject: upstream.Injection{Header: "Authorization", Template: "Bearer {secret}"}})}
}

func TestARequestCarryingTheSecretIsRefusedBeforeAnythingIsSent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := newDemoSlot(t)
	b64 := base64.StdEncoding.EncodeToString([]byte(demoKey))
	encoded := "%64%65%6D%6F" + strings.TrimPrefix(demoKey, "demo")
	tests := []struct {
		name  string
		req   upstream.Request
		where string // the part that carries it
	}{
		{"in the path", upstream.Request{Method: "GET", Path: "/users/" + demoKey}, "path"},
		{"percent-encoded in the path", upstream.Request{Method: "GET", Path: "/users/" + encoded}, "path"},
		{"as a query value", upstream.Request{Method: "GET", Path: "/x", Query: url.Values{"q": {demoKey}}}, "query"},
		{"inside a query value", upstream.Request{Method: "GET", Path: "/x", Query: url.Values{"q": {"is it " + demoKey + "?"}}}, "query"},
		{"percent-encoded in a query value", upstream.Request{Method: "GET", Path: "/x", Query: url.Values{"q": {encoded}}}, "query"},
		{"as a query name", upstream.Request{Method: "GET", Path: "/x", Query: url.Values{demoKey: {"1"}}}, "query"},
		{"in a text body", upstream.Request{Method: "POST", Path: "/x", Body: "my key is " + demoKey}, "body"},
		{"as the header it goes in, in the body", upstream.Request{Method: "POST", Path: "/x", Body: "Authorization: Bearer " + demoKey}, "body"},
		{"in a form body", upstream.Request{Method: "POST", Path: "/x", Body: "a=1&key=" + encoded}, "body"},
		{"JSON-escaped in a body", upstream.Request{Method: "POST", Path: "/x", Body: `{"key":"\u0064emo` + strings.TrimPrefix(demoKey, "demo") + `"}`}, "body"},
		{"base64 in a body", upstream.Request{Method: "POST", Path: "/x", Body: `{"key":"` + b64 + `"}`}, "body"},
	}
	refused := 0
	for _, tt := range tests {
		for _, u := range []Use{ownUse, serviceUse} {
			t.Run(tt.name+" of "+u.Via, func(t *testing.T) {
				u.User = userNamed(t.Name())
				cred := f.enterSecret(t, u.User, service(u), "demo_api_key", demoKey, false)
				f.clock.Advance(time.Second)

				resp, weak, err := f.proxy.Secret(t.Context(), u, s.slot, cred, tt.req)
				refused++
				var carried *CarriedError
				if !errors.As(err, &carried) || resp != nil || weak {
					t.Fatalf("Secret = %+v, %v, %v; want a *CarriedError", resp, weak, err)
				}
				if *carried != (CarriedError{Where: tt.where, Kind: state.KindSecret, Locked: true}) {
					t.Errorf("refusal %+v, want the %s, a secret, locked", *carried, tt.where)
				}
				if want := "the request carries the credential in its " + tt.where + "; nothing was sent"; err.Error() != want {
					t.Errorf("error %q, want %q", err, want)
				}
				f.wantNotShown(t, "the error", err.Error(), demoKey)

				reason := u.Via + " carried it in its " + tt.where
				c := f.credential(t, u.User, u.Name)
				if !c.Locked() || !c.LockedAt.Equal(f.clock.Now()) || c.LockReason != reason {
					t.Errorf("stored: locked at %v for %q; want locked at %v for %q", c.LockedAt, c.LockReason, f.clock.Now(), reason)
				}
				if got, want := f.audited(t, u.User, u.Name), []string{audit.CredentialLocked + " " + string(u.Actor) + " " + reason}; !slices.Equal(got, want) {
					t.Errorf("audited %q, want %q", got, want)
				}
				if last := f.lastUse(t, u.User, u.Name); last != nil {
					t.Errorf("a refused request is recorded as a use at %v", last)
				}
			})
		}
	}
	s.api.wantNothing(t)
	if n := f.count(t, carriedCounter, state.KindSecret); n != int64(refused) {
		t.Errorf("%s{kind=secret} = %d, want %d", carriedCounter, n, refused)
	}
	if n := f.count(t, carriedCounter, state.KindOAuth); n != 0 {
		t.Errorf("%s{kind=oauth} = %d, want 0", carriedCounter, n)
	}
}

func TestALockedSecretRefusesEveryCallUntilItsUserEntersItAgain(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := newDemoSlot(t)
	u := ownUse
	u.User = userNamed("ada")
	cred := f.enterSecret(t, u.User, "", "demo_api_key", demoKey, false)
	_, _, err := f.proxy.Secret(t.Context(), u, s.slot, cred, upstream.Request{Method: "POST", Path: "/echo", Body: demoKey})
	if carried := (*CarriedError)(nil); !errors.As(err, &carried) || !carried.Locked {
		t.Fatalf("the carrying request: %v; want it refused and the secret locked", err)
	}
	reason := "a call_api request carried it in its body"

	// Every later call reads the credential locked, and nothing of it goes out, whatever
	// the request.
	for _, req := range []upstream.Request{
		{Method: "GET", Path: "/whoami"},
		{Method: "POST", Path: "/echo", Body: demoKey},
	} {
		locked := f.credential(t, u.User, u.Name)
		resp, _, err := f.proxy.Secret(t.Context(), u, s.slot, locked, req)
		var lockedErr *LockedError
		if !errors.As(err, &lockedErr) || resp != nil || lockedErr.Reason != reason {
			t.Fatalf("%s %s with the secret locked: %+v, %v; want a *LockedError for %q", req.Method, req.Path, resp, err, reason)
		}
		if want := "the secret is locked: " + reason; err.Error() != want {
			t.Errorf("error %q, want %q", err, want)
		}
	}
	s.api.wantNothing(t)
	if n := f.count(t, carriedCounter, state.KindSecret); n != 1 {
		t.Errorf("%s = %d, want 1: a locked secret's refusals are not counted as carrying it", carriedCounter, n)
	}
	if last := f.lastUse(t, u.User, u.Name); last != nil {
		t.Errorf("recorded as used at %v while locked", last)
	}

	// The user enters it again (a new elicitation that replaces it): it works again.
	f.clock.Advance(time.Minute)
	again := f.enterSecret(t, u.User, "", "demo_api_key", demoKey, true)
	if again.Locked() || again.LockReason != "" {
		t.Fatalf("entered again, it is still locked: %+v", again)
	}
	resp, _, err := f.proxy.Secret(t.Context(), u, s.slot, again, upstream.Request{Method: "GET", Path: "/whoami"})
	if err != nil || resp.Status != http.StatusOK {
		t.Fatalf("after entering it again: %+v, %v", resp, err)
	}
	if got := s.api.received(); len(got) != 1 || got[0].Header.Get("Authorization") != "Bearer "+demoKey {
		t.Errorf("the API received %+v, want one request with the key", got)
	}
	if last := f.lastUse(t, u.User, u.Name); last == nil || !last.Equal(f.clock.Now()) {
		t.Errorf("last use %v, want %v", last, f.clock.Now())
	}
	if got := f.audited(t, u.User, u.Name); len(got) != 1 {
		t.Errorf("audited %q, want the one lock", got)
	}
}

func TestASecondCarryingRequestKeepsTheFirstLock(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := newDemoSlot(t)
	u := serviceUse
	u.User = userNamed("ada")
	// Both requests come with the credential as it was read before either was refused.
	cred := f.enterSecret(t, u.User, "svc", "demo_api_key", demoKey, false)
	first := f.clock.Now()
	for i, req := range []upstream.Request{
		{Method: "GET", Path: "/x", Query: url.Values{"key": {demoKey}}},
		{Method: "POST", Path: "/x", Body: demoKey},
	} {
		_, _, err := f.proxy.Secret(t.Context(), u, s.slot, cred, req)
		if carried := (*CarriedError)(nil); !errors.As(err, &carried) || !carried.Locked {
			t.Fatalf("request %d: %v; want it refused, the secret locked", i+1, err)
		}
		f.clock.Advance(time.Minute)
	}
	reason := "a proxy request of the service svc carried it in its query"
	if c := f.credential(t, u.User, u.Name); !c.Locked() || !c.LockedAt.Equal(first) || c.LockReason != reason {
		t.Errorf("stored: locked at %v for %q; want the first lock, at %v for %q", c.LockedAt, c.LockReason, first, reason)
	}
	if got := f.audited(t, u.User, u.Name); !slices.Equal(got, []string{audit.CredentialLocked + " service " + reason}) {
		t.Errorf("audited %q, want the first lock only", got)
	}
	if n := f.count(t, carriedCounter, state.KindSecret); n != 2 {
		t.Errorf("%s = %d, want both refusals", carriedCounter, n)
	}
	s.api.wantNothing(t)
}

func TestASecretThatDoesNotOpenIsRefusedUnsentAndNotLocked(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	oldRing := vault.GenerateKeyRing("k0")
	old := mustVault(t, oldRing)
	rotated := mustVault(t, vault.GenerateKeyRing("k2")+","+oldRing) // k0 retired from sealing, still in the ring
	other := userNamed("someone else")
	tests := []struct {
		name  string
		seal  func(user state.User, name string) vault.Sealed
		vault *vault.Vault // the proxy's; f's if nil
		opens bool
	}{
		{"sealed under a key no longer in the ring", func(u state.User, n string) vault.Sealed { return seal(t, old, u, n) }, nil, false},
		{"sealed for another user", func(u state.User, n string) vault.Sealed { return seal(t, f.vault, other, n) }, nil, false},
		{"sealed for another name", func(u state.User, n string) vault.Sealed { return seal(t, f.vault, u, "other_slot") }, nil, false},
		{"changed after sealing", func(u state.User, n string) vault.Sealed {
			s := seal(t, f.vault, u, n)
			s.Ciphertext[len(s.Ciphertext)-1] ^= 1
			return s
		}, nil, false},
		{"sealed under an older key still in the ring", func(u state.User, n string) vault.Sealed { return seal(t, old, u, n) }, rotated, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newDemoSlot(t)
			u := ownUse
			u.User = userNamed(tt.name)
			cred := f.complete(t, u.User, state.KindSecret, "", "demo_api_key", false, func(name, id string) *credentials.Credential {
				return &credentials.Credential{Name: name, Kind: state.KindSecret, ElicitationID: id, StoredAt: f.clock.Now(), Sealed: tt.seal(u.User, name)}
			})
			p := f.proxy
			if tt.vault != nil {
				p = f.withVault(tt.vault)
			}
			// A request that carries the key too: a value that does not open cannot be checked
			// against it, and is not locked for it.
			resp, _, err := p.Secret(t.Context(), u, s.slot, cred, upstream.Request{Method: "POST", Path: "/echo", Body: demoKey})
			if tt.opens {
				if carried := (*CarriedError)(nil); !errors.As(err, &carried) {
					t.Fatalf("Secret = %+v, %v; want the value opened, and the request refused for carrying it", resp, err)
				}
				return
			}
			if !errors.Is(err, ErrUnopenable) || !errors.Is(err, vault.ErrUnopenable) || resp != nil {
				t.Fatalf("Secret = %+v, %v; want ErrUnopenable", resp, err)
			}
			f.wantNotShown(t, "the error", err.Error(), demoKey)
			s.api.wantNothing(t)
			if c := f.credential(t, u.User, u.Name); c.Locked() {
				t.Errorf("locked: %+v", c)
			}
			if last := f.lastUse(t, u.User, u.Name); last != nil {
				t.Errorf("recorded as used at %v", last)
			}
			if !strings.Contains(f.logs.String(), "stored credential does not open") {
				t.Errorf("not logged:\n%s", f.logs)
			}
		})
	}
	if n := f.count(t, carriedCounter, state.KindSecret); n != 1 {
		t.Errorf("%s = %d, want 1 (the value that opened): a value that does not open is not counted", carriedCounter, n)
	}
}

func mustVault(t *testing.T, ring string) *vault.Vault {
	t.Helper()
	r, err := vault.ParseKeyRing(ring)
	if err != nil {
		t.Fatal(err)
	}
	return vault.NewVault(r)
}

func seal(t *testing.T, v *vault.Vault, user state.User, name string) vault.Sealed {
	t.Helper()
	s, err := v.Seal(user, name, state.NewSecret(demoKey))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestWhileTheStoreIsDown(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := newDemoSlot(t)
	u := ownUse
	u.User = userNamed("ada")
	cred := f.enterSecret(t, u.User, "", "demo_api_key", demoKey, false)
	f.redis.Stop()

	t.Run("a carrying request is refused and says that the secret is not locked", func(t *testing.T) {
		resp, _, err := f.proxy.Secret(t.Context(), u, s.slot, cred, upstream.Request{Method: "POST", Path: "/echo", Body: demoKey})
		var carried *CarriedError
		if !errors.As(err, &carried) || resp != nil || *carried != (CarriedError{Where: "body", Kind: state.KindSecret, Locked: false}) {
			t.Fatalf("Secret = %+v, %v; want a refusal of the body, not locked", resp, err)
		}
		s.api.wantNothing(t)
		if !strings.Contains(f.logs.String(), "credential not locked") {
			t.Errorf("the failed lock is not logged:\n%s", f.logs)
		}
	})
	t.Run("a clean call is answered though its use cannot be recorded", func(t *testing.T) {
		resp, _, err := f.proxy.Secret(t.Context(), u, s.slot, cred, upstream.Request{Method: "GET", Path: "/whoami"})
		if err != nil || resp.Status != http.StatusOK {
			t.Fatalf("Secret = %+v, %v; want the answer", resp, err)
		}
		if !strings.Contains(f.logs.String(), "credential use not recorded") {
			t.Errorf("the unrecorded use is not logged:\n%s", f.logs)
		}
	})

	f.redis.Restart(t)
	if c := f.credential(t, u.User, u.Name); c.Locked() {
		t.Errorf("locked, though the lock reported failure: %+v", c)
	}
	if last := f.lastUse(t, u.User, u.Name); last != nil {
		t.Errorf("recorded as used at %v, though recording reported failure", last)
	}
	if n := f.count(t, carriedCounter, state.KindSecret); n != 1 {
		t.Errorf("%s = %d, want 1: the refusal is counted once the store is back", carriedCounter, n)
	}
	f.wantNotShown(t, "nothing", "", demoKey)
}

// The secret is locked because of what the request shows, whatever became of its caller:
// a caller that goes away at once must not keep the secret unlocked. FAILS with proxy.go as
// it is: the lock is written with the caller's context, and a cancelled one writes nothing.
func TestACarryingRequestLocksTheSecretEvenIfItsCallerHasGoneAway(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := newDemoSlot(t)
	u := ownUse
	u.User = userNamed("ada")
	cred := f.enterSecret(t, u.User, "", "demo_api_key", demoKey, false)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()

	_, _, err := f.proxy.Secret(ctx, u, s.slot, cred, upstream.Request{Method: "POST", Path: "/echo", Body: demoKey})
	var carried *CarriedError
	if !errors.As(err, &carried) {
		t.Fatalf("Secret = %v; want a *CarriedError", err)
	}
	s.api.wantNothing(t)
	if c := f.credential(t, u.User, u.Name); !c.Locked() || !carried.Locked {
		t.Errorf("refusal %+v, stored locked at %v: want the secret locked", *carried, c.LockedAt)
	}
}

// CarriedError.Locked "reports whether the secret is now locked". When the secret was
// stored again (or deleted) after the caller read it, Lock locks nothing, and the refusal
// must not say that it did: call_api would tell the client that the next call asks the
// user again, and the API that the user must enter it again. FAILS with proxy.go as it is,
// which takes Lock's (false, nil) for "locked already".
func TestACarryingRequestDoesNotClaimALockThatDidNotHappen(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := newDemoSlot(t)
	tests := []struct {
		name      string
		meanwhile func(t *testing.T, u Use)
	}{
		{"the user entered a new secret meanwhile", func(t *testing.T, u Use) {
			f.enterSecret(t, u.User, "", "demo_api_key", "demo_Nw9Kd2Rv7Lp4Xq8Zm3Hs6T", true)
		}},
		{"the user deleted the secret meanwhile", func(t *testing.T, u Use) {
			if ok, err := f.creds.Delete(t.Context(), u.User, u.Name, state.ActorUser, "disconnect"); !ok || err != nil {
				t.Fatalf("delete: %v, %v", ok, err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := ownUse
			u.User = userNamed(tt.name)
			cred := f.enterSecret(t, u.User, "", "demo_api_key", demoKey, false)
			tt.meanwhile(t, u)

			_, _, err := f.proxy.Secret(t.Context(), u, s.slot, cred, upstream.Request{Method: "POST", Path: "/echo", Body: demoKey})
			var carried *CarriedError
			if !errors.As(err, &carried) {
				t.Fatalf("Secret = %v; want a *CarriedError", err)
			}
			locked := false
			if c, err := f.creds.Get(t.Context(), u.User, u.Name); err == nil {
				locked = c.Locked()
			}
			if carried.Locked != locked {
				t.Errorf("the refusal says locked %v; the store holds locked %v", carried.Locked, locked)
			}
		})
	}
	s.api.wantNothing(t)
}
