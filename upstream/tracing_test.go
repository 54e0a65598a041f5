package upstream

import (
	"context"
	"log/slog"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/urlflow/urlflow/internal/tracing"
)

// With tracing on, a call sends the trace context only when its API's trace_context says
// so. (Not parallel: it turns tracing on for the process.)
func TestTraceContextReachesAnAPIOnlyWhenItsSlotAsks(t *testing.T) {
	shutdown := tracing.Use(sdktrace.NewTracerProvider(sdktrace.WithSyncer(tracetest.NewInMemoryExporter())), slog.New(slog.DiscardHandler))
	defer shutdown(context.Background())
	caller := New(nil)
	ctx, span := tracing.Tracer().Start(context.Background(), "tools/call call_api")
	defer span.End()
	for _, asks := range []bool{false, true} {
		api := newRecorder(t, nil)
		slot := newSlot(t, API{BaseURL: api.URL, Inject: Injection{Header: "Authorization"}, TraceContext: asks}, nil)
		if _, err := caller.Call(ctx, slot.API, secret(), Request{Method: "GET", Path: "/"}); err != nil {
			t.Fatal(err)
		}
		got := api.received()[0].req.Header.Get("traceparent")
		if sent := got != ""; sent != asks {
			t.Errorf("trace_context %v: the API received traceparent %q", asks, got)
		}
	}
}
