package state

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// ErrNotFound is returned by the stores when there is no such record: no such elicitation,
// credential or session, or an ID that is malformed.
var ErrNotFound = errors.New("not found")

// DecodeJSON decodes the JSON document that a Redis read returned into v. It returns
// ErrNotFound when there was none, and errors that name what was read.
func DecodeJSON(cmd *redis.StringCmd, what string, v any) error {
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
