package ask

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/urlflow/urlflow/internal/redistest"
	"github.com/urlflow/urlflow/slots"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/credentials"
	"github.com/urlflow/urlflow/state/flow"
	"github.com/urlflow/urlflow/state/once"
	"github.com/urlflow/urlflow/state/vault"
	"github.com/urlflow/urlflow/upstream"
)

// Test values: a slot with an API (its secrets must be strong) and a provider's name.
const (
	apiSlot = "demo_api_key"
	// siteSlot's API is at an address made of the user's site.
	siteSlot   = "site_key"
	acme       = "acme"
	strongKey  = "demo_0123456789abcdefXYZ"
	weakKey    = "aaaaaaaaaaaaaaaaaaaa"
	weather    = "weather"
	testTTL    = 10 * time.Minute
	callOfTool = "get_forecast:abc"
)

// fixture is an Asker on its own redis-server.
type fixture struct {
	t     *testing.T
	asker *Asker
	flows *flow.Store
	creds *credentials.Store
	vault *vault.Vault
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	rdb := redistest.Start(t).Client(t)
	ring, err := vault.ParseKeyRing(vault.GenerateKeyRing("k1"))
	if err != nil {
		t.Fatal(err)
	}
	catalog, err := slots.NewCatalog([]slots.Slot{{
		Name: apiSlot, Label: "Demo API key",
		API: &upstream.API{BaseURL: "https://api.example", Methods: []string{"GET"}, Inject: upstream.Injection{Header: "X-Key"}},
	}, {
		Name: siteSlot, Label: "Site key",
		API: &upstream.API{BaseURL: "https://{site}.api.example", Inject: upstream.Injection{Header: "X-Key"},
			Parameters: []upstream.Parameter{{Name: "site", Label: "Site", Pattern: "[a-z]+"}}},
	}}, "https://urlflow.test")
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	f := &fixture{t: t, flows: flow.NewStore(rdb, flow.StoreOptions{Logger: quiet}),
		creds: credentials.NewStore(rdb, credentials.Options{Logger: quiet}), vault: vault.NewVault(ring)}
	f.asker = New(Options{Flows: f.flows, Credentials: f.creds, Keys: once.New(rdb), Vault: f.vault, Slots: catalog,
		TTL: testTTL, ToolStateKeys: [][]byte{toolKey}, ServiceStateKeys: [][]byte{serviceKey}, Logger: quiet})
	return f
}

// need is what urlflow's own tools need of alice: target of kind, with a purpose that says
// how what it replaces stands.
func need(kind state.Kind, target string, scopes ...string) Need {
	return Need{User: alice, Kind: kind, Target: target, Scopes: scopes,
		Caller: Caller{Client: state.ClientInfo{Name: "test-client"}, SessionID: "session-1"},
		Purpose: func(r *flow.Replaced) string {
			switch {
			case r == nil:
				return "new"
			case r.LockReason != "":
				return "locked: " + r.LockReason
			case r.Weak:
				return "weak"
			case r.Reconnect:
				return "reconnect"
			}
			return "replace"
		}}
}

// store completes an elicitation of n that stores c (sealing value for a secret).
func (f *fixture) store(n Need, c credentials.Credential, value string) *flow.Elicitation {
	f.t.Helper()
	ctx := f.t.Context()
	o, err := f.asker.Open(ctx, n, Outcome{Status: Missing})
	if err != nil {
		f.t.Fatal(err)
	}
	c.Name, c.Kind, c.ElicitationID = n.name(), n.Kind, o.Elicitation.ID
	if value != "" {
		if c.Sealed, err = f.vault.Seal(n.User, c.Name, state.NewSecret(value)); err != nil {
			f.t.Fatal(err)
		}
	}
	if _, err := f.flows.Apply(ctx, o.Elicitation.ID, flow.BrowserOpen, state.ActorUser, "opened"); err != nil {
		f.t.Fatal(err)
	}
	change, err := f.flows.Apply(ctx, o.Elicitation.ID, flow.Verified, state.ActorUser, "stored", flow.WithCredential(&c))
	if err != nil || change.To != flow.Complete {
		f.t.Fatalf("completing the flow: %+v, %v", change, err)
	}
	return change.Elicitation
}

