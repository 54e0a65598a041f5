package state

import (
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"
)

// reply is an error answer of Redis.
type reply string

func (r reply) Error() string { return string(r) }
func (reply) RedisError()     {}

// A Redis that cannot be reached, or cannot serve for a moment, is told apart from other
// failures: the first is a 503 to try again, the second a 500. A connection closed
// mid-command (io.EOF: a partition, a Redis killed) used to be a 500.
func TestUnreachableTellsAPassingOutageFromAFault(t *testing.T) {
	wrapped := func(err error) error { return fmt.Errorf("read elicitation X: %w", err) }
	for _, err := range []error{
		wrapped(io.EOF), wrapped(io.ErrUnexpectedEOF), wrapped(syscall.ECONNRESET),
		wrapped(&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}), wrapped(redis.ErrPoolTimeout),
		wrapped(reply("LOADING Redis is loading the dataset in memory")), wrapped(reply("READONLY You can't write against a read only replica.")),
		wrapped(reply("CLUSTERDOWN The cluster is down")),
	} {
		if !Unreachable(err) {
			t.Errorf("%v is not taken for an outage", err)
		}
	}
	for _, err := range []error{nil, errors.New("decode elicitation: invalid character"), ErrNotFound, redis.Nil,
		wrapped(reply("ERR unknown command")), wrapped(reply("NOSCRIPT No matching script"))} {
		if Unreachable(err) {
			t.Errorf("%v is taken for an outage", err)
		}
	}
}
