package credentials

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/vault"
)

// ResealProgress counts what a pass over the stored credentials has done so far.
type ResealProgress struct {
	// Seen credentials, of which Resealed were rewrapped under the active key, Current were
	// under it already, Gone were deleted meanwhile, and Failed did not open (their key is
	// not in the ring, or the document is damaged: they are left as they are).
	Seen, Resealed, Current, Gone, Failed int
	// ToReseal is how many credentials the key index said were under other keys when the
	// pass started: an estimate of Resealed at the end (0 if the index was empty).
	ToReseal int64
	// FailedKeys are the key IDs of the credentials that did not open.
	FailedKeys []string
}

// ResealOptions configure Reseal and Recount.
type ResealOptions struct {
	// Batch is how many credentials are read and written per round trip; 500 if zero.
	Batch int
	// Progress, if not nil, is called after each batch.
	Progress func(ResealProgress)
}

// casScript replaces the credential at KEYS[1] only if it still holds ARGV[1], the
// document that was read, so that a write made meanwhile (a refresh, a new value, a lock,
// a delete) is never overwritten. It answers 1 if it wrote, 0 if not.
var casScript = redis.NewScript(`
if redis.call("GET", KEYS[1]) == ARGV[1] then
  redis.call("SET", KEYS[1], ARGV[2], "KEEPTTL")
  return 1
end
return 0`)

// credentialKeyPattern matches the Redis keys of credentials; parseCredentialKey checks
// each match.
const credentialKeyPattern = state.KeyPrefix + "{u:*}:c:*"

// parseCredentialKey returns the user key and the name of the credential at key.
func parseCredentialKey(key string) (userKey, name string, ok bool) {
	rest, ok := strings.CutPrefix(key, state.KeyPrefix+"{u:")
	if !ok {
		return "", "", false
	}
	userKey, name, ok = strings.Cut(rest, "}:c:")
	if !ok || userKey == "" || name == "" || strings.ContainsAny(userKey, "{}:") {
		return "", "", false
	}
	return userKey, name, true
}

// maxResealAttempts bounds how often one credential that keeps changing is tried.
const maxResealAttempts = 5

// Reseal rewraps every stored credential (secrets and sealed OAuth tokens) that is not
// under v's active key with the active key, and makes the key index exact. Each credential
// is replaced by a compare-and-set on the document that was read, so a concurrent write
// wins and the credential is read again; one under the active key already is left alone.
// It is safe to interrupt at any point and to run again: every credential is, at every
// moment, whole under either key. Values are never decrypted: only the data key is
// unwrapped and wrapped again.
//
// Run it once every replica seals with the new active key, or a replica still on the old
// one may seal a refreshed token under the old key again (Recount or another Reseal
// shows it). It returns an error naming the key IDs of credentials that did not open.
func (s *Store) Reseal(ctx context.Context, v *vault.Vault, opts ResealOptions) (ResealProgress, error) {
	return s.pass(ctx, v, opts)
}

// Recount makes the key index exact with one pass over the stored credentials, changing
// none of them: for a deployment that stored credentials before the index existed.
func (s *Store) Recount(ctx context.Context, opts ResealOptions) (ResealProgress, error) {
	return s.pass(ctx, nil, opts)
}