func TestEnsureAsksOnlyWhenNothingUsableIsStored(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	locked := time.Now()
	tests := []struct {
		name    string
		n       Need
		stored  *credentials.Credential // nil: nothing stored
		value   string
		replace bool
		status  Status
		purpose string
	}{
		{"nothing stored", need(state.KindSecret, apiSlot), nil, "", false, Asking, "new"},
		{"a usable secret", need(state.KindSecret, apiSlot), &credentials.Credential{}, strongKey, false, Stored, ""},
		{"a usable secret, asked again", need(state.KindSecret, apiSlot), &credentials.Credential{}, strongKey, true, Asking, "replace"},
		{"a locked secret", need(state.KindSecret, apiSlot), &credentials.Credential{LockedAt: &locked, LockReason: "a request carried it"}, strongKey, false, Asking, "locked: a request carried it"},
		{"a weak secret, asked again", need(state.KindSecret, apiSlot), &credentials.Credential{}, weakKey, true, Asking, "weak"},
		{"a weak secret is usable", need(state.KindSecret, apiSlot), &credentials.Credential{}, weakKey, false, Stored, ""},
		{"a secret with its address's parts", need(state.KindSecret, siteSlot), &credentials.Credential{Parameters: map[string]string{"site": "acme"}}, strongKey, false, Stored, ""},
		{"a secret stored before its address took parts", need(state.KindSecret, siteSlot), &credentials.Credential{}, strongKey, false, Asking, "replace"},
		{"a connection covering the scopes", need(state.KindOAuth, acme, "read"), &credentials.Credential{Scopes: []string{"read", "write"}}, "", false, Stored, ""},
		{"a connection short of a scope", need(state.KindOAuth, acme, "admin"), &credentials.Credential{Scopes: []string{"read"}}, "", false, Asking, "replace"},
		{"a connection its provider no longer honours", need(state.KindOAuth, acme), &credentials.Credential{NeedsReconnect: true}, "", false, Asking, "reconnect"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := tt.n
			n.User = state.User{Issuer: alice.Issuer, Subject: "user-" + string(rune('a'+i))}
			if tt.stored != nil {
				f.store(n, *tt.stored, tt.value)
			}
			n.Replace = tt.replace
			o, err := f.asker.Ensure(ctx, n)
			if err != nil || o.Status != tt.status {
				t.Fatalf("Ensure = %+v, %v; want status %d", o, err, tt.status)
			}
			if tt.status == Stored {
				if o.Credential == nil || o.Elicitation != nil {
					t.Fatalf("stored: %+v", o)
				}
				return
			}
			e := o.Elicitation
			if e == nil || !o.Created || e.State != flow.Pending || e.Purpose != tt.purpose || e.User != n.User || e.SessionID != "session-1" {
				t.Fatalf("the elicitation asking: %+v", e)
			}
			if replacing := tt.stored != nil; e.Replace != replacing || (e.Replaced != nil) != replacing {
				t.Errorf("replace %v, replaced %+v; want both when something is stored", e.Replace, e.Replaced)
			}
			// The same need again reuses the running elicitation.
			if again, err := f.asker.Ensure(ctx, n); err != nil || again.Elicitation.ID != e.ID || again.Created {
				t.Errorf("asked again: %+v, %v; want the running %s", again, err, e.ID)
			}
		})
	}
}

func TestAServicesNeedIsItsOwn(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	own := need(state.KindSecret, apiSlot)
	f.store(own, credentials.Credential{}, strongKey)
	svc := own
	svc.Caller = Caller{Service: weather, Releasable: true}
	o, err := f.asker.Ensure(t.Context(), svc)
	if err != nil || o.Status != Asking || o.Elicitation.Service != weather || !o.Elicitation.Releasable ||
		o.Elicitation.CredentialName() != weather+"/"+apiSlot {
		t.Fatalf("a service's need, with urlflow's own stored: %+v, %v; want an elicitation for the service", o, err)
	}
}

