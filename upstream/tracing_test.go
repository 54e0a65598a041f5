package upstream

import (
	"context"
	"testing"

	"github.com/urlflow/urlflow/internal/tracing"
	"github.com/urlflow/urlflow/internal/tracingtest"
)

// With tracing on, a call sends the trace context only when its API's trace_context says
// so. (Not parallel: it turns tracing on for the process.)
func TestTraceContextReachesAnAPIOnlyWhenItsSlotAsks(t *testing.T) {
	tracingtest.Record(t)
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
