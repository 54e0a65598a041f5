package credentials

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/internal/redistest"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/audit"
	"github.com/urlflow/urlflow/state/vault"
)

// The credential store. Storing a credential is package flow's atomic step that completes
// an elicitation (its tests check that atomicity); here Queue runs in a transaction of its
// own, as flow runs it.

var quiet = slog.New(slog.DiscardHandler)

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// auditOf returns every event of trail.
func auditOf(t *testing.T, trail *audit.Trail) []audit.Event {
	t.Helper()
	events, err := trail.Read(t.Context(), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	return events
}

func userFor(t *testing.T) state.User {
	return state.User{Issuer: "https://id.example", Subject: t.Name()}
}

// store queues c for user in a transaction, as flow does when a flow completes.
func store(t *testing.T, b *redistest.Backend, user state.User, c *Credential) {
	t.Helper()
	_, err := b.Client.TxPipelined(t.Context(), func(p redis.Pipeliner) error {
		return Queue(t.Context(), p, user, c)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func sealed(t *testing.T, user state.User, value string) vault.Sealed {
	t.Helper()
	ring, err := vault.ParseKeyRing(vault.GenerateKeyRing("test"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := vault.NewVault(ring).Seal(user, "demo_api_key", state.NewSecret(value))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestCredentialsAreAuditedListedAndDeleted(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		clk := &clock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
		trail := audit.New(b.Client, audit.Options{Now: clk.Now, Logger: quiet})
		s := NewStore(b.Client, Options{Now: clk.Now, Logger: quiet, Audit: trail})
		user := userFor(t)

		store(t, b, user, &Credential{Name: "demo_api_key", Kind: state.KindSecret, ElicitationID: "E1",
			StoredAt: clk.Now(), Sealed: sealed(t, user, "one")})
		clk.Advance(time.Second)
		second := &Credential{Name: "demo_api_key", Kind: state.KindSecret, ElicitationID: "E2",
			StoredAt: clk.Now(), Sealed: sealed(t, user, "two")}
		store(t, b, user, second)
		if got, err := s.Get(t.Context(), user, "demo_api_key"); err != nil || got.ElicitationID != "E2" {
			t.Fatalf("Get after the replacement: %+v %v", got, err)
		}
		if err := s.Touch(t.Context(), user, "demo_api_key"); err != nil {
			t.Fatal(err)
		}
		conns, err := s.Connections(t.Context(), user, nil)
		if err != nil || len(conns) != 1 || conns[0].Name != "demo_api_key" || conns[0].LastUsedAt == nil || !conns[0].LastUsedAt.Equal(clk.Now()) {
			t.Fatalf("connections: %+v %v", conns, err)
		}
		if other, _ := s.Connections(t.Context(), state.User{Issuer: user.Issuer, Subject: "someone-else"}, nil); len(other) != 0 {
			t.Fatalf("another user sees %+v", other)
		}
		if names, err := s.Names(t.Context(), user); err != nil || !slices.Equal(names, []string{"demo_api_key"}) {
			t.Fatalf("Names = %v, %v", names, err)
		}

		deleted, err := s.Delete(t.Context(), user, "demo_api_key", state.ActorClient, "disconnect tool")
		if err != nil || !deleted {
			t.Fatalf("delete: %v %v", deleted, err)
		}
		if again, _ := s.Delete(t.Context(), user, "demo_api_key", state.ActorClient, "again"); again {
			t.Fatal("deleted twice")
		}
		if conns, _ := s.Connections(t.Context(), user, nil); len(conns) != 0 {
			t.Fatalf("still listed: %+v", conns)
		}
		if _, err := s.Get(t.Context(), user, "demo_api_key"); !errors.Is(err, state.ErrNotFound) {
			t.Fatalf("Get after the deletion: %v", err)
		}
		var events []string
		for _, a := range auditOf(t, trail) {
			events = append(events, a.Event+":"+a.Credential+":"+a.Reason)
		}
		want := []string{audit.CredentialDeleted + ":demo_api_key:disconnect tool"}
		if !slices.Equal(events, want) {
			t.Fatalf("audit %v, want %v", events, want)
		}
		if e := auditOf(t, trail)[0]; e.Actor != state.ActorClient || e.User == nil || e.User.Subject != user.Subject || e.UserKey != user.Key() {
			t.Fatalf("deletion entry: %+v", e)
		}
	})
}

func TestLastUsedIsTheLastTouchSinceTheCredentialWasStored(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		clk := &clock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
		s := NewStore(b.Client, Options{Now: clk.Now, Logger: quiet})
		user := userFor(t)
		c := &Credential{Name: "weather/demo_api_key", Kind: state.KindSecret, ElicitationID: "E1", StoredAt: clk.Now(), Sealed: sealed(t, user, "one")}
		store(t, b, user, c)
		if used, err := s.LastUsed(t.Context(), user, c.Name); err != nil || used != nil {
			t.Fatalf("LastUsed of a credential never used: %v, %v", used, err)
		}
		clk.Advance(time.Minute)
		if err := s.Touch(t.Context(), user, c.Name); err != nil {
			t.Fatal(err)
		}
		if used, err := s.LastUsed(t.Context(), user, c.Name); err != nil || used == nil || !used.Equal(clk.Now()) {
			t.Fatalf("LastUsed after a use: %v, %v; want %v", used, err, clk.Now())
		}
		store(t, b, user, c) // stored again: its uses were the old value's
		if used, err := s.LastUsed(t.Context(), user, c.Name); err != nil || used != nil {
			t.Fatalf("LastUsed of a credential stored again: %v, %v", used, err)
		}
	})
}

// TestUpdateDoesNotUndoADeletionNorOverwriteANewValue: a refresh that stores new tokens
// after the user disconnected finds nothing to update, and one whose credential was stored
// again meanwhile leaves the new one as it is.
func TestUpdateDoesNotUndoADeletionNorOverwriteANewValue(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		s := NewStore(b.Client, Options{Logger: quiet})
		user := userFor(t)
		c := &Credential{Name: "acme", Kind: state.KindOAuth, ElicitationID: "first", StoredAt: time.Now().UTC(), Sealed: sealed(t, user, "tok")}
		store(t, b, user, c)
		refresh := func(c *Credential) { c.Account = "refreshed" }
		if err := s.Update(t.Context(), user, c, refresh); err != nil {
			t.Fatalf("Update of a stored credential: %v", err)
		}
		if got, err := s.Get(t.Context(), user, "acme"); err != nil || got.Account != "refreshed" {
			t.Fatalf("after Update: %+v %v", got, err)
		}
		again := &Credential{Name: "acme", Kind: state.KindOAuth, ElicitationID: "second", StoredAt: time.Now().UTC(), Sealed: sealed(t, user, "tok2")}
		store(t, b, user, again)
		if err := s.Update(t.Context(), user, c, refresh); !errors.Is(err, ErrStoredAgain) {
			t.Fatalf("Update of a credential stored again = %v, want ErrStoredAgain", err)
		}
		if got, err := s.Get(t.Context(), user, "acme"); err != nil || got.ElicitationID != "second" || got.Account != "" {
			t.Fatalf("the credential stored again was changed: %+v %v", got, err)
		}
		if _, err := s.Delete(t.Context(), user, "acme", state.ActorClient, "disconnect"); err != nil {
			t.Fatal(err)
		}
		if err := s.Update(t.Context(), user, again, refresh); !errors.Is(err, state.ErrNotFound) {
			t.Fatalf("Update after the deletion = %v, want state.ErrNotFound", err)
		}
		if _, err := s.Get(t.Context(), user, "acme"); !errors.Is(err, state.ErrNotFound) {
			t.Fatalf("the deleted credential came back: %v", err)
		}
	})
}

// heard is a Lifecycle that remembers the changes it hears of.
type heard struct {
	mu      sync.Mutex
	changes []Change
}

func (h *heard) QueueCredentialChange(_ context.Context, _ redis.Pipeliner, c Change) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.changes = append(h.changes, c)
	return nil
}

