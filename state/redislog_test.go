package state

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestGoRedisLogsThroughSlog: what go-redis says of a connection it cannot make reaches the
// slog handler (here JSON), not Go's standard logger.
func TestGoRedisLogsThroughSlog(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing answers there
	var out bytes.Buffer
	LogRedisTo(slog.New(slog.NewJSONHandler(&out, nil)))
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err == nil {
		t.Fatal("a ping to nothing answered")
	}
	var line struct {
		Level, Msg, From string
	}
	if err := json.Unmarshal(bytes.SplitN(out.Bytes(), []byte("\n"), 2)[0], &line); err != nil || line.Level != "WARN" || line.From != "go-redis" {
		t.Errorf("go-redis logged %q, want a JSON warning from go-redis", out.String())
	}
}
