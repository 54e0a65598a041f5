package tracing

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// A flow keeps the trace context of the span that started it (the tool call, or the
// delegating service's request) as one W3C traceparent, 55 bytes: "00-" the trace ID "-"
// the span ID "-" the flags. Later work on the flow (its page visits, its completion
// notification) starts spans in that trace, so that one trace shows the whole flow.

// Carried returns the traceparent of ctx's span, for a flow started in it to keep; empty
// when tracing is off or the span is not sampled, so that a flow keeps nothing then.
func Carried(ctx context.Context) string {
	if !Enabled() {
		return ""
	}
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !sc.IsSampled() {
		return ""
	}
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(trace.ContextWithSpanContext(context.Background(), sc), carrier)
	return carrier["traceparent"]
}

// InFlow returns ctx with the flow's span (from traceparent, as Carried gave it) as the
// parent of the spans started in it; ctx itself when there is none.
func InFlow(ctx context.Context, traceparent string) context.Context {
	if !Enabled() {
		return ctx
	}
	if sc := flowSpan(traceparent); sc.IsValid() {
		return trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	return ctx
}

// flowSpan is the span a flow's traceparent names; not valid when there is none.
func flowSpan(traceparent string) trace.SpanContext {
	if traceparent == "" {
		return trace.SpanContext{}
	}
	return trace.SpanContextFromContext(propagator.Extract(context.Background(), propagation.MapCarrier{"traceparent": traceparent}))
}

// A visit is a request to a page of one flow: Visited names the flow, and the request's
// end (EndVisit) adds a span for it to the flow's trace.
type visit struct {
	start       time.Time
	id, carried string
}

type visitKey struct{}

// StartVisit returns ctx ready to note the flow that the request's page shows.
func StartVisit(ctx context.Context) context.Context {
	if !Enabled() {
		return ctx
	}
	return context.WithValue(ctx, visitKey{}, &visit{start: time.Now()})
}

// Visited notes that the request of ctx shows elicitation id, whose flow carried
// traceparent: the request's span gets the ID and a link to the flow's span.
func Visited(ctx context.Context, id, traceparent string) {
	if !Enabled() {
		return
	}
	v, ok := ctx.Value(visitKey{}).(*visit)
	if !ok {
		return
	}
	v.id, v.carried = id, traceparent
	span := trace.SpanFromContext(ctx)
	span.SetAttributes(ElicitationID.String(id))
	if sc := flowSpan(traceparent); sc.IsValid() {
		span.AddLink(trace.Link{SpanContext: sc})
	}
}

// EndVisit adds to the flow's trace a span for the request of ctx (named by its method
// and route), from its start until now, linked to the request's own span, when the
// request showed a flow that carries a trace.
func EndVisit(ctx context.Context, method, route string) {
	if !Enabled() {
		return
	}
	v, ok := ctx.Value(visitKey{}).(*visit)
	if !ok || v.carried == "" {
		return
	}
	parent := flowSpan(v.carried)
	if !parent.IsValid() {
		return
	}
	_, span := Tracer().Start(trace.ContextWithRemoteSpanContext(context.Background(), parent), method+" "+route, trace.WithTimestamp(v.start), trace.WithSpanKind(trace.SpanKindServer),
		trace.WithLinks(trace.Link{SpanContext: trace.SpanContextFromContext(ctx)}),
		trace.WithAttributes(ElicitationID.String(v.id)))
	span.End()
}

// FromMeta returns ctx with the trace context of an MCP request's params._meta as its
// parent (the traceparent and tracestate keys, the convention of MCP clients that trace),
// and reports whether there was one. The HTTP request's span, ctx's parent until then,
// is linked from the span the caller starts (Link).
func FromMeta(ctx context.Context, meta map[string]any) (context.Context, bool) {
	if !Enabled() || meta == nil {
		return ctx, false
	}
	carrier := propagation.MapCarrier{}
	for _, key := range []string{"traceparent", "tracestate"} {
		if s, ok := meta[key].(string); ok {
			carrier[key] = s
		}
	}
	if carrier["traceparent"] == "" {
		return ctx, false
	}
	parent := propagator.Extract(ctx, carrier)
	if !trace.SpanContextFromContext(parent).IsValid() {
		return ctx, false
	}
	return parent, true
}