func (h *heard) types() []ChangeType {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []ChangeType
	for _, c := range h.changes {
		out = append(out, c.Type)
	}
	return out
}

// TestAServicesCredentialTellsItsLifecycleOfEachChange: the Store tells of the release, the
// lock, the connection that needs reconnecting (once) and the deletion of a service's
// credential, and of nothing of urlflow's own.
func TestAServicesCredentialTellsItsLifecycleOfEachChange(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		h := &heard{}
		s := NewStore(b.Client, Options{Logger: quiet, Lifecycles: []Lifecycle{h}})
		user := userFor(t)
		for _, name := range []string{Name("weather", "acme"), "acme"} {
			c := &Credential{Name: name, Kind: state.KindOAuth, ElicitationID: "first", StoredAt: time.Now().UTC(), Sealed: sealed(t, user, "tok")}
			store(t, b, user, c)
			if err := s.Released(t.Context(), user, c, state.ActorService, "released"); err != nil {
				t.Fatal(err)
			}
			reconnect := func(c *Credential) { c.NeedsReconnect = true }
			if err := s.Update(t.Context(), user, c, reconnect); err != nil {
				t.Fatal(err)
			}
			if err := s.Update(t.Context(), user, c, reconnect); err != nil { // marked already: nothing new
				t.Fatal(err)
			}
			if _, err := s.Lock(t.Context(), user, c, state.ActorService, "carried"); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Delete(t.Context(), user, name, state.ActorUser, "removed"); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Delete(t.Context(), user, name, state.ActorUser, "removed"); err != nil { // nothing left
				t.Fatal(err)
			}
		}
		want := []ChangeType{ChangeReleased, ChangeReconnectRequired, ChangeLocked, ChangeDeleted}
		if got := h.types(); !slices.Equal(got, want) {
			t.Fatalf("heard %v, want %v of weather's only", got, want)
		}
		deleted := h.changes[3]
		if deleted.Credential.ElicitationID != "first" || deleted.Actor != state.ActorUser || deleted.Reason != "removed" ||
			deleted.Service() != "weather" || deleted.User != user {
			t.Errorf("the deletion: %+v", deleted)
		}
		if ev := deleted.Event("usr_x"); ev.Credential != nil || ev.Type != "credential.deleted" || ev.Target != "acme" || ev.UserRef != "usr_x" {
			t.Errorf("the deletion's event: %+v", ev)
		}
		if locked := h.changes[2].Credential; locked.LockedAt == nil || locked.LockReason != "carried" {
			t.Errorf("the lock's credential: %+v", locked)
		}
	})
}

