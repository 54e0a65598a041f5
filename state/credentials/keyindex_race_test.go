package credentials_test

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/internal/redistest"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/credentials"
	"github.com/urlflow/urlflow/state/vault"
)

// A writer that puts back a credential read before a reseal (the keeper's ErrReconnect path
// replaces the credential it read) can land between the reseal's read and its update of
// the key index. Found by review: the index then forgot the old key while the credential
// still needed it, and urlflow would have started without it. Every removal from the index
// now reads the credential again and adds it back under the key it finds.

// staleWriteHook runs once, just before the first transaction that removes from the key
// index (reseal's settle), a writer that puts back a document read before the reseal.
type staleWriteHook struct {
	fired atomic.Bool
	write func()
}

func (h *staleWriteHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, n, a string) (net.Conn, error) { return next(ctx, n, a) }
}
func (h *staleWriteHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *staleWriteHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if c.Name() == "srem" && strings.Contains(c.String(), "{keyring}") && !h.fired.Swap(true) {
				h.write()
			}
		}
		return next(ctx, cmds)
	}
}

func TestAStaleWriteDuringAResealKeepsItsKeyInTheIndex(t *testing.T) {
	ctx := context.Background()
	b := redistest.StartEmbedded(t)
	other := b.Client.(*redis.Client)
	opts := other.Options()
	rdb := redis.NewClient(opts)
	defer rdb.Close()

	oldEntry, newEntry := vault.GenerateKeyRing("old"), vault.GenerateKeyRing("new")
	oldRing, _ := vault.ParseKeyRing(oldEntry)
	newRing, _ := vault.ParseKeyRing(newEntry + "," + oldEntry)
	user := state.User{Issuer: "https://issuer.example", Subject: "alice"}
	sealed, err := vault.NewVault(oldRing).Seal(user, "gh", state.NewSecret("tok"))
	if err != nil {
		t.Fatal(err)
	}
	c := &credentials.Credential{Name: "gh", Kind: state.KindOAuth, StoredAt: time.Now().UTC(), Sealed: sealed}
	doc, _ := json.Marshal(c)
	key := credentials.Key(user.Key(), "gh")
	other.Set(ctx, key, doc, 0)
	credentials.NoteSealing(ctx, other, user.Key(), c)
	credentials.Settle(ctx, other, user.Key(), "gh")

	// The writer: keeper's ErrReconnect path, Replace with the credential it read before
	// the reseal (NoteSealing, SETXX, Settle), on another connection.
	hook := &staleWriteHook{write: func() {
		c.NeedsReconnect = true
		stale, _ := json.Marshal(c)
		credentials.NoteSealing(ctx, other, user.Key(), c)
		other.SetXX(ctx, key, stale, 0)
		credentials.Settle(ctx, other, user.Key(), "gh")
	}}
	rdb.AddHook(hook)
	store := credentials.NewStore(rdb, credentials.Options{})
	if _, err := store.Reseal(ctx, vault.NewVault(newRing), credentials.ResealOptions{}); err != nil {
		t.Fatal(err)
	}
	var now credentials.Credential
	raw, _ := other.Get(ctx, key).Bytes()
	json.Unmarshal(raw, &now)
	counts, _ := store.KeyCounts(ctx)
	onlyNew, _ := vault.ParseKeyRing(newEntry)
	if !hook.fired.Load() || now.Sealed.KeyID != "old" {
		t.Fatalf("the stale write did not happen as arranged (fired %v, credential under %q)", hook.fired.Load(), now.Sealed.KeyID)
	}
	if err := store.CheckKeys(ctx, onlyNew); err == nil {
		t.Errorf("a ring without \"old\" passes the start check although the credential needs it; index %+v", counts.Keys)
	}
}
