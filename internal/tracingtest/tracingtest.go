// Package tracingtest turns tracing on for a test with a provider that keeps every span in
// memory, for the tests that look at what urlflow's spans hold.
package tracingtest

import (
	"context"
	"log/slog"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/urlflow/urlflow/internal/tracing"
)

// Record turns tracing on until the test ends, and returns the exporter that receives
// each span as it ends. The provider is the process's: a test that calls it must not run
// in parallel (t.Parallel tests wait until the sequential ones are done).
func Record(t testing.TB) *tracetest.InMemoryExporter {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	shutdown := tracing.Use(sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)), slog.New(slog.DiscardHandler))
	t.Cleanup(func() { shutdown(context.Background()) })
	return exp
}