// TestOnlyTheHolderOfALockFreesIt: a second TryLock fails while the lock is held, and an
// Unlock with a stale token frees nothing.
func TestOnlyTheHolderOfALockFreesIt(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		s := NewStore(b.Client, Options{Logger: quiet})
		user := userFor(t)
		token, ok, err := s.TryLock(t.Context(), user, "acme", time.Minute)
		if err != nil || !ok {
			t.Fatalf("first TryLock: %v %v", ok, err)
		}
		if _, ok, err := s.TryLock(t.Context(), user, "acme", time.Minute); err != nil || ok {
			t.Fatalf("second TryLock while held: %v %v", ok, err)
		}
		if err := s.Unlock(t.Context(), user, "acme", "not-the-token"); err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := s.TryLock(t.Context(), user, "acme", time.Minute); ok {
			t.Fatal("an Unlock with another token freed the lock")
		}
		if err := s.Unlock(t.Context(), user, "acme", token); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := s.TryLock(t.Context(), user, "acme", time.Minute); err != nil || !ok {
			t.Fatalf("TryLock after the holder unlocked: %v %v", ok, err)
		}
	})
}

func TestALockHoldsUntilTheSecretIsStoredAgainAndIsAudited(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		clk := &clock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
		trail := audit.New(b.Client, audit.Options{Now: clk.Now, Logger: quiet})
		s := NewStore(b.Client, Options{Now: clk.Now, Logger: quiet, Audit: trail})
		user := userFor(t)
		stored := &Credential{Name: "demo_api_key", Kind: state.KindSecret, ElicitationID: "E1",
			StoredAt: clk.Now(), Sealed: sealed(t, user, "one")}
		store(t, b, user, stored)
		before, err := s.Get(t.Context(), user, "demo_api_key")
		if err != nil {
			t.Fatal(err)
		}

		clk.Advance(time.Minute)
		const reason = "a call_api request carried it in its body"
		locked, err := s.Lock(t.Context(), user, before, state.ActorClient, reason)
		if err != nil || !locked {
			t.Fatalf("Lock = %v, %v", locked, err)
		}
		after, err := s.Get(t.Context(), user, "demo_api_key")
		if err != nil {
			t.Fatal(err)
		}
		if !after.Locked() || !after.LockedAt.Equal(clk.Now()) || after.LockReason != reason {
			t.Fatalf("the credential is not locked as asked: %+v", after)
		}
		// The lock changes nothing else: the sealed value still opens to the same secret.
		after.LockedAt, after.LockReason = nil, ""
		if !credentialsEqual(before, after) {
			t.Fatalf("locking changed the credential:\n%+v\n%+v", before, after)
		}
		// A second lock finds it locked and changes nothing.
		if again, err := s.Lock(t.Context(), user, before, state.ActorClient, "again"); err != nil || !again {
			t.Fatalf("a second lock = %v, %v; want it still locked", again, err)
		}
		if c, err := s.Get(t.Context(), user, "demo_api_key"); err != nil || c.LockReason != reason {
			t.Fatalf("after a second lock: %+v, %v; want the first lock's reason", c, err)
		}
		conns, err := s.Connections(t.Context(), user, nil)
		if err != nil || len(conns) != 1 || conns[0].LockedAt == nil || conns[0].LockReason != reason {
			t.Fatalf("Connections = %+v, %v; want the lock shown", conns, err)
		}

		// Storing it again (the new elicitation) unlocks it; a lock that read the old
		// credential then locks nothing.
		store(t, b, user, &Credential{Name: "demo_api_key", Kind: state.KindSecret, ElicitationID: "E2",
			StoredAt: clk.Now(), Sealed: sealed(t, user, "two")})
		if c, err := s.Get(t.Context(), user, "demo_api_key"); err != nil || c.Locked() {
			t.Fatalf("after storing it again: %+v, %v", c, err)
		}
		if late, err := s.Lock(t.Context(), user, before, state.ActorClient, reason); err != nil || late {
			t.Fatalf("a lock for the replaced value = %v, %v; want no change", late, err)
		}
		if gone, err := s.Lock(t.Context(), user, &Credential{Name: "other", ElicitationID: "E9"}, state.ActorClient, reason); err != nil || gone {
			t.Fatalf("a lock of a missing credential = %v, %v", gone, err)
		}

		var events []string
		for _, e := range auditOf(t, trail) {
			events = append(events, e.Event)
		}
		want := []string{audit.CredentialLocked}
		if !slices.Equal(events, want) {
			t.Fatalf("audit %v, want %v", events, want)
		}
		if l := auditOf(t, trail)[0]; l.Actor != state.ActorClient || l.Reason != reason || l.Credential != "demo_api_key" {
			t.Fatalf("lock entry %+v", l)
		}
	})
}

