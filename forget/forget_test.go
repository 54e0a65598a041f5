package forget

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/internal/redistest"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/audit"
	"github.com/urlflow/urlflow/state/credentials"
	"github.com/urlflow/urlflow/state/flow"
	"github.com/urlflow/urlflow/state/mcpsessions"
	"github.com/urlflow/urlflow/state/servicecreds"
	"github.com/urlflow/urlflow/state/vault"
	"github.com/urlflow/urlflow/userref"
)

var (
	quiet = slog.New(slog.DiscardHandler)
	// The subjects are unusual strings, so that finding one anywhere in Redis means it is
	// theirs.
	alice = state.User{Issuer: "https://id.example", Subject: "alice-7d3f9q"}
	bob   = state.User{Issuer: "https://id.example", Subject: "bob-k2m8w4"}
)

// fixture is a Forgetter over stores on one Redis, with what a deployment writes about
// its users.
type fixture struct {
	t      *testing.T
	rdb    redis.UniversalClient
	flows  *flow.Store
	creds  *credentials.Store
	trail  *audit.Trail
	index  *servicecreds.Index
	refs   *userref.Refs
	sess   *mcpsessions.Registry
	forget *Forgetter
}

func newFixture(t *testing.T, rdb redis.UniversalClient) *fixture {
	t.Helper()
	refs, err := userref.New([]byte(strings.Repeat("k", userref.MinKeySize)))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, rdb: rdb, trail: audit.New(rdb, audit.Options{Logger: quiet}), refs: refs, sess: mcpsessions.New(rdb, nil)}
	f.flows = flow.NewStore(rdb, flow.StoreOptions{Logger: quiet, Audit: f.trail})
	f.index = servicecreds.New(rdb, refs)
	f.creds = credentials.NewStore(rdb, credentials.Options{Logger: quiet, Audit: f.trail, Lifecycles: []credentials.Lifecycle{f.index}})
	f.forget = New(Options{Redis: rdb, Flows: f.flows, Credentials: f.creds, Sessions: f.sess, ServiceCredentials: f.index,
		Services: []string{"mail"}, Audit: f.trail, Logger: quiet})
	return f
}

