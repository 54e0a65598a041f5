// Package tracing turns on OpenTelemetry tracing when the standard OTEL_* environment
// variables ask for it, and holds the helpers urlflow's packages make their spans with:
// server spans for HTTP requests (Handler, Route) and MCP methods (FromMeta), client spans
// for outgoing HTTP (Transport) and Redis (InstrumentRedis), the trace context a flow keeps
// so that its page visits and completion notification join the tool call's trace
// (Carried, InFlow, Visited), and trace IDs in log lines (LogHandler).
//
// The one idea to hold: with tracing off nothing changes and nothing is paid. Every helper
// checks Enabled first and hands back what it was given; the global tracer provider stays
// OpenTelemetry's no-op one. With tracing on, a span carries names, routes, methods, status
// codes and elicitation IDs, never a secret, a token, a requestState, a query string or
// anything a user typed.
package tracing

import (
	"context"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// scope is the instrumentation scope of urlflow's own spans.
const scope = "github.com/urlflow/urlflow"

// ElicitationID is the attribute that names the elicitation a span belongs to.
const ElicitationID = attribute.Key("urlflow.elicitation.id")

var enabled atomic.Bool

// Enabled reports whether tracing is on in this process (Start turned it on).
func Enabled() bool { return enabled.Load() }

// Tracer returns the tracer of urlflow's own spans.
func Tracer() trace.Tracer { return otel.Tracer(scope) }

// propagator reads and writes W3C trace context (traceparent, tracestate) and nothing
// else: baggage could carry what a client chose to put in it, and urlflow passes none on.
var propagator = propagation.TraceContext{}

// Start starts a span named name in ctx's trace when tracing is on; otherwise it returns
// ctx and the span already in it (a no-op one when there is none), so that callers can end
// what they get either way.
func Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if !Enabled() {
		return ctx, noSpan
	}
	return Tracer().Start(ctx, name, opts...)
}

// noSpan is the span Start hands out when tracing is off: ending it does nothing.
var noSpan = trace.SpanFromContext(context.Background())
