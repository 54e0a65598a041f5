package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// SaveBrowserSession stores the data of browser session id for ttl.
func (s *Store) SaveBrowserSession(ctx context.Context, id string, data []byte, ttl time.Duration) error {
	if err := s.rdb.Set(ctx, browserSessionKey(id), data, ttl).Err(); err != nil {
		return fmt.Errorf("save browser session: %w", err)
	}
	return nil
}

// LoadBrowserSession returns the data of browser session id, or ErrNotFound.
func (s *Store) LoadBrowserSession(ctx context.Context, id string) ([]byte, error) {
	data, err := s.rdb.Get(ctx, browserSessionKey(id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("load browser session: %w", err)
	}
	return data, nil
}

// DeleteBrowserSession removes browser session id.
func (s *Store) DeleteBrowserSession(ctx context.Context, id string) error {
	if err := s.rdb.Del(ctx, browserSessionKey(id)).Err(); err != nil {
		return fmt.Errorf("delete browser session: %w", err)
	}
	return nil
}

// MCPSession is a live MCP session (2025-11-25) as registered by the replica that holds it.
type MCPSession struct {
	ID        string     `json:"id"`
	User      User       `json:"user"`
	Replica   string     `json:"replica"`
	Client    ClientInfo `json:"client"`
	StartedAt time.Time  `json:"startedAt"`
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
	if err := decodeDoc(s.rdb.Get(ctx, mcpSessionKey(id)), "MCP session", &ms); err != nil {
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

// decodeDoc decodes the JSON document a Redis read returned into v: ErrNotFound when there
// was none, and errors naming what was read.
func decodeDoc(cmd *redis.StringCmd, what string, v any) error {
	doc, err := cmd.Bytes()
	if errors.Is(err, redis.Nil) {
		return ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", what, err)
	}
	if err := json.Unmarshal(doc, v); err != nil {
		return fmt.Errorf("decode %s: %w", what, err)
	}
	return nil
}
