package flow

import (
	"fmt"
	"testing"

	"github.com/urlflow/urlflow/internal/redistest"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/credentials"
)

// The benchmarks of this file measure the Redis work of one elicitation on both backends:
//
//	go test -run='^$' -bench=. -benchmem ./state/flow
//
// docs/performance.md records a run and what it means.

// forEachBackendBench runs bench once against the embedded Redis and once against a real
// redis-server, as the sub-benchmarks "embedded" and "redis-server".
func forEachBackendBench(b *testing.B, bench func(b *testing.B, s *Store, creds *credentials.Store)) {
	b.Run("embedded", func(b *testing.B) {
		be := redistest.StartEmbedded(b)
		bench(b, newStore(be, nil), credentialsOn(be))
	})
	b.Run("redis-server", func(b *testing.B) {
		srv := redistest.Start(b)
		be := &redistest.Backend{Client: srv.Client(b), Server: srv}
		bench(b, newStore(be, nil), credentialsOn(be))
	})
}

// BenchmarkCreate measures creating an elicitation: what every credential tool does when
// the credential is missing.
func BenchmarkCreate(b *testing.B) {
	forEachBackendBench(b, func(b *testing.B, s *Store, creds *credentials.Store) {
		for i := 0; b.Loop(); i++ {
			mustCreate(b, s, newElicitation(state.User{Issuer: "https://id.example", Subject: fmt.Sprint("user-", i)}))
		}
	})
}

// BenchmarkSecretFlow measures the state work of one whole successful secret flow:
// create, the client's accept, the browser opening the page, and the verified secret
// stored with its elicitation completing, in one transaction.
func BenchmarkSecretFlow(b *testing.B) {
	v := testVault(b)
	forEachBackendBench(b, func(b *testing.B, s *Store, creds *credentials.Store) {
		for i := 0; b.Loop(); i++ {
			user := state.User{Issuer: "https://id.example", Subject: fmt.Sprint("user-", i)}
			e := mustCreate(b, s, newElicitation(user))
			mustApply(b, s, e.ID, ClientAccept, state.ActorClient)
			mustApply(b, s, e.ID, BrowserOpen, state.ActorUser)
			c := mustApply(b, s, e.ID, Verified, state.ActorUser, WithCredential(vaultCredential(b, v, user, e.ID, "s3cret", s.Now())))
			if c.To != Complete {
				b.Fatalf("flow ended %s, want complete", c.To)
			}
		}
	})
}

// BenchmarkGet measures reading an elicitation by its ID, as every page, status call and
// recovery API request does.
func BenchmarkGet(b *testing.B) {
	forEachBackendBench(b, func(b *testing.B, s *Store, creds *credentials.Store) {
		e := mustCreate(b, s, newElicitation(alice))
		for b.Loop() {
			mustGet(b, s, e.ID)
		}
	})
}

// BenchmarkEventThatChangesNothing measures a late event on an ended elicitation: it is
// recorded in the history and nothing else changes.
func BenchmarkEventThatChangesNothing(b *testing.B) {
	forEachBackendBench(b, func(b *testing.B, s *Store, creds *credentials.Store) {
		e := mustCreate(b, s, newElicitation(alice))
		mustApply(b, s, e.ID, CancelRequested, state.ActorUser)
		for b.Loop() {
			if c := mustApply(b, s, e.ID, ClientAccept, state.ActorClient); c.Changed() {
				b.Fatalf("a late accept changed %s to %s", c.From, c.To)
			}
		}
	})
}

// BenchmarkCredential measures reading and opening a stored credential: the state work of
// every call_api.
func BenchmarkCredential(b *testing.B) {
	v := testVault(b)
	forEachBackendBench(b, func(b *testing.B, s *Store, creds *credentials.Store) {
		e := mustCreate(b, s, newElicitation(alice))
		mustApply(b, s, e.ID, BrowserOpen, state.ActorUser)
		mustApply(b, s, e.ID, Verified, state.ActorUser, WithCredential(vaultCredential(b, v, alice, e.ID, "s3cret", s.Now())))
		for b.Loop() {
			c, err := creds.Get(b.Context(), alice, "demo_api_key")
			if err != nil {
				b.Fatal(err)
			}
			if secret, err := v.Open(alice, c.Name, c.Sealed); err != nil || secret.Reveal() != "s3cret" {
				b.Fatalf("open: %v", err)
			}
		}
	})
}

// BenchmarkVault measures sealing and opening a credential without Redis.
func BenchmarkVault(b *testing.B) {
	v := testVault(b)
	secret := state.NewSecret("demo_0123456789abcdef0123456789abcdef")
	b.Run("seal", func(b *testing.B) {
		for b.Loop() {
			if _, err := v.Seal(alice, "demo_api_key", secret); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("open", func(b *testing.B) {
		sealed, err := v.Seal(alice, "demo_api_key", secret)
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := v.Open(alice, "demo_api_key", sealed); err != nil {
				b.Fatal(err)
			}
		}
	})
}
