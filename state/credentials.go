package state

import (
	"context"
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
	Sealed        Sealed    `json:"sealed"`
}

func (s *Store) queueCredential(ctx context.Context, p redis.Pipeliner, user User, c *Credential) error {
	doc, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("encode credential %s: %w", c.Name, err)
	}
	uk := user.Key()
	p.Set(ctx, credentialKey(uk, c.Name), doc, 0)
	p.SAdd(ctx, credentialSetKey(uk), c.Name)
	return nil
}

// Credential returns user's credential name, or ErrNotFound.
func (s *Store) Credential(ctx context.Context, user User, name string) (*Credential, error) {
	doc, err := s.rdb.Get(ctx, credentialKey(user.Key(), name)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read credential %s: %w", name, err)
	}
	var c Credential
	if err := json.Unmarshal(doc, &c); err != nil {
		return nil, fmt.Errorf("decode credential %s: %w", name, err)
	}
	return &c, nil
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

// DeleteCredential removes user's credential name. It reports whether there was one.
func (s *Store) DeleteCredential(ctx context.Context, user User, name string) (bool, error) {
	uk := user.Key()
	var del *redis.IntCmd
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		del = p.Del(ctx, credentialKey(uk, name))
		p.SRem(ctx, credentialSetKey(uk), name)
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("delete credential %s: %w", name, err)
	}
	return del.Val() > 0, nil
}
