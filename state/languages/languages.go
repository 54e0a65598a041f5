// Package languages keeps the language each user last read urlflow's pages in, so that the
// words of MCP results, which the user reads in their client, come in the same language.
//
// The one idea to hold: a language costs no round trip on the hot path. Each replica
// remembers for a minute what it wrote and read (Cached), so that the pages write a user's
// language once per change and the MCP server reads it once a minute per user; another
// replica's change reaches it within that minute.
package languages

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/internal/expiring"
	"github.com/urlflow/urlflow/state"
)

// Kept is how long Redis keeps a user's language after the pages last wrote it.
const Kept = 400 * 24 * time.Hour

// Cached is how long a replica trusts what it wrote or read of a user's language.
const Cached = time.Minute

// cacheSize bounds the replica's memory of languages (one entry per user).
const cacheSize = 10_000

// Store keeps users' languages in Redis, each in its user's slot (forgetting a user
// deletes it with the user's other keys).
type Store struct {
	rdb redis.UniversalClient
	now func() time.Time

	mu   sync.Mutex
	seen *expiring.Map[string, string] // user key → language, "" for none
}

// New returns a Store on rdb.
func New(rdb redis.UniversalClient) *Store {
	return &Store{rdb: rdb, now: time.Now, seen: expiring.New[string, string](cacheSize)}
}

func key(u state.User) string { return state.UserTag(u.Key()) + "lang" }

// Remember keeps lang (a BCP 47 tag) as the language u last read the pages in. It writes
// only when this replica did not already write or read lang for u in the last minute.
func (s *Store) Remember(ctx context.Context, u state.User, lang string) error {
	if known, ok := s.cached(u); ok && known == lang {
		return nil
	}
	if err := s.rdb.Set(ctx, key(u), lang, Kept).Err(); err != nil {
		return fmt.Errorf("remember the language of a user: %w", err)
	}
	s.cache(u, lang)
	return nil
}

// Of returns the language u last read the pages in, "" when u never did (or not in the
// last Kept).
func (s *Store) Of(ctx context.Context, u state.User) (string, error) {
	if known, ok := s.cached(u); ok {
		return known, nil
	}
	lang, err := s.rdb.Get(ctx, key(u)).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return "", fmt.Errorf("read the language of a user: %w", err)
	}
	s.cache(u, lang)
	return lang, nil
}

func (s *Store) cached(u state.User) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen.Get(u.Key(), s.now())
}

func (s *Store) cache(u state.User, lang string) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen.Set(u.Key(), lang, now.Add(Cached), now)
}