func TestSettleSaysWhereAnElicitationLeftTheNeed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	n := need(state.KindSecret, apiSlot)

	running, err := f.asker.Ensure(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	if o := Settle(running.Elicitation); o.Status != Asking || o.Elicitation.ID != running.Elicitation.ID {
		t.Errorf("running: %+v", o)
	}
	change, err := f.flows.Apply(ctx, running.Elicitation.ID, flow.ClientDecline, state.ActorClient, "declined")
	if err != nil {
		t.Fatal(err)
	}
	if o, err := f.asker.Recheck(ctx, n, change.Elicitation); err != nil || o.Status != Ended || o.Elicitation.State != flow.Declined {
		t.Errorf("declined: %+v, %v", o, err)
	}

	done := f.store(n, credentials.Credential{}, strongKey)
	if o := Settle(done); o.Status != Stored || o.Elicitation.ID != done.ID || o.Credential != nil {
		t.Errorf("just completed: %+v; want stored without a read", o)
	}
	n.Replace = true // what the flow stored is the replacement
	if o, err := f.asker.Recheck(ctx, n, done); err != nil || o.Status != Stored || o.Credential == nil || o.Elicitation.ID != done.ID {
		t.Errorf("completed earlier: %+v, %v; want stored, read again", o, err)
	}
	if _, err := f.creds.Delete(ctx, alice, apiSlot, state.ActorUser, "deleted"); err != nil {
		t.Fatal(err)
	}
	if o, err := f.asker.Recheck(ctx, n, done); err != nil || o.Status != Asking || !o.Created {
		t.Errorf("completed earlier, deleted since: %+v, %v; want a new elicitation", o, err)
	}
}

func TestCurrentRecordsTheClientsAnswerOnTheUsersElicitationOnly(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	o, err := f.asker.Ensure(ctx, need(state.KindSecret, apiSlot))
	if err != nil {
		t.Fatal(err)
	}
	id := o.Elicitation.ID
	if e, err := f.asker.Current(ctx, bob, id, "decline", ""); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("bob's answer to alice's elicitation: %+v, %v", e, err)
	}
	if e, err := f.asker.Current(ctx, alice, id, "", ""); err != nil || e.State != flow.Pending {
		t.Fatalf("no answer: %+v, %v", e, err)
	}
	e, err := f.asker.Current(ctx, alice, id, "accept", "the service weather")
	if err != nil || e.State != flow.Consented {
		t.Fatalf("an accept: %+v, %v; want consented (consent, not success)", e, err)
	}
	history, err := f.flows.History(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	last := history[len(history)-1]
	if last.Event != flow.ClientAccept || last.Actor != state.ActorClient || !strings.HasSuffix(last.Reason, "as the service weather reports") {
		t.Errorf("the accept is recorded as %+v", last)
	}
	if _, err := f.asker.Current(ctx, alice, "AAAAAAAAAAAAAAAAAAAAAAAAAA", "accept", ""); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("an elicitation that is gone: %v", err)
	}
}

func TestEnsureOnceGivesTheFirstAnswerAgain(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	n := need(state.KindSecret, apiSlot)
	n.Caller.Service, n.Caller.SessionID = weather, ""
	first, err := f.asker.EnsureOnce(ctx, n, "order-1", "request-a")
	if err != nil || first.Status != Asking || !first.Created || first.Replayed {
		t.Fatalf("first: %+v, %v", first, err)
	}
	if _, err := f.flows.Apply(ctx, first.Elicitation.ID, flow.CancelRequested, state.ActorService, "cancel"); err != nil {
		t.Fatal(err)
	}
	again, err := f.asker.EnsureOnce(ctx, n, "order-1", "request-a")
	if err != nil || again.Status != Ended || !again.Replayed || !again.Created || again.Elicitation.ID != first.Elicitation.ID ||
		again.Elicitation.State != flow.Cancelled {
		t.Fatalf("sent again: %+v, %v; want the first elicitation as it now stands", again, err)
	}
	if _, err := f.asker.EnsureOnce(ctx, n, "order-1", "request-b"); !errors.Is(err, ErrKeyReused) {
		t.Errorf("the key with another request: %v", err)
	}
	f.store(n, credentials.Credential{}, strongKey)
	for range 2 { // a stored answer is not kept: the key answers anew
		if o, err := f.asker.EnsureOnce(ctx, n, "order-2", "request-a"); err != nil || o.Status != Stored || o.Replayed {
			t.Errorf("stored: %+v, %v", o, err)
		}
	}
}

func TestEnsureOnceOfAFlowThatIsGone(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	n := need(state.KindSecret, apiSlot)
	n.Caller.Service = weather
	keys := f.asker.keys
	_, _, err := keys.Do(t.Context(), weather, "order-1", "request-a", func(context.Context) (once.Answer, error) {
		return once.Answer{ElicitationID: "AAAAAAAAAAAAAAAAAAAAAAAAAA"}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.asker.EnsureOnce(t.Context(), n, "order-1", "request-a"); !errors.Is(err, ErrKeyGone) {
		t.Errorf("a key whose elicitation is gone: %v", err)
	}
}