// pass scans every credential, rewraps those not under v's active key when v is not nil,
// settles the index for each, then removes from the index what no longer exists.
func (s *Store) pass(ctx context.Context, v *vault.Vault, opts ResealOptions) (ResealProgress, error) {
	if opts.Batch <= 0 {
		opts.Batch = 500
	}
	var p ResealProgress
	if v != nil {
		if counts, err := s.KeyCounts(ctx); err == nil {
			for _, u := range counts.Keys {
				if u.KeyID != v.ActiveID() {
					p.ToReseal += u.Items
				}
			}
		}
	}
	report := func() {
		if opts.Progress != nil {
			opts.Progress(p)
		}
	}
	batch := make([]string, 0, opts.Batch)
	flush := func() error {
		err := s.resealBatch(ctx, v, batch, &p)
		batch = batch[:0]
		report()
		return err
	}
	err := state.ScanKeys(ctx, s.rdb, credentialKeyPattern, func(key string) error {
		if _, _, ok := parseCredentialKey(key); !ok {
			return nil
		}
		batch = append(batch, key)
		if len(batch) < opts.Batch {
			return nil
		}
		return flush()
	})
	if err == nil && len(batch) > 0 {
		err = flush()
	}
	if err == nil {
		err = s.pruneIndex(ctx, opts.Batch)
	}
	if err == nil {
		err = s.rdb.Set(ctx, countedKey, time.Now().UTC().Format(time.RFC3339Nano), 0).Err()
	}
	if err != nil {
		return p, fmt.Errorf("reseal credentials: %w", err)
	}
	if p.Failed > 0 {
		return p, fmt.Errorf("reseal credentials: %d did not open (keys %s): %w", p.Failed, strings.Join(p.FailedKeys, ", "), vault.ErrUnopenable)
	}
	return p, nil
}

// resealItem is one credential of a batch as read.
type resealItem struct {
	key, userKey, name string
	doc                string // "" when it is gone
	resealed           string // the new document, when it is to be written
	kid                string // the key ID that wraps it now, or "" when gone
	oldKID             string
}

