package e2e

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	collector "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/urlflow/urlflow/internal/redistest"
)

// otlpReceiver is an OTLP/HTTP trace receiver: it decodes what urlflow exports.
type otlpReceiver struct {
	URL   string
	mu    sync.Mutex
	spans []receivedSpan
}

// receivedSpan is a span as received, with the service.name and the scope it came with.
type receivedSpan struct {
	*tracepb.Span
	Service, Scope string
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var export collector.ExportTraceServiceRequest
		if req.URL.Path != "/v1/traces" || proto.Unmarshal(body, &export) != nil {
			http.Error(w, "not an OTLP trace export", http.StatusBadRequest)
			return
		}
		r.add(&export)
		out, _ := proto.Marshal(&collector.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

func (r *otlpReceiver) add(export *collector.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range export.ResourceSpans {
		service := stringAttr(rs.GetResource().GetAttributes(), "service.name")
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				r.spans = append(r.spans, receivedSpan{Span: s, Service: service, Scope: ss.GetScope().GetName()})
			}
		}
	}
}

func (r *otlpReceiver) all() []receivedSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]receivedSpan(nil), r.spans...)
}

func stringAttr(kvs []*commonpb.KeyValue, key string) string {
	for _, kv := range kvs {
		if kv.Key == key {
			return kv.GetValue().GetStringValue()
		}
	}
	return ""
}

// texts returns every text a span carries, as protobuf's text form.
func (s receivedSpan) texts() string { return s.Span.String() }

// inTrace returns the spans of trace id (hex) named name.
func inTrace(spans []receivedSpan, traceID, name string) []receivedSpan {
	var out []receivedSpan
	for _, s := range spans {
		if hexID(s.TraceId) == traceID && s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func hexID(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}

// A real urlflow exports its spans over OTLP/HTTP to a receiver in the test: a whole flow
// started by a tool call that carries trace context in _meta, with a canary secret, shows
// as one trace (the tool call, its Redis commands, the page visits, the completion
// notification), a later call_api reaches the API in a client span, log lines name their
// trace, and no span holds the secret or the bearer token.
func TestAWholeFlowIsOneTraceAtAnOTLPReceiverWithoutTheSecret(t *testing.T) {
	t.Parallel()
	recv := newOTLPReceiver(t)
	rs := redistest.Start(t)
	s := startServer(t, serverConfig{Redis: rs, Style: "error", Env: []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + recv.URL, "OTEL_BSP_SCHEDULE_DELAY=100", "OTEL_SERVICE_NAME=urlflow-e2e"}})
	c := connect(t, s, clientConfig{Token: s.Token, URLMode: true})
	const flowTrace, callTrace = "0af7651916cd43dd8448eb211c80319c", "5b8efff798038103d269b633813fc60c"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	_, err := c.session.CallTool(ctx, &sdk.CallToolParams{Meta: sdk.Meta{"traceparent": "00-" + flowTrace + "-b7ad6b7169203331-01"},
		Name: "set_secret", Arguments: map[string]any{"name": "demo_api_key"}})
	params := urlElicitationRequired(t, err)[0]
	newFormBrowser(t, s, "dev").completeSecret(params.URL, canary)
	c.waitCompletion(params.ElicitationID, 30*time.Second)
	if _, err := c.session.CallTool(ctx, &sdk.CallToolParams{Meta: sdk.Meta{"traceparent": "00-" + callTrace + "-00f067aa0ba902b7-01"},
		Name: "call_api", Arguments: whoamiArgs}); err != nil {
		t.Fatal(err)
	}

	want := map[string]string{ // span name → the trace it must be in
		"tools/call set_secret":              flowTrace,
		"GET /e/:id":                         flowTrace,
		"POST /e/:id/secret":                 flowTrace,
		"notifications/elicitation/complete": flowTrace,
		"tools/call call_api":                callTrace,
		"GET":                                callTrace, // the demo API's call
	}
	eventually(t, 20*time.Second, "the spans of the flow at the receiver", func() bool {
		spans := recv.all()
		for name, trace := range want {
			if len(inTrace(spans, trace, name)) == 0 {
				return false
			}
		}
		return true
	})
	spans := recv.all()
	call := inTrace(spans, flowTrace, "tools/call set_secret")[0]
	if hexID(call.ParentSpanId) != "b7ad6b7169203331" || call.Kind != tracepb.Span_SPAN_KIND_SERVER ||
		stringAttr(call.Attributes, "gen_ai.tool.name") != "set_secret" || call.Service != "urlflow-e2e" {
		t.Errorf("tool call span %v (service %s): want a server span under the client's, naming the tool", call.Span, call.Service)
	}
	for _, name := range []string{"GET /e/:id", "POST /e/:id/secret", "notifications/elicitation/complete"} {
		if got := stringAttr(inTrace(spans, flowTrace, name)[0].Attributes, "urlflow.elicitation.id"); got != params.ElicitationID {
			t.Errorf("%s names elicitation %q, want %s", name, got, params.ElicitationID)
		}
	}
	var redisInFlow bool
	for _, sp := range spans {
		redisInFlow = redisInFlow || (hexID(sp.TraceId) == flowTrace && strings.Contains(sp.Scope, "redisotel"))
		if text := sp.texts(); strings.Contains(text, canary) || strings.Contains(text, s.Token) {
			t.Errorf("span %q holds the secret or the bearer token: %s", sp.Name, text)
		}
	}
	if !redisInFlow {
		t.Error("no Redis command span in the flow's trace")
	}
	if !strings.Contains(s.output.String(), "trace_id="+flowTrace) {
		t.Error("no log line names the flow's trace")
	}
}
