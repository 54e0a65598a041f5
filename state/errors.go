package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

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

// Unreachable reports whether err says that Redis could not be reached or could not serve
// just now, so that the request may be tried again unchanged (503, not 500): a network
// error, a connection that closed or was reset mid-command (a partition, a Redis that
// died), a pool that gave no connection in time, or a Redis that refuses to serve for a
// moment (loading its data, a failover in progress, a Cluster slot without a primary).
func Unreachable(err error) bool {
	// net.Error covers a dial or read that failed, and a bare errno (syscall.Errno has its
	// methods): a reset, a broken pipe, a refused connection.
	var netErr net.Error
	switch {
	case err == nil:
		return false
	case errors.As(err, &netErr), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, redis.ErrPoolTimeout):
		return true
	}
	var reply redis.Error
	if errors.As(err, &reply) {
		for _, busy := range []string{"LOADING ", "READONLY ", "MASTERDOWN ", "CLUSTERDOWN ", "TRYAGAIN ", "NOREPLICAS "} {
			if strings.HasPrefix(reply.Error(), busy) {
				return true
			}
		}
	}
	return false
}
