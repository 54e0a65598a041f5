package webhook

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/urlflow/urlflow/internal/buildinfo"
	"github.com/urlflow/urlflow/internal/redistest"
	"github.com/urlflow/urlflow/internal/tracing"
	"github.com/urlflow/urlflow/internal/tracingtest"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/flow"
)

// With tracing on, a webhook of a flow started in a trace is sent in a client span of that
// trace, and the receiver gets its traceparent. (Not parallel: it turns tracing on for the
// process.)
func TestAWebhookCarriesTheTraceOfItsFlow(t *testing.T) {
	exp := tracingtest.Record(t)

	var mu sync.Mutex
	var got []string
	var agent string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		got, agent = append(got, r.Header.Get("traceparent")), r.Header.Get("User-Agent")
	}))
	defer srv.Close()
	b := redistest.StartEmbedded(t)
	flows, queue := storeOn(b)
	ctx, span := tracing.Tracer().Start(t.Context(), "POST /api/v1/elicitations")
	e, err := flows.Create(ctx, flow.NewElicitation{User: alice, Kind: state.KindSecret, Target: "demo_api_key",
		Service: "weather", Purpose: "test", TTL: time.Minute, Trace: tracing.Carried(ctx)})
	span.End()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := flows.Apply(t.Context(), e.ID, flow.CancelRequested, state.ActorService, "test"); err != nil {
		t.Fatal(err)
	}
	s := NewSender(Options{Queue: queue, Targets: func(string) (Target, bool) { return Target{URL: srv.URL, Keys: [][]byte{key(t)}}, true }})
	sendUntil(t, s, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) > 0 })

	if want := buildinfo.UserAgent() + " (webhook)"; agent != want {
		t.Errorf("User-Agent %q, want %q", agent, want)
	}
	traceID := span.SpanContext().TraceID().String()
	if !strings.HasPrefix(got[0], "00-"+traceID+"-") {
		t.Errorf("the receiver got traceparent %q, want one of the flow's trace %s", got[0], traceID)
	}
	var sent bool
	for _, s := range exp.GetSpans() {
		sent = sent || (s.SpanKind == trace.SpanKindClient && s.Name == "POST" && s.SpanContext.TraceID().String() == traceID)
	}
	if !sent {
		t.Errorf("no client span of the webhook in the flow's trace: %v", exp.GetSpans())
	}
}
