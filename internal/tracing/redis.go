package tracing

import (
	"context"
	"fmt"
	"sync"

	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// redisScope is the instrumentation scope of go-redis's spans.
const redisScope = "github.com/redis/go-redis/extra/redisotel"

// InstrumentRedis gives each command rdb sends a client span, with go-redis's own
// instrumentation: the command's name, never its arguments (which hold sealed secrets,
// session IDs and flow records), and no span of its own for dialling. With tracing off it
// does nothing.
func InstrumentRedis(rdb redis.UniversalClient) error {
	if !Enabled() {
		return nil
	}
	if err := redisotel.InstrumentTracing(rdb, redisotel.WithDBStatement(false), redisotel.WithCallerEnabled(false),
		redisotel.WithDialFilter(true)); err != nil {
		return fmt.Errorf("trace Redis commands: %w", err)
	}
	return nil
}

// withoutLoneRedis passes to next every span but Redis commands outside any other span,
// and what go-redis does within them (a new connection's HELLO): the background loops
// (the sweeper, the event subscription, the counters' syncs) send a few every second, and
// each would be a trace of its own.
func withoutLoneRedis(next sdktrace.SpanProcessor) sdktrace.SpanProcessor {
	return &loneRedisFilter{SpanProcessor: next}
}

type loneRedisFilter struct {
	sdktrace.SpanProcessor
	// lone holds the IDs of the spans started and not yet ended that are not passed on.
	lone sync.Map
}

func (f *loneRedisFilter) OnStart(ctx context.Context, s sdktrace.ReadWriteSpan) {
	if s.InstrumentationScope().Name == redisScope {
		_, underLone := f.lone.Load(s.Parent().SpanID())
		if !s.Parent().IsValid() || underLone {
			f.lone.Store(s.SpanContext().SpanID(), struct{}{})
			return
		}
	}
	f.SpanProcessor.OnStart(ctx, s)
}

func (f *loneRedisFilter) OnEnd(s sdktrace.ReadOnlySpan) {
	if _, lone := f.lone.LoadAndDelete(s.SpanContext().SpanID()); lone {
		return
	}
	f.SpanProcessor.OnEnd(s)
}
