package credentials

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/vault"
)

// The key index says which key of the ring protects each stored credential, so that
// `urlflow keys status` can count them and a replica can refuse to start without a key that
// something still needs, without scanning. It is one set per key ID of the Redis keys of
// the credentials that key wraps, plus the set of key IDs, all in one hash tag so that one
// transaction updates them on a Cluster.
//
// A credential lives in its user's slot, the index in its own, so the two cannot change in
// one atomic step. The index is kept conservative instead: a credential is added under its
// new key ID before it is written (noteSealing) and removed from the others only after
// (settle), and every removal reads the credential again and adds it back under the key it
// finds (reassert). A crash in between leaves an extra entry (a key that looks needed), never
// a missing one. A full pass (Reseal, Recount) makes the index exact again.

const keyIndexTag = state.KeyPrefix + "{keyring}:"

// keyIDsKey names the set of the key IDs the index has seen.
const keyIDsKey = keyIndexTag + "kids"

// countedKey holds when a full pass last made the index exact (RFC 3339).
const countedKey = keyIndexTag + "counted"

// sealedKey names the set of the Redis keys of the credentials that key kid wraps.
func sealedKey(kid string) string { return keyIndexTag + "sealed:" + kid }

// noteSealing adds the credential at credKey to the index under kid, before it is written
// sealed under kid.
func noteSealing(ctx context.Context, rdb redis.UniversalClient, credKey, kid string) error {
	_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.SAdd(ctx, keyIDsKey, kid)
		p.SAdd(ctx, sealedKey(kid), credKey)
		return nil
	})
	if err != nil {
		return fmt.Errorf("index the key of a credential: %w", err)
	}
	return nil
}

// QueueIndexing queues in p the key index's entry of the credential c of the user whose key
// is userKey, under the key that seals it. The step of package flow that stores c runs it
// with its write: in its script on one server or behind Sentinel (one atomic step, no round
// trip of its own), right after it on a Cluster, where the index is in a slot of its own
// (an entry lost to a crash in between is found again by the next reseal or recount). An
// entry under the key c replaced stays until then: the index may say a key protects more
// than it does, never less.
func QueueIndexing(ctx context.Context, p redis.Pipeliner, userKey string, c *Credential) {
	p.SAdd(ctx, keyIDsKey, c.Sealed.KeyID)
	p.SAdd(ctx, sealedKey(c.Sealed.KeyID), Key(userKey, c.Name))
}

// NoteSealing adds user's credential c to the key index under the key that seals it. The
// writers outside package flow's steps (a refreshed token, a replaced credential) call it
// before they write, and Settle after.
func NoteSealing(ctx context.Context, rdb redis.UniversalClient, userKey string, c *Credential) error {
	return noteSealing(ctx, rdb, Key(userKey, c.Name), c.Sealed.KeyID)
}

// Settle makes the key index say which key protects the credential name of the user whose
// key is userKey as it stands now (none once it is deleted). It is called after every
// write of a credential; an error is only logged by callers, since the write is done.
func Settle(ctx context.Context, rdb redis.UniversalClient, userKey, name string) error {
	credKey := Key(userKey, name)
	kid, err := currentKeyID(ctx, rdb, credKey)
	if err != nil {
		return err
	}
	return settle(ctx, rdb, map[string]string{credKey: kid})
}

// currentKeyID returns the ID of the key that wraps the credential at credKey, or "" when
// there is none.
func currentKeyID(ctx context.Context, rdb redis.UniversalClient, credKey string) (string, error) {
	doc, err := rdb.Get(ctx, credKey).Bytes()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read credential for the key index: %w", err)
	}
	return sealedKeyID(doc), nil
}

// sealedKeyID returns the key ID of a credential's document, or "" if it has none.
func sealedKeyID(doc []byte) string {
	var c struct {
		Sealed vault.Sealed `json:"sealed"`
	}
	if json.Unmarshal(doc, &c) != nil {
		return ""
	}
	return c.Sealed.KeyID
}

