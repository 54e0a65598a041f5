package flow

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/urlflow/urlflow/state"
)

func mcpSessionKey(id string) string { return state.KeyPrefix + "ms:" + id }

// MCPSession is a live MCP session (2025-11-25) as registered by the replica that holds it.
type MCPSession struct {
	ID        string           `json:"id"`
	User      state.User       `json:"user"`
	Replica   string           `json:"replica"`
	Client    state.ClientInfo `json:"client"`
	StartedAt time.Time        `json:"startedAt"`
}

// RegisterMCPSession records that ms lives, for ttl. The holding replica refreshes it.
func (s *Store) RegisterMCPSession(ctx context.Context, ms MCPSession, ttl time.Duration) error {
	doc, err := json.Marshal(ms)
	if err != nil {
		return fmt.Errorf("encode MCP session: %w", err)
	}
	if err := s.rdb.Set(ctx, mcpSessionKey(ms.ID), doc, ttl).Err(); err != nil {
		return fmt.Errorf("register MCP session: %w", err)
	}
	return nil
}

// LiveMCPSession returns the registration of MCP session id, or ErrNotFound once it has
// ended or its replica stopped refreshing it.
func (s *Store) LiveMCPSession(ctx context.Context, id string) (*MCPSession, error) {
	var ms MCPSession
	if err := state.DecodeJSON(s.rdb.Get(ctx, mcpSessionKey(id)), "MCP session", &ms); err != nil {
		return nil, err
	}
	return &ms, nil
}

// ForgetMCPSession removes the registration of MCP session id.
func (s *Store) ForgetMCPSession(ctx context.Context, id string) error {
	if err := s.rdb.Del(ctx, mcpSessionKey(id)).Err(); err != nil {
		return fmt.Errorf("forget MCP session: %w", err)
	}
	return nil
}
