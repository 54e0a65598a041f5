package web

import (
	"encoding/json"
	"fmt"
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

// The credentials API of services: the status of what a service holds for its user, read
// without a trace, and its deletion, one or all, audited as the service's. A service
// reaches only its own, for the user it proves.

const (
	statusPath    = "/api/v1/credentials/status"
	deletePath    = "/api/v1/credentials/delete"
	deleteAllPath = "/api/v1/credentials/delete-all"
)

// credentialStatus asks as service, with userToken, for the status body names, and
// decodes the answer, which must be 200 and never carry the demo key.
func (f *fixture) credentialStatus(t *testing.T, service, userToken, body string) api.CredentialStatus {
	t.Helper()
	got := f.asService(t, service, http.MethodPost, statusPath, userToken, body)
	var st api.CredentialStatus
	got.decode(t, &st)
	if got.Status != http.StatusOK || strings.Contains(got.Body, validKey) {
		t.Fatalf("status answered %d %s, want 200 without the value", got.Status, got.Body)
	}
	return st
}

// deletion sends a deletion as service and decodes its 200 answer.
func (f *fixture) deletion(t *testing.T, service, userToken, body string) api.Deletion {
	t.Helper()
	got := f.asService(t, service, http.MethodPost, deletePath, userToken, body)
	var d api.Deletion
	got.decode(t, &d)
	if got.Status != http.StatusOK {
		t.Fatalf("delete answered %d %s, want 200", got.Status, got.Body)
	}
	return d
}

// deletedAll sends a deletion of everything as service and decodes its 200 answer.
func (f *fixture) deletedAll(t *testing.T, service, userToken, body string) []api.Deletion {
	t.Helper()
	got := f.asService(t, service, http.MethodPost, deleteAllPath, userToken, body)
	var all api.DeletedAll
	got.decode(t, &all)
	if got.Status != http.StatusOK || all.Deleted == nil {
		t.Fatalf("delete-all answered %d %s, want 200 with a list", got.Status, got.Body)
	}
	return all.Deleted
}

// connectFor has user name connect Acme through a flow that service creates.
func (f *fixture) connectFor(t *testing.T, service, name string) {
	t.Helper()
	v := created(t, f.asService(t, service, http.MethodPost, "/api/v1/elicitations", f.userTokenFor(t, name, service), `{"provider": "acme"}`), http.StatusCreated)
	b := f.browser(t, name)
	b.get(b.atProvider(b.startConnect(v.ID, b.open(v.ID)))).want(t, http.StatusOK, "connected")
	f.wantState(t, v.ID, flow.Complete)
}

// storeOwn has user name store the demo key for urlflow's own tools.
func (f *fixture) storeOwn(t *testing.T, name string) {
	t.Helper()
	own := f.newFlow(t, name)
	b := f.browser(t, name)
	b.submit(own.ID, b.continueToForm(own.ID), validKey).want(t, http.StatusOK)
	f.wantState(t, own.ID, flow.Complete)
}

// retireKey makes owner's credential name sealed under a key that is not in the ring.
func (f *fixture) retireKey(t *testing.T, owner, name string) {
	t.Helper()
	rdb, key := f.redis.Client(t), credentials.Key(f.user(owner).Key(), name)
	var c credentials.Credential
	if err := state.DecodeJSON(rdb.Get(t.Context(), key), name, &c); err != nil {
		t.Fatal(err)
	}
	c.Sealed.KeyID = "retired"
	doc, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(t.Context(), key, doc, 0).Err(); err != nil {
		t.Fatal(err)
	}
}

func TestTheStatusOfASecretSaysHowItStandsAndLeavesNoTrace(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	alice := f.userTokenFor(t, "alice", weather)
	const demo = `{"slot": "demo_api_key"}`
	if st := f.credentialStatus(t, weather, alice, demo); st.Status != api.CredentialNotStored || st.Kind != state.KindSecret ||
		st.Target != demoSlot || st.StoredAt != nil {
		t.Errorf("before it is stored: %+v, want not_stored and nothing else", st)
	}
	f.storeFor(t, weather, "alice", validKey)
	f.storeFor(t, weather, "bob", validKey)
	f.retireKey(t, "bob", credentials.Name(weather, demoSlot))
	before := len(f.audited(t, "alice"))

	st := f.credentialStatus(t, weather, alice, demo)
	if st.Status != api.CredentialStored || st.StoredAt == nil || st.VerifiedAt == nil || st.LastUsedAt != nil || st.LockedAt != nil {
		t.Errorf("stored: %+v, want stored, verified, never used", st)
	}
	f.credentialStatus(t, weather, alice, demo)
	if used, err := f.creds.LastUsed(t.Context(), f.user("alice"), credentials.Name(weather, demoSlot)); err != nil || used != nil {
		t.Errorf("the status recorded a use (%v, %v)", used, err)
	}
	if after := len(f.audited(t, "alice")); after != before {
		t.Errorf("the status wrote %d audit events, want none", after-before)
	}
	proxied(t, f.asService(t, weather, http.MethodPost, "/api/v1/proxy", alice, `{"slot": "demo_api_key", "method": "GET", "path": "/whoami"}`))
	if st := f.credentialStatus(t, weather, alice, demo); st.LastUsedAt == nil {
		t.Errorf("after a proxy call: %+v, want lastUsedAt", st)
	}

	// Another service's, another user's: not stored for this one.
	if st := f.credentialStatus(t, calendar, f.userTokenFor(t, "alice", calendar), demo); st.Status != api.CredentialNotStored {
		t.Errorf("calendar sees weather's: %+v", st)
	}
	if st := f.credentialStatus(t, weather, f.userTokenFor(t, "carol", weather), demo); st.Status != api.CredentialNotStored {
		t.Errorf("carol's status: %+v, want not_stored", st)
	}
	if st := f.credentialStatus(t, weather, f.userTokenFor(t, "bob", weather), demo); st.Status != api.CredentialUnopenable || st.StoredAt == nil {
		t.Errorf("sealed under a retired key: %+v, want unopenable", st)
	}

	cred, _ := f.storedSecret(t, "alice", credentials.Name(weather, demoSlot))
	if _, err := f.creds.Lock(t.Context(), f.user("alice"), cred, state.ActorService, "a proxy request of the service weather carried it in its query"); err != nil {
		t.Fatal(err)
	}
	if st := f.credentialStatus(t, weather, alice, demo); st.Status != api.CredentialLocked || st.LockedAt == nil ||
		!strings.Contains(st.LockReason, "carried it in its query") {
		t.Errorf("locked: %+v, want locked with its reason", st)
	}
	f.asService(t, weather, http.MethodPost, statusPath, alice, `{"slot": "demo_api_key", "scopes": ["x"]}`).want(t, http.StatusBadRequest, "scopes")
}

func TestTheStatusOfAConnectionSaysItsAccountScopesAndWhatIsMissingWithoutRefreshing(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	f := newFixture(t, fixtureOptions{provider: p})
	alice := f.userTokenFor(t, "alice", weather)
	f.connectFor(t, weather, "alice")
	_, exchanges := p.tokens()

	st := f.credentialStatus(t, weather, alice, `{"provider": "acme"}`)
	if st.Status != api.CredentialStored || st.Kind != state.KindOAuth || st.Account != providerAccount ||
		!slices.Equal(st.Scopes, []string{"profile"}) || st.MissingScopes != nil {
		t.Errorf("connected: %+v, want stored with its account and scopes", st)
	}
	st = f.credentialStatus(t, weather, alice, `{"provider": "acme", "scopes": ["profile", "write", "write"]}`)
	if st.Status != api.CredentialMissingScopes || !slices.Equal(st.MissingScopes, []string{"write"}) {
		t.Errorf("short of a scope: %+v, want missing_scopes [write]", st)
	}

	cred, err := f.creds.Get(t.Context(), f.user("alice"), credentials.Name(weather, "acme"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.creds.Update(t.Context(), f.user("alice"), cred, func(c *credentials.Credential) { c.NeedsReconnect = true }); err != nil {
		t.Fatal(err)
	}
	if st := f.credentialStatus(t, weather, alice, `{"provider": "acme"}`); st.Status != api.CredentialReconnect {
		t.Errorf("no longer honoured: %+v, want reconnect", st)
	}
	if _, n := p.tokens(); n != exchanges {
		t.Errorf("the status called the token endpoint %d times, want never", n-exchanges)
	}
	f.asService(t, calendar, http.MethodPost, statusPath, f.userTokenFor(t, "alice", calendar), `{"provider": "acme"}`).
		want(t, http.StatusForbidden, "may not use")
}

// Every refusal of the credentials API answers as the other endpoints of services do, and
// reads and deletes nothing.
func TestARefusedCredentialsRequestDeletesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	f.storeFor(t, weather, "alice", validKey)
	alice := f.userTokenFor(t, "alice", weather)
	before := len(f.audited(t, "alice"))
	for _, path := range []string{statusPath, deletePath, deleteAllPath} {
		for _, tc := range []struct {
			name, service, userToken, body string
			status                         int
			says                           string
		}{
			{"no user token", weather, "", `{"slot": "demo_api_key"}`, http.StatusUnauthorized, api.UserTokenHeader},
			{"a token for urlflow", weather, f.token(t, "alice"), `{"slot": "demo_api_key"}`, http.StatusUnauthorized, "wrong audience"},
			{"a token for another service", weather, f.userTokenFor(t, "alice", calendar), `{"slot": "demo_api_key"}`, http.StatusUnauthorized, "wrong audience"},
			{"a user named, not trusted to name", weather, "", `{"slot": "demo_api_key", "user": "alice"}`, http.StatusForbidden, "may not name users"},
			{"a named user and a token", directory, f.userTokenFor(t, "alice", directory), `{"slot": "demo_api_key", "user": "alice"}`, http.StatusBadRequest, "not both"},
			{"an unknown field", weather, alice, `{"slot": "demo_api_key", "secret": "x"}`, http.StatusBadRequest, "unknown field"},
		} {
			t.Run(path+"/"+tc.name, func(t *testing.T) {
				body := tc.body
				if path == deleteAllPath { // it names no slot
					body = strings.Replace(body, `"slot": "demo_api_key"`, `"reason": "test"`, 1)
				}
				f.asService(t, tc.service, http.MethodPost, path, tc.userToken, body).want(t, tc.status, tc.says)
			})
		}
		f.api(t, http.MethodPost, path, f.token(t, "alice"), `{"slot": "demo_api_key"}`).want(t, http.StatusForbidden, "only a delegating service")
		f.send(t, nil, request{method: http.MethodPost, path: path, token: f.serviceKeys[weather], header: http.Header{api.UserTokenHeader: {alice}},
			body: strings.NewReader(`{}`)}).want(t, http.StatusUnsupportedMediaType, "application/json")
	}
	for _, path := range []string{statusPath, deletePath} {
		f.asService(t, weather, http.MethodPost, path, alice, `{"slot": "nope"}`).want(t, http.StatusForbidden, "may not use")
		f.asService(t, weather, http.MethodPost, path, alice, `{}`).want(t, http.StatusBadRequest, "one of")
	}
	f.asService(t, weather, http.MethodPost, deletePath, alice, `{"provider": "acme"}`).want(t, http.StatusForbidden, "may not use")
	if _, err := f.creds.Get(t.Context(), f.user("alice"), credentials.Name(weather, demoSlot)); err != nil {
		t.Errorf("weather's credential is gone: %v", err)
	}
	if after := len(f.audited(t, "alice")); after != before {
		t.Errorf("refusals wrote %d audit events", after-before)
	}
}

func TestAServiceDeletesItsOwnCredentialOnceAndTheTrailSaysSo(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	f.storeOwn(t, "alice")
	f.storeFor(t, weather, "alice", validKey)
	f.storeFor(t, calendar, "alice", validKey)
	alice := f.userTokenFor(t, "alice", weather)

	body := `{"slot": "demo_api_key", "reason": "the user\u202e asked\nus"}`
	// A service that holds nothing for alice deletes nothing, whoever else holds one.
	if d := f.deletion(t, keyholder, f.userTokenFor(t, "alice", keyholder), body); d.Deleted {
		t.Errorf("keyholder deleted something: %+v", d)
	}
	if d := f.deletion(t, weather, alice, body); !d.Deleted || d.Kind != state.KindSecret || d.Target != demoSlot || d.Revocation != "" {
		t.Errorf("deleted: %+v, want deleted, with nothing to revoke", d)
	}
	f.wantNoCredential(t, "alice", credentials.Name(weather, demoSlot))
	for _, name := range []string{demoSlot, credentials.Name(calendar, demoSlot)} {
		if _, err := f.creds.Get(t.Context(), f.user("alice"), name); err != nil {
			t.Errorf("%s went too: %v", name, err)
		}
	}
	log := f.audited(t, "alice")
	last := log[len(log)-1]
	if last.Event != audit.CredentialDeleted || last.Actor != state.ActorService || last.Credential != credentials.Name(weather, demoSlot) ||
		last.Reason != "deleted by the service weather: the user asked us" {
		t.Errorf("the audit trail ends with %+v, want weather's deletion with its reason, cleaned", last)
	}

	// Sent again, as after a lost answer: nothing was there, and that is no error.
	if d := f.deletion(t, weather, alice, body); d.Deleted {
		t.Errorf("deleted twice: %+v", d)
	}
	if n := len(f.audited(t, "alice")); n != len(log) {
		t.Errorf("deleting nothing wrote %d audit events", n-len(log))
	}
	// Another user's token deletes that user's, which is none.
	if d := f.deletion(t, calendar, f.userTokenFor(t, "bob", calendar), `{"slot": "demo_api_key"}`); d.Deleted {
		t.Errorf("calendar deleted something of bob's: %+v", d)
	}
	if _, err := f.creds.Get(t.Context(), f.user("alice"), credentials.Name(calendar, demoSlot)); err != nil {
		t.Errorf("calendar's credential of alice is gone: %v", err)
	}
}

func TestDeletingAConnectionRevokesItWhereTheProviderCan(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		revocable bool
		want      string
	}{
		{"with a revocation endpoint", true, api.RevocationRevoked},
		{"without one", false, api.RevocationUnsupported},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := newProvider(t)
			p.revocable = tc.revocable
			f := newFixture(t, fixtureOptions{provider: p})
			f.connectFor(t, weather, "alice")
			d := f.deletion(t, weather, f.userTokenFor(t, "alice", weather), `{"provider": "acme"}`)
			if !d.Deleted || d.Kind != state.KindOAuth || d.Target != "acme" || d.Revocation != tc.want {
				t.Errorf("deleted %+v, want deleted and revocation %s", d, tc.want)
			}
			revoked := p.revokedTokens()
			if tc.revocable != (len(revoked) == 1 && strings.HasPrefix(revoked[0], "acme-refresh-")) {
				t.Errorf("revoked %v at Acme (revocable: %v), want its refresh token where it can", revoked, tc.revocable)
			}
			f.wantNoCredential(t, "alice", credentials.Name(weather, "acme"))
			log := f.audited(t, "alice")
			if last := log[len(log)-1]; last.Event != audit.CredentialDeleted || last.Actor != state.ActorService || last.Reason != "deleted by the service weather" {
				t.Errorf("the audit trail ends with %+v", last)
			}
		})
	}
}