// resealBatch reads the credentials at keys, rewraps those that need it with one
// compare-and-set each, retrying those that changed meanwhile, and settles the index.
func (s *Store) resealBatch(ctx context.Context, v *vault.Vault, keys []string, p *ResealProgress) error {
	items := make([]*resealItem, len(keys))
	for i, k := range keys {
		uk, name, _ := parseCredentialKey(k)
		items[i] = &resealItem{key: k, userKey: uk, name: name}
	}
	pending := items
	for attempt := 0; len(pending) > 0; attempt++ {
		if attempt == maxResealAttempts {
			return fmt.Errorf("credential %s keeps changing", pending[0].name)
		}
		if err := s.readItems(ctx, pending); err != nil {
			return err
		}
		var write []*resealItem
		for _, it := range pending {
			if s.prepare(v, it, p) {
				write = append(write, it)
			}
		}
		if len(write) == 0 {
			break
		}
		// Indexed under the active key before it is written, as everywhere (keyindex.go).
		_, err := s.rdb.TxPipelined(ctx, func(pl redis.Pipeliner) error {
			pl.SAdd(ctx, keyIDsKey, v.ActiveID())
			for _, it := range write {
				pl.SAdd(ctx, sealedKey(v.ActiveID()), it.key)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("index the active key: %w", err)
		}
		cmds := make([]*redis.Cmd, len(write))
		_, err = s.rdb.Pipelined(ctx, func(pl redis.Pipeliner) error {
			for i, it := range write {
				cmds[i] = casScript.Eval(ctx, pl, []string{it.key}, it.doc, it.resealed)
			}
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			return fmt.Errorf("write resealed credentials: %w", err)
		}
		pending = pending[:0:0]
		for i, it := range write {
			if n, _ := cmds[i].Int(); n == 1 {
				it.kid = v.ActiveID()
				p.Resealed++
				continue
			}
			pending = append(pending, it) // changed since it was read: read it again
		}
	}
	p.Seen += len(items)
	now := make(map[string]string, len(items))
	for _, it := range items {
		if it.kid != "" || it.doc == "" {
			now[it.key] = it.kid
		}
	}
	return settle(ctx, s.rdb, now)
}

// readItems reads the documents of items in one round trip.
func (s *Store) readItems(ctx context.Context, items []*resealItem) error {
	cmds := make([]*redis.StringCmd, len(items))
	_, err := s.rdb.Pipelined(ctx, func(pl redis.Pipeliner) error {
		for i, it := range items {
			cmds[i] = pl.Get(ctx, it.key)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("read credentials: %w", err)
	}
	for i, it := range items {
		it.doc = cmds[i].Val()
		it.kid, it.oldKID, it.resealed = "", "", ""
	}
	return nil
}

// prepare decides what to do with it as read, counting it in p, and reports whether its
// rewrapped document is to be written. Without v (Recount) nothing is.
func (s *Store) prepare(v *vault.Vault, it *resealItem, p *ResealProgress) bool {
	if it.doc == "" {
		p.Gone++
		return false
	}
	var fields map[string]json.RawMessage
	var sealed vault.Sealed
	if json.Unmarshal([]byte(it.doc), &fields) != nil || json.Unmarshal(fields["sealed"], &sealed) != nil || sealed.KeyID == "" {
		s.failed(p, "(damaged)")
		return false
	}
	it.kid = sealed.KeyID
	if v == nil || sealed.KeyID == v.ActiveID() {
		p.Current++
		return false
	}
	rewrapped, err := v.Rewrap(it.userKey, it.name, sealed)
	if err != nil {
		s.failed(p, sealed.KeyID)
		return false
	}
	// Only the sealed value changes; every other field, known to this version or not,
	// stays as it was.
	fields["sealed"], err = json.Marshal(rewrapped)
	if err != nil {
		s.failed(p, sealed.KeyID)
		return false
	}
	doc, err := json.Marshal(fields)
	if err != nil {
		s.failed(p, sealed.KeyID)
		return false
	}
	it.oldKID, it.resealed = sealed.KeyID, string(doc)
	return true
}

func (s *Store) failed(p *ResealProgress, kid string) {
	p.Failed++
	if !slices.Contains(p.FailedKeys, kid) {
		p.FailedKeys = append(p.FailedKeys, kid)
	}
}

// pruneIndex removes from each key ID's set the credentials that are gone or are under
// another key now, and forgets key IDs that protect nothing.
func (s *Store) pruneIndex(ctx context.Context, batch int) error {
	kids, err := s.rdb.SMembers(ctx, keyIDsKey).Result()
	if err != nil {
		return fmt.Errorf("read the key index: %w", err)
	}
	for _, kid := range kids {
		iter := s.rdb.SScan(ctx, sealedKey(kid), 0, "", int64(batch)).Iterator()
		var members []string
		for iter.Next(ctx) {
			members = append(members, iter.Val())
		}
		if err := iter.Err(); err != nil {
			return fmt.Errorf("read the key index: %w", err)
		}
		for start := 0; start < len(members); start += batch {
			chunk := members[start:min(start+batch, len(members))]
			if err := s.pruneMembers(ctx, kid, chunk); err != nil {
				return err
			}
		}
		if err := forgetScript.Run(ctx, s.rdb, []string{keyIDsKey, sealedKey(kid)}, kid).Err(); err != nil {
			return fmt.Errorf("update the key index: %w", err)
		}
	}
	return nil
}

// forgetScript forgets key ID ARGV[1] if its set KEYS[2] is empty, atomically with
// noteSealing's transaction, which adds to both.
var forgetScript = redis.NewScript(`
if redis.call("SCARD", KEYS[2]) == 0 then redis.call("SREM", KEYS[1], ARGV[1]) end
return 0`)

// pruneMembers removes from kid's set those of members that are not under kid now.
func (s *Store) pruneMembers(ctx context.Context, kid string, members []string) error {
	cmds := make([]*redis.StringCmd, len(members))
	_, err := s.rdb.Pipelined(ctx, func(pl redis.Pipeliner) error {
		for i, m := range members {
			if _, _, ok := parseCredentialKey(m); ok {
				cmds[i] = pl.Get(ctx, m)
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("read credentials: %w", err)
	}
	var stale []any
	var reread []string
	for i, m := range members {
		if cmds[i] == nil || cmds[i].Val() == "" || sealedKeyID([]byte(cmds[i].Val())) != kid {
			stale = append(stale, m)
			reread = append(reread, m)
		}
	}
	if len(stale) == 0 {
		return nil
	}
	if err := s.rdb.SRem(ctx, sealedKey(kid), stale...).Err(); err != nil {
		return fmt.Errorf("update the key index: %w", err)
	}
	return reassert(ctx, s.rdb, reread)
}
