package state

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
)

// Credential is a stored secret or grant of one user, sealed by the Vault. Only the
// metadata is ever shown; the value stays sealed until a tool uses it.
type Credential struct {
	Name          string    `json:"name"`
	Kind          Kind      `json:"kind"`
	ElicitationID string    `json:"elicitationId"`
	StoredAt      time.Time `json:"storedAt"`
	// VerifiedAt is when the secret passed its slot's check with the API; nil when the slot
	// has no check.
	VerifiedAt *time.Time `json:"verifiedAt,omitempty"`
	// For a third-party connection (kind oauth): the account, the granted scopes, when the
	// tokens were last refreshed, and whether the provider stopped honouring them.
	Account        string     `json:"account,omitempty"`
	Scopes         []string   `json:"scopes,omitempty"`
	RefreshedAt    *time.Time `json:"refreshedAt,omitempty"`
	NeedsReconnect bool       `json:"needsReconnect,omitempty"`
	Sealed         Sealed     `json:"sealed"`
}

// Connection describes a stored credential to its owner: never its value.
type Connection struct {
	Name           string     `json:"name"`
	Kind           Kind       `json:"kind"`
	StoredAt       time.Time  `json:"storedAt"`
	VerifiedAt     *time.Time `json:"verifiedAt,omitempty"`
	LastUsedAt     *time.Time `json:"lastUsedAt,omitempty"`
	Account        string     `json:"account,omitempty"`
	Scopes         []string   `json:"scopes,omitempty"`
	RefreshedAt    *time.Time `json:"refreshedAt,omitempty"`
	NeedsReconnect bool       `json:"needsReconnect,omitempty"`
}

// AuditEntry is one line of a user's credential audit log.
type AuditEntry struct {
	At     time.Time `json:"at"`
	Event  string    `json:"event"`
	Name   string    `json:"name"`
	Actor  Actor     `json:"actor"`
	Reason string    `json:"reason,omitempty"`
}

// Audit events.
const (
	AuditStored   = "credential_stored"
	AuditReplaced = "credential_replaced"
	AuditDeleted  = "credential_deleted"
)

// auditLength bounds a user's audit log; older entries fall off.
const auditLength = 1000

func (s *Store) queueAudit(ctx context.Context, p redis.Pipeliner, user User, entry AuditEntry) error {
	line, err := json.Marshal(entry)
	if err != nil {
		return fmt.Errorf("encode audit entry: %w", err)
	}
	key := auditKey(user.Key())
	p.RPush(ctx, key, line)
	p.LTrim(ctx, key, -auditLength, -1)
	return nil
}

// queueCredential queues the writes that store c for user, with its audit entry. replaced
// says whether it replaces a credential of the same name.
func (s *Store) queueCredential(ctx context.Context, p redis.Pipeliner, user User, c *Credential, replaced bool) error {
	doc, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("encode credential %s: %w", c.Name, err)
	}
	uk := user.Key()
	p.Set(ctx, credentialKey(uk, c.Name), doc, 0)
	p.SAdd(ctx, credentialSetKey(uk), c.Name)
	p.HDel(ctx, credentialUseKey(uk), c.Name)
	event := AuditStored
	if replaced {
		event = AuditReplaced
	}
	return s.queueAudit(ctx, p, user, AuditEntry{At: c.StoredAt, Event: event, Name: c.Name, Actor: ActorUser,
		Reason: "entered through elicitation " + c.ElicitationID})
}

// Credential returns user's credential name, or ErrNotFound.
func (s *Store) Credential(ctx context.Context, user User, name string) (*Credential, error) {
	return readCredential(ctx, s.rdb, user, name)
}

func readCredential(ctx context.Context, c redis.Cmdable, user User, name string) (*Credential, error) {
	var cred Credential
	if err := decodeDoc(c.Get(ctx, credentialKey(user.Key(), name)), "credential "+name, &cred); err != nil {
		return nil, err
	}
	return &cred, nil
}

// Credentials returns the names of user's credentials, sorted.
func (s *Store) Credentials(ctx context.Context, user User) ([]string, error) {
	names, err := s.rdb.SMembers(ctx, credentialSetKey(user.Key())).Result()
	if err != nil {
		return nil, fmt.Errorf("list credentials: %w", err)
	}
	slices.Sort(names)
	return names, nil
}