// A service that deletes its user's account deletes everything it holds for that user,
// and nothing that another service or urlflow's own tools hold, nor another user's.
func TestDeletingEverythingOfAUserLeavesWhatOthersHold(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	p.revocable = true
	f := newFixture(t, fixtureOptions{provider: p})
	f.storeOwn(t, "alice")
	f.storeFor(t, weather, "alice", validKey)
	f.connectFor(t, weather, "alice")
	f.storeFor(t, calendar, "alice", validKey)
	f.storeFor(t, weather, "bob", validKey)
	alice := f.userTokenFor(t, "alice", weather)
	before := len(f.audited(t, "alice"))

	got := f.deletedAll(t, weather, alice, `{"reason": "account closed"}`)
	want := []api.Deletion{
		{Kind: state.KindOAuth, Target: "acme", Deleted: true, Revocation: api.RevocationRevoked},
		{Kind: state.KindSecret, Target: demoSlot, Deleted: true},
	}
	if !slices.Equal(got, want) {
		t.Errorf("deleted %+v, want %+v", got, want)
	}
	if len(p.revokedTokens()) != 1 {
		t.Errorf("revoked %d tokens at Acme, want the connection's", len(p.revokedTokens()))
	}
	names, err := f.creds.Names(t.Context(), f.user("alice"))
	if err != nil || !slices.Equal(names, []string{credentials.Name(calendar, demoSlot), demoSlot}) {
		t.Errorf("alice keeps %v (%v), want calendar's and urlflow's own", names, err)
	}
	if _, err := f.creds.Get(t.Context(), f.user("bob"), credentials.Name(weather, demoSlot)); err != nil {
		t.Errorf("bob's credential went too: %v", err)
	}
	var deletions []string
	for _, e := range f.audited(t, "alice")[before:] {
		if e.Event != audit.CredentialDeleted || e.Actor != state.ActorService ||
			e.Reason != "deleted by the service weather with every credential of the user: account closed" {
			t.Errorf("audited %+v, want weather's deletions", e)
		}
		deletions = append(deletions, e.Credential)
	}
	if !slices.Equal(deletions, []string{credentials.Name(weather, "acme"), credentials.Name(weather, demoSlot)}) {
		t.Errorf("audited the deletion of %v, want one event per credential", deletions)
	}
	if again := f.deletedAll(t, weather, alice, `{}`); len(again) != 0 {
		t.Errorf("deleting everything again deleted %+v", again)
	}
}

