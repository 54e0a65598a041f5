package flow

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/state"
)

// Forget deletes every elicitation of user, with its history, and takes them out of the
// deployment-wide indexes (the deadlines, the listing and the owed notifications) and out
// of this replica's copies. It returns the IDs it deleted. keys are the user's keys
// (state.ScanKeys of its tag): the records among them are found there as well as in the
// user's index, so that a record the index missed is deleted too. The user's other keys
// (its running flows' markers, undelivered sets, index) are the caller's to delete with the
// rest of them. Other replicas' copies of a record lapse within seenTTL.
func (s *Store) Forget(ctx context.Context, user state.User, keys []string) ([]string, error) {
	uk := user.Key()
	s.flushIndexes(ctx)            // on a Cluster, this replica's queued index writes first: none may add an entry back
	entries := map[string]string{} // ID → its entry in the listing index, when known
	for _, key := range userIndexKeys(uk) {
		members, err := s.rdb.ZRange(ctx, key, 0, -1).Result()
		if err != nil {
			return nil, fmt.Errorf("read the index of the user's elicitations: %w", err)
		}
		for _, m := range members {
			if entry, ok := memberEntry(key, m); ok {
				entries[entryID(entry)] = entry
			}
		}
	}
	recordPrefix := elicitationKey(uk, "")
	for _, key := range keys {
		if id, ok := strings.CutPrefix(key, recordPrefix); ok && ValidID(id) {
			if _, known := entries[id]; !known {
				entries[id] = ""
			}
		}
	}
	ids := make([]string, 0, len(entries))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for id, entry := range entries {
			ids = append(ids, id)
			p.Del(ctx, elicitationKey(uk, id), historyKey(uk, id), packedHistoryKey(uk, id))
			p.ZRem(ctx, deadlinesKey, id)
			p.ZRem(ctx, owedKey(bucketOf(id)), id)
			if entry != "" {
				p.ZRem(ctx, flowsKey(bucketOf(id)), entry)
			}
			if legacyIDPattern.MatchString(id) {
				p.Del(ctx, indexKey(id))
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("delete the user's elicitations: %w", err)
	}
	s.mu.Lock()
	for _, id := range ids {
		s.seen.Delete(id)
		s.owners.Delete(id)
	}
	s.mu.Unlock()
	return ids, nil
}