func credentialsEqual(a, b *Credential) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func TestNamesKeepUrlflowsOwnAsTheyWereAndServicesApart(t *testing.T) {
	for _, tc := range []struct {
		service, target, name string
	}{
		{"", "demo_api_key", "demo_api_key"},
		{OwnService, "demo_api_key", "demo_api_key"},
		{"weather", "demo_api_key", "weather/demo_api_key"},
		{"calendar", "github", "calendar/github"},
	} {
		if got := Name(tc.service, tc.target); got != tc.name {
			t.Errorf("Name(%q, %q) = %q, want %q", tc.service, tc.target, got, tc.name)
		}
		wantService := cmp.Or(tc.service, OwnService)
		if s, target := SplitName(tc.name); s != wantService || target != tc.target {
			t.Errorf("SplitName(%q) = %q, %q", tc.name, s, target)
		}
	}
}

func TestTheAuditLogsOfAnEarlierUrlflowMoveIntoTheTrailOnce(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		user := userFor(t)
		at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		legacy := state.UserTag(user.Key()) + "audit"
		for _, line := range []string{
			`{"at":"2026-03-01T12:00:00Z","event":"credential_stored","name":"demo_api_key","actor":"user","reason":"entered through elicitation E1"}`,
			`{"at":"2026-03-01T12:05:00Z","event":"credential_deleted","name":"demo_api_key","actor":"client","reason":"disconnect tool"}`,
		} {
			if err := b.Client.RPush(ctx, legacy, line).Err(); err != nil {
				t.Fatal(err)
			}
		}
		trail := audit.New(b.Client, audit.Options{Logger: quiet})
		s := NewStore(b.Client, Options{Logger: quiet, Audit: trail})
		if moved, err := s.MoveAuditLogs(ctx); moved != 1 || err != nil {
			t.Fatalf("MoveAuditLogs = %v, %v; want the one user's log", moved, err)
		}
		got := auditOf(t, trail)
		if len(got) != 2 || got[0].Event != audit.CredentialStored || !got[0].At.Equal(at) || !got[0].Migrated ||
			got[0].UserKey != user.Key() || got[1].Reason != "disconnect tool" || got[1].Actor != state.ActorClient {
			t.Fatalf("moved as %+v", got)
		}
		if n, _ := b.Client.Exists(ctx, legacy).Result(); n != 0 {
			t.Error("the old log is still there")
		}
		if moved, err := s.MoveAuditLogs(ctx); moved != 0 || err != nil {
			t.Errorf("a second MoveAuditLogs = %v, %v; want none", moved, err)
		}
	})
}

// TestAFreshDeploymentHasNoAuditLogsToMove: with no audit log of an earlier urlflow, the
// first start moves none (and says so by the count, which its log line depends on).
func TestAFreshDeploymentHasNoAuditLogsToMove(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		s := NewStore(b.Client, Options{Logger: quiet, Audit: audit.New(b.Client, audit.Options{Logger: quiet})})
		if moved, err := s.MoveAuditLogs(t.Context()); moved != 0 || err != nil {
			t.Errorf("MoveAuditLogs = %v, %v; want none", moved, err)
		}
	})
}