func TestATrustedServiceManagesTheCredentialsOfTheUserItNames(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	f.storeFor(t, directory, "alice", validKey)
	f.storeFor(t, directory, "bob", validKey)
	if st := f.credentialStatus(t, directory, "", `{"slot": "demo_api_key", "user": "alice"}`); st.Status != api.CredentialStored {
		t.Errorf("status: %+v, want stored", st)
	}
	if d := f.deletion(t, directory, "", `{"slot": "demo_api_key", "user": "alice"}`); !d.Deleted {
		t.Errorf("delete: %+v, want deleted", d)
	}
	if all := f.deletedAll(t, directory, "", `{"user": "bob"}`); len(all) != 1 || all[0].Target != demoSlot {
		t.Errorf("delete-all: %+v, want bob's demo key", all)
	}
	for _, name := range []string{"alice", "bob"} {
		f.wantNoCredential(t, name, credentials.Name(directory, demoSlot))
	}
	f.asService(t, directory, http.MethodPost, deleteAllPath, "", `{"user": "not a name!"}`).want(t, http.StatusBadRequest, "user")
}

// Deleting everything of a user first cancels the service's elicitations for the user that
// still run, so that none stores a credential again afterwards; the user's flows for other
// services, and other users' flows for this one, run on.
func TestDeletingEverythingOfAUserCancelsTheServicesRunningFlowsFirst(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	start := func(service, user string) string {
		body := `{"slot": "demo_api_key"}`
		return created(t, f.asService(t, service, http.MethodPost, "/api/v1/elicitations", f.userTokenFor(t, user, service), body), http.StatusCreated).ID
	}
	mine, calendars, bobs := start(weather, "alice"), start(calendar, "alice"), start(weather, "bob")

	got := f.asService(t, weather, http.MethodPost, deleteAllPath, f.userTokenFor(t, "alice", weather), `{"reason": "account closed"}`)
	var all api.DeletedAll
	got.decode(t, &all)
	if got.Status != http.StatusOK || !slices.Equal(all.Cancelled, []string{mine}) || len(all.Deleted) != 0 {
		t.Fatalf("delete-all answered %d %s, want alice's weather flow cancelled", got.Status, got.Body)
	}
	f.wantState(t, mine, flow.Cancelled)
	if last := f.lastEntry(t, mine); last.Actor != state.ActorService {
		t.Errorf("the cancellation was recorded as %+v, want by the service", last)
	}
	for _, id := range []string{calendars, bobs} {
		if e := f.get(t, id); e.State.Terminal() {
			t.Errorf("flow %s of another service or user is %s, want it running", id, e.State)
		}
	}
}