// settle makes the index hold each credential key of now under its key ID only ("": under
// none), in one transaction.
func settle(ctx context.Context, rdb redis.UniversalClient, now map[string]string) error {
	if len(now) == 0 {
		return nil
	}
	kids, err := rdb.SMembers(ctx, keyIDsKey).Result()
	if err != nil {
		return fmt.Errorf("read the key index: %w", err)
	}
	_, err = rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for credKey, kid := range now {
			for _, other := range kids {
				if other != kid {
					p.SRem(ctx, sealedKey(other), credKey)
				}
			}
			if kid != "" {
				p.SAdd(ctx, keyIDsKey, kid)
				p.SAdd(ctx, sealedKey(kid), credKey)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("update the key index: %w", err)
	}
	return reassert(ctx, rdb, slices.Collect(maps.Keys(now)))
}

// reassert adds each credential of credKeys to the index under the key that wraps it now,
// read again: what every removal from the index does after it. A removal acts on a key ID
// read before, and a write under another key may have landed since; adding is always safe.
// A write that lands after this read is followed by its own Settle, which reads it.
func reassert(ctx context.Context, rdb redis.UniversalClient, credKeys []string) error {
	cmds := make([]*redis.StringCmd, len(credKeys))
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range credKeys {
			cmds[i] = p.Get(ctx, k)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("read credentials for the key index: %w", err)
	}
	_, err = rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range credKeys {
			if kid := sealedKeyID([]byte(cmds[i].Val())); kid != "" {
				p.SAdd(ctx, keyIDsKey, kid)
				p.SAdd(ctx, sealedKey(kid), k)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("update the key index: %w", err)
	}
	return nil
}

// KeyUse says how many stored credentials (secrets and sealed OAuth tokens) one key still
// protects, by the key index.
type KeyUse struct {
	KeyID string `json:"kid"`
	Items int64  `json:"items"`
}

// KeyCounts is what the key index says.
type KeyCounts struct {
	// Keys are the key IDs the index knows, sorted, with their counts.
	Keys []KeyUse `json:"keys"`
	// CountedAt is when a full pass (Reseal, Recount) last made the index exact; nil if
	// none has run, in which case credentials stored before the index existed (before
	// this version) are not counted.
	CountedAt *time.Time `json:"countedAt,omitempty"`
}

// Count returns the count of kid (0 when the index does not know it).
func (k KeyCounts) Count(kid string) int64 {
	for _, u := range k.Keys {
		if u.KeyID == kid {
			return u.Items
		}
	}
	return 0
}

// KeyCounts returns how many stored credentials each key protects, from the key index:
// a few reads, no scan.
func (s *Store) KeyCounts(ctx context.Context) (KeyCounts, error) {
	var out KeyCounts
	kids, err := s.rdb.SMembers(ctx, keyIDsKey).Result()
	if err != nil {
		return out, fmt.Errorf("read the key index: %w", err)
	}
	slices.Sort(kids)
	cards := make([]*redis.IntCmd, len(kids))
	var counted *redis.StringCmd
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, kid := range kids {
			cards[i] = p.SCard(ctx, sealedKey(kid))
		}
		counted = p.Get(ctx, countedKey)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return out, fmt.Errorf("read the key index: %w", err)
	}
	for i, kid := range kids {
		out.Keys = append(out.Keys, KeyUse{KeyID: kid, Items: cards[i].Val()})
	}
	if t, err := time.Parse(time.RFC3339Nano, counted.Val()); err == nil {
		out.CountedAt = &t
	}
	return out, nil
}

// ErrKeyMissing is returned by CheckKeys when a stored credential needs a key that is not
// in the ring.
var ErrKeyMissing = errors.New("stored credentials need a key that is not in the key ring")

// CheckKeys returns ErrKeyMissing, naming each key ID and how many credentials need it,
// when the key index says that stored credentials need a key that ring does not hold.
func (s *Store) CheckKeys(ctx context.Context, ring *vault.KeyRing) error {
	counts, err := s.KeyCounts(ctx)
	if err != nil {
		return err
	}
	return counts.Missing(ring)
}

// Missing is CheckKeys on counts already read.
func (c KeyCounts) Missing(ring *vault.KeyRing) error {
	var missing []string
	for _, u := range c.Keys {
		if u.Items > 0 && !ring.Has(u.KeyID) {
			missing = append(missing, fmt.Sprintf("key %q (%d)", u.KeyID, u.Items))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s; put it back in URLFLOW_KEYS (verify-only, at the end), or run `urlflow keys reseal` with it in the ring first (docs/production.md#keys-and-rotation)",
		ErrKeyMissing, strings.Join(missing, ", "))
}
