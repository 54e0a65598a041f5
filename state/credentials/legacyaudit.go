package credentials

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/audit"
)

// Before the audit trail, each user had a credential audit log of their own, the list
// {u:KEY}:audit of JSON entries. MoveAuditLogs moves those entries into the trail once.

// legacyEntry is one entry of a user's audit log of an earlier urlflow.
type legacyEntry struct {
	At     time.Time   `json:"at"`
	Event  string      `json:"event"`
	Name   string      `json:"name"`
	Actor  state.Actor `json:"actor"`
	Reason string      `json:"reason,omitempty"`
}

// auditMovedKey marks the users' audit logs as moved (state.Once).
const auditMovedKey = state.KeyPrefix + "audit-logs-moved"

// MoveAuditLogs moves every user's audit log of an earlier urlflow into the audit trail,
// marked migrated, and deletes it; the first replica to start does it, once per
// deployment. It returns how many users' logs this call moved: none when there were none,
// or another replica did it.
func (s *Store) MoveAuditLogs(ctx context.Context) (int, error) {
	if s.audit == nil {
		return 0, nil
	}
	moved := 0
	_, err := state.Once(ctx, s.rdb, auditMovedKey, 10*time.Minute, func(ctx context.Context) error {
		return state.ScanKeys(ctx, s.rdb, state.KeyPrefix+"{u:*}:audit", func(key string) error {
			did, err := s.moveAuditLog(ctx, key)
			if did {
				moved++
			}
			return err
		})
	})
	if err != nil {
		return moved, fmt.Errorf("move audit logs: %w", err)
	}
	return moved, nil
}

// moveAuditLog moves the audit log at key into the trail and deletes it, and reports
// whether key was a user's audit log.
func (s *Store) moveAuditLog(ctx context.Context, key string) (bool, error) {
	userKey, prefixed := strings.CutPrefix(key, state.KeyPrefix+"{u:")
	userKey, suffixed := strings.CutSuffix(userKey, "}:audit")
	if !prefixed || !suffixed {
		return false, nil
	}
	lines, err := s.rdb.LRange(ctx, key, 0, -1).Result()
	if err != nil {
		return false, err
	}
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, line := range lines {
			var e legacyEntry
			if json.Unmarshal([]byte(line), &e) != nil {
				continue
			}
			s.audit.Queue(ctx, p, audit.Event{At: e.At, Event: e.Event, Credential: e.Name, Actor: e.Actor, Reason: e.Reason,
				UserKey: userKey, Migrated: true})
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	return true, s.rdb.Del(ctx, key).Err()
}