// credentialList lists as service with query, and decodes the 200 answer.
func (f *fixture) credentialList(t *testing.T, service, query string) api.CredentialList {
	t.Helper()
	got := f.asService(t, service, http.MethodGet, "/api/v1/credentials"+query, "", "")
	var list api.CredentialList
	got.decode(t, &list)
	if got.Status != http.StatusOK || strings.Contains(got.Body, validKey) {
		t.Fatalf("list answered %d %s, want 200 without a value", got.Status, got.Body)
	}
	return list
}

func TestAServiceListsTheCredentialsItHoldsAcrossItsUsers(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	f.storeFor(t, weather, "alice", validKey)
	f.storeFor(t, weather, "bob", validKey)
	f.storeFor(t, calendar, "carol", validKey)
	f.storeOwn(t, "dave")
	alice, bob := f.userRefs.Of(weather, f.user("alice")), f.userRefs.Of(weather, f.user("bob"))

	first := f.credentialList(t, weather, "?limit=1")
	if len(first.Credentials) != 1 || first.Next == "" || first.Credentials[0].UserRef != alice ||
		first.Credentials[0].Target != demoSlot || first.Credentials[0].Status != api.CredentialStored || first.Credentials[0].StoredAt == nil {
		t.Fatalf("first page: %+v", first)
	}
	second := f.credentialList(t, weather, "?limit=1&cursor="+first.Next)
	if len(second.Credentials) != 1 || second.Credentials[0].UserRef != bob {
		t.Fatalf("second page: %+v", second)
	}
	if last := f.credentialList(t, weather, "?limit=1&cursor="+second.Next); len(last.Credentials) != 0 || last.Next != "" {
		t.Errorf("past the end: %+v", last)
	}

	// Locked: the status filter finds it; deleted: it leaves.
	f.asService(t, weather, http.MethodPost, "/api/v1/proxy", f.userTokenFor(t, "bob", weather),
		`{"slot": "demo_api_key", "method": "POST", "path": "/echo", "body": "`+validKey+`"}`).want(t, http.StatusUnprocessableEntity)
	if locked := f.credentialList(t, weather, "?status=locked"); len(locked.Credentials) != 1 || locked.Credentials[0].UserRef != bob ||
		locked.Credentials[0].LockReason == "" {
		t.Errorf("locked: %+v", locked)
	}
	if none := f.credentialList(t, weather, "?target=acme"); len(none.Credentials) != 0 {
		t.Errorf("target acme: %+v", none)
	}
	f.asService(t, weather, http.MethodPost, deletePath, f.userTokenFor(t, "alice", weather), `{"slot": "demo_api_key"}`).want(t, http.StatusOK)
	if rest := f.credentialList(t, weather, ""); len(rest.Credentials) != 1 || rest.Credentials[0].UserRef != bob {
		t.Errorf("after alice's deletion: %+v", rest)
	}

	// Each service its own; operators name one; users none; bad parameters change nothing.
	if cal := f.credentialList(t, calendar, ""); len(cal.Credentials) != 1 || cal.Credentials[0].UserRef != f.userRefs.Of(calendar, f.user("carol")) {
		t.Errorf("calendar's: %+v", cal)
	}
	f.api(t, http.MethodGet, "/api/v1/credentials?service="+weather, f.readOnlyToken, "").want(t, http.StatusOK, bob)
	f.api(t, http.MethodGet, "/api/v1/credentials", f.operatorToken, "").want(t, http.StatusBadRequest, "service")
	f.api(t, http.MethodGet, "/api/v1/credentials", f.token(t, "alice"), "").want(t, http.StatusForbidden)
	f.asService(t, weather, http.MethodGet, "/api/v1/credentials?service="+calendar, "", "").want(t, http.StatusForbidden)
	for query, want := range map[string]string{"?limit=0": "limit", "?status=weird": "status", "?cursor=nope": "cursor", "?user=x": "user"} {
		f.asService(t, weather, http.MethodGet, "/api/v1/credentials"+query, "", "").want(t, http.StatusBadRequest, want)
	}
}