// Connections describes user's credentials, sorted by name: when each was stored,
// verified and last used. It never reads a value.
func (s *Store) Connections(ctx context.Context, user User) ([]Connection, error) {
	names, err := s.Credentials(ctx, user)
	if err != nil {
		return nil, err
	}
	used, err := s.rdb.HGetAll(ctx, credentialUseKey(user.Key())).Result()
	if err != nil {
		return nil, fmt.Errorf("read credential use: %w", err)
	}
	out := make([]Connection, 0, len(names))
	for _, name := range names {
		c, err := s.Credential(ctx, user, name)
		if errors.Is(err, ErrNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, err
		}
		conn := Connection{Name: c.Name, Kind: c.Kind, StoredAt: c.StoredAt, VerifiedAt: c.VerifiedAt,
			Account: c.Account, Scopes: c.Scopes, RefreshedAt: c.RefreshedAt, NeedsReconnect: c.NeedsReconnect}
		if t, err := time.Parse(time.RFC3339Nano, used[name]); err == nil {
			conn.LastUsedAt = &t
		}
		out = append(out, conn)
	}
	return out, nil
}

// TouchCredential records that user's credential name was used now.
func (s *Store) TouchCredential(ctx context.Context, user User, name string) error {
	err := s.rdb.HSet(ctx, credentialUseKey(user.Key()), name, s.now().UTC().Format(time.RFC3339Nano)).Err()
	if err != nil {
		return fmt.Errorf("record use of credential %s: %w", name, err)
	}
	return nil
}

// DeleteCredential removes user's credential name and records it in the audit log with
// actor and reason. It reports whether there was one.
func (s *Store) DeleteCredential(ctx context.Context, user User, name string, actor Actor, reason string) (bool, error) {
	uk := user.Key()
	var del *redis.IntCmd
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		del = p.Del(ctx, credentialKey(uk, name))
		p.SRem(ctx, credentialSetKey(uk), name)
		p.HDel(ctx, credentialUseKey(uk), name)
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("delete credential %s: %w", name, err)
	}
	if del.Val() == 0 {
		return false, nil
	}
	_, err = s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		return s.queueAudit(ctx, p, user, AuditEntry{At: s.now().UTC(), Event: AuditDeleted, Name: name, Actor: actor, Reason: reason})
	})
	if err != nil {
		return true, fmt.Errorf("audit deletion of credential %s: %w", name, err)
	}
	s.log.InfoContext(ctx, "credential deleted", "user", uk, "credential", name, "actor", actor)
	return true, nil
}

// AuditLog returns user's credential audit log, oldest first.
func (s *Store) AuditLog(ctx context.Context, user User) ([]AuditEntry, error) {
	lines, err := s.rdb.LRange(ctx, auditKey(user.Key()), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("read audit log: %w", err)
	}
	out := make([]AuditEntry, 0, len(lines))
	for _, l := range lines {
		var e AuditEntry
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			return nil, fmt.Errorf("decode audit log: %w", err)
		}
		out = append(out, e)
	}
	return out, nil
}

// ReplaceCredential stores c in place of user's credential of the same name (a refreshed
// token), keeping its audit history. It returns ErrNotFound if the credential was deleted
// meanwhile: a disconnect is not undone by a refresh that raced it.
func (s *Store) ReplaceCredential(ctx context.Context, user User, c *Credential) error {
	doc, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("encode credential %s: %w", c.Name, err)
	}
	ok, err := s.rdb.SetXX(ctx, credentialKey(user.Key(), c.Name), doc, 0).Result()
	if err != nil {
		return fmt.Errorf("replace credential %s: %w", c.Name, err)
	}
	if !ok {
		return ErrNotFound
	}
	return nil
}

// TryLock takes the lock on user's credential name for ttl, if nobody holds it. It returns
// the holder's token for Unlock, and false when someone else holds it.
func (s *Store) TryLock(ctx context.Context, user User, name string, ttl time.Duration) (string, bool, error) {
	token := rand.Text()
	ok, err := s.rdb.SetNX(ctx, lockKey(user.Key(), name), token, ttl).Result()
	if err != nil {
		return "", false, fmt.Errorf("lock credential %s: %w", name, err)
	}
	return token, ok, nil
}

// unlockScript deletes the lock only if it still holds the caller's token, so that a holder
// whose lock expired cannot free someone else's.
var unlockScript = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`)

// Unlock frees the lock on user's credential name taken with token.
func (s *Store) Unlock(ctx context.Context, user User, name, token string) error {
	if err := unlockScript.Run(ctx, s.rdb, []string{lockKey(user.Key(), name)}, token).Err(); err != nil {
		return fmt.Errorf("unlock credential %s: %w", name, err)
	}
	return nil
}