// live gives user what a user who used urlflow has: flows in every stage (one with a
// session, one ended), a credential of urlflow's own and one of a delegating service
// (with its index entries and the user's reference), a live MCP session, a signed-in
// browser session, rate-limit counters, and events in the audit trail, one with the
// user's address and a reason that quotes the subject.
func (f *fixture) live(user state.User) {
	t, ctx := f.t, f.t.Context()
	uk := user.Key()
	for i, events := range [][]flow.Event{nil, {flow.ClientAccept}, {flow.ClientDecline}} {
		e, err := f.flows.Create(ctx, flow.NewElicitation{User: user, Kind: state.KindSecret, Target: "demo_api_key",
			Purpose: "a test", TTL: time.Hour, SessionID: fmt.Sprintf("s%d-%s", i, user.Subject)})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range events {
			if _, err := f.flows.Apply(ctx, e.ID, ev, state.ActorClient, "a test"); err != nil {
				t.Fatal(err)
			}
		}
	}
	_, err := f.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, name := range []string{"demo_api_key", "mail/gmail"} {
			c := &credentials.Credential{Name: name, Kind: state.KindSecret, StoredAt: time.Now(), Sealed: vault.Sealed{KeyID: "k1"}}
			if err := credentials.Queue(ctx, p, user, c); err != nil {
				return err
			}
			credentials.QueueIndexing(ctx, p, uk, c) // the key ring's index of sealed credentials
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := json.Marshal(user)
	member := uk + " gmail"
	f.rdb.ZAdd(ctx, state.KeyPrefix+"svc:mail:creds", redis.Z{Score: 1, Member: member})
	f.rdb.HSet(ctx, state.KeyPrefix+"svc:mail:credusers", member, doc)
	f.rdb.HSet(ctx, state.KeyPrefix+"svc:mail:userrefs", f.refs.Of("mail", user), doc)
	if err := f.sess.Register(ctx, mcpsessions.Session{ID: "ms-" + user.Subject, User: user, Replica: "r1"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	f.rdb.Set(ctx, state.UserTag(uk)+"bs:r1", `{"user":"`+user.Subject+`"}`, time.Hour)
	f.rdb.Set(ctx, state.UserTag(uk)+"rl:forms:1", 3, time.Minute)
	f.trail.Record(ctx, audit.Event{Event: audit.SignedIn, Address: "192.0.2.7"}.About(user))
	f.trail.Record(ctx, audit.Event{Event: audit.IdentityRefused, Reason: "token of " + user.Subject + " expired"}.About(user))
}

// mentions returns the keys of Redis whose name or value mentions user (its subject or its
// key), each with where.
func (f *fixture) mentions(user state.User) []string {
	ctx := f.t.Context()
	var found []string
	err := state.ScanKeys(ctx, f.rdb, "*", func(key string) error {
		content, err := dump(ctx, f.rdb, key)
		if err != nil {
			return err
		}
		for _, s := range []string{user.Subject, user.Key()} {
			if strings.Contains(key, s) || strings.Contains(content, s) {
				found = append(found, key)
				break
			}
		}
		return nil
	})
	if err != nil {
		f.t.Fatal(err)
	}
	slices.Sort(found)
	return found
}

// dump returns everything key holds, as text.
func dump(ctx context.Context, rdb redis.UniversalClient, key string) (string, error) {
	kind, err := rdb.Type(ctx, key).Result()
	if err != nil {
		return "", err
	}
	var v any
	switch kind {
	case "string":
		v, err = rdb.Get(ctx, key).Result()
	case "list":
		v, err = rdb.LRange(ctx, key, 0, -1).Result()
	case "set":
		v, err = rdb.SMembers(ctx, key).Result()
	case "zset":
		v, err = rdb.ZRange(ctx, key, 0, -1).Result()
	case "hash":
		v, err = rdb.HGetAll(ctx, key).Result()
	case "stream":
		v, err = rdb.XRange(ctx, key, "-", "+").Result()
	}
	if err != nil && err != redis.Nil {
		return "", err
	}
	return fmt.Sprint(v), nil
}

// trail returns the audit trail's events.
func (f *fixture) events() []audit.Event {
	events, err := f.trail.Read(f.t.Context(), time.Time{})
	if err != nil {
		f.t.Fatal(err)
	}
	return events
}

func TestForgettingAUserLeavesNothingThatNamesThemAndEveryoneElseAsTheyWere(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		f := newFixture(t, b.Client)
		ctx := t.Context()
		f.live(alice)
		f.live(bob)
		if len(f.mentions(alice)) == 0 {
			t.Fatal("nothing names alice before she is forgotten: the test sees nothing")
		}
		f.trail.Flush(ctx) // on a Cluster, the flows' events go with the replica's batch
		before := f.events()
		aboutAlice := map[string]audit.Event{}
		for _, e := range before {
			if e.UserKey == alice.Key() {
				aboutAlice[e.ID] = e
			}
		}
		bobsBefore := f.mentions(bob)

		// An operator may name the person in the reason: the trail must not keep it.
		r, err := f.forget.Forget(ctx, alice, "ops", "erasure request 42 from "+alice.Subject)
		if err != nil {
			t.Fatal(err)
		}
		if r.Flows != 3 || r.Credentials != 2 || r.Sessions != 1 || r.Keys == 0 || r.AuditEvents < len(aboutAlice) ||
			!strings.HasPrefix(r.Tombstone, "forgotten-") {
			t.Errorf("report %+v; want 3 flows, 2 credentials, 1 session, some keys, at least %d audit events", r, len(aboutAlice))
		}
		if left := f.mentions(alice); len(left) != 0 {
			t.Errorf("after Forget these keys still name alice: %q", left)
		}

		// The trail keeps every event, at its position, about the tombstone now, and adds
		// the forgetting.
		after := f.events()
		tombstone := state.User{Issuer: TombstoneIssuer, Subject: r.Tombstone}
		byID := map[string]audit.Event{}
		for _, e := range after {
			byID[e.ID] = e
		}
		for id, was := range aboutAlice {
			now, ok := byID[id]
			if !ok || now.Event != was.Event || !now.At.Equal(was.At) || now.UserKey != tombstone.Key() ||
				now.User == nil || *now.User != (audit.User{Issuer: tombstone.Issuer, Subject: tombstone.Subject}) || now.Address != "" {
				t.Errorf("event %s about alice is now %+v (was %+v); want it at its place, about %s, without the address", id, now, was, r.Tombstone)
			}
			if now.Reason != strings.ReplaceAll(was.Reason, alice.Subject, r.Tombstone) {
				t.Errorf("event %s's reason %q: want alice's subject replaced", id, now.Reason)
			}
		}
		last := after[len(after)-1]
		if last.Event != audit.UserForgotten || last.By != "ops" || last.UserKey != tombstone.Key() ||
			!strings.HasPrefix(last.Reason, "erasure request 42 from "+r.Tombstone+" (3 flows, 2 credentials, 1 sessions") {
			t.Errorf("the last event is %+v; want the forgetting, by ops, about the tombstone", last)
		}

		// Bob's data is as it was: his keys, his flows, his credentials, his events.
		if got := f.mentions(bob); !slices.Equal(got, bobsBefore) {
			t.Errorf("bob's keys were %q and are %q", bobsBefore, got)
		}
		if names, err := f.creds.Names(ctx, bob); err != nil || len(names) != 2 {
			t.Errorf("bob's credentials: %q, %v", names, err)
		}
		page, err := f.flows.Index().List(ctx, flow.ListQuery{Filter: flow.Filter{UserKey: bob.Key()}, Limit: 10})
		if err != nil || len(page.Elicitations) != 3 {
			t.Errorf("bob's flows: %d, %v", len(page.Elicitations), err)
		}
		for _, e := range after {
			if e.UserKey == bob.Key() && (e.User == nil || e.User.Subject != bob.Subject) {
				t.Errorf("an event about bob lost his identity: %+v", e)
			}
		}
		if len(after) != len(before)+1+2 { // the forgetting, and the two credentials' deletions
			t.Errorf("%d events after, %d before: want every one kept, the deletions and the forgetting added", len(after), len(before))
		}

		// Again: nothing more to forget, and nothing fails.
		again, err := f.forget.Forget(ctx, alice, "ops", "erasure request 42, checked")
		if err != nil || again.Flows+again.Credentials+again.Sessions+again.Keys+again.AuditEvents != 0 {
			t.Errorf("forgetting again: %+v, %v; want nothing erased", again, err)
		}
	})
}