// storeLabeled has user name complete a flow that service creates for the demo slot's
// account label, with secret, replacing what is stored when replace.
func (f *fixture) storeLabeled(t *testing.T, service, name, label, secret string, replace bool) string {
	t.Helper()
	body := fmt.Sprintf(`{"slot": "demo_api_key", "label": %q, "replace": %t}`, label, replace)
	v := created(t, f.asService(t, service, http.MethodPost, "/api/v1/elicitations", f.userTokenFor(t, name, service), body), http.StatusCreated)
	if v.Label != label {
		t.Fatalf("the flow's label is %q, want %q", v.Label, label)
	}
	b := f.browser(t, name)
	b.submit(v.ID, b.continueToForm(v.ID), secret).want(t, http.StatusOK)
	f.wantState(t, v.ID, flow.Complete)
	return v.ID
}

// A service holds several credentials of one target for one user, told apart by an
// account label; the unlabelled one, as every credential stored before labels, is the
// default account. Each is used, described, reconnected in place and deleted on its own.
func TestAServiceHoldsSeveralAccountsOfOneTargetForAUser(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	events := f.followEvents(t, weather, "")
	alice := f.userTokenFor(t, "alice", weather)
	f.storeFor(t, weather, "alice", validKey) // the default account
	if ev := events.nextCredentialEvent(); ev.Label != "" {
		t.Errorf("the default account's event has the label %q", ev.Label)
	}
	f.storeLabeled(t, weather, "alice", "work", otherKey, false)
	if ev := events.nextCredentialEvent(); ev.Type != "credential.stored" || ev.Label != "work" {
		t.Errorf("the work account's event: %+v", ev)
	}
	whoami := func(label string) string {
		t.Helper()
		resp := proxied(t, f.asService(t, weather, http.MethodPost, "/api/v1/proxy", alice,
			fmt.Sprintf(`{"slot": "demo_api_key", "label": %q, "method": "GET", "path": "/whoami"}`, label)))
		return resp.Body
	}
	if def, work := whoami(""), whoami("work"); def == work {
		t.Errorf("both accounts answer as one: %s", def)
	}
	if st := f.credentialStatus(t, weather, alice, `{"slot": "demo_api_key", "label": "work"}`); st.Status != api.CredentialStored || st.Label != "work" {
		t.Errorf("the work account's status: %+v", st)
	}
	if st := f.credentialStatus(t, weather, alice, `{"slot": "demo_api_key", "label": "home"}`); st.Status != api.CredentialNotStored {
		t.Errorf("an account never stored: %+v", st)
	}
	list := f.credentialList(t, weather, "")
	var labels []string
	for _, c := range list.Credentials {
		labels = append(labels, c.Label)
	}
	if slices.Sort(labels); !slices.Equal(labels, []string{"", "work"}) {
		t.Errorf("listed the labels %q, want the default and work", labels)
	}
	b := f.browser(t, "alice")
	b.signIn("/connections")
	b.get("/connections").want(t, http.StatusOK, "Demo API key (work)")

	// Reconnected in place: replace with the label replaces that account only.
	again := f.storeLabeled(t, weather, "alice", "work", validKey, true)
	if ev := events.nextCredentialEvent(); ev.Type != "credential.replaced" || ev.Label != "work" || ev.ElicitationID != again {
		t.Errorf("the reconnection's event: %+v", ev)
	}
	if def, work := whoami(""), whoami("work"); def != work {
		t.Errorf("the work account was not replaced with the default's key: %s and %s", def, work)
	}
	d := f.deletion(t, weather, alice, `{"slot": "demo_api_key", "label": "work"}`)
	if !d.Deleted || d.Label != "work" {
		t.Errorf("the deletion: %+v", d)
	}
	if ev := events.nextCredentialEvent(); ev.Type != "credential.deleted" || ev.Label != "work" {
		t.Errorf("the deletion's event: %+v", ev)
	}
	if st := f.credentialStatus(t, weather, alice, `{"slot": "demo_api_key"}`); st.Status != api.CredentialStored {
		t.Errorf("the default account went too: %+v", st)
	}
	for _, label := range []string{"Work", "a b", "-x", strings.Repeat("x", 33), "a@b"} {
		body := fmt.Sprintf(`{"slot": "demo_api_key", "label": %q}`, label)
		f.asService(t, weather, http.MethodPost, "/api/v1/elicitations", alice, body).want(t, http.StatusBadRequest, "label")
		f.asService(t, weather, http.MethodPost, statusPath, alice, body).want(t, http.StatusBadRequest, "label")
	}
}
