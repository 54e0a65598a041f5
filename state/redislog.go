package state

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/redis/go-redis/v9"
)

// LogRedisTo sends go-redis's own messages (a dial that failed, a connection pool that is
// full) to log as warnings, in log's format, instead of to Go's standard logger, whose
// lines on stderr break a JSON log stream. It is process-wide, as go-redis's logger is.
func LogRedisTo(log *slog.Logger) { redis.SetLogger(redisLog{log: log}) }

type redisLog struct{ log *slog.Logger }

func (r redisLog) Printf(ctx context.Context, format string, v ...any) {
	r.log.WarnContext(ctx, fmt.Sprintf(format, v...), "from", "go-redis")
}
