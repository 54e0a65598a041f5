package tracing

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	collector "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// The tests of this package change the process's tracer provider: none runs in parallel.

func env(vars map[string]string) func(string) string {
	return func(name string) string { return vars[name] }
}

func TestTheEnvironmentTurnsTracingOnOnlyWhenItAsks(t *testing.T) {
	endpoint := "http://127.0.0.1:4318"
	cases := []struct {
		name string
		vars map[string]string
		want Settings
		err  string
	}{
		{"nothing set", nil, Settings{}, ""},
		{"an endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint}, Settings{On: true, Protocol: ProtocolHTTP}, ""},
		{"a traces endpoint", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint}, Settings{On: true, Protocol: ProtocolHTTP}, ""},
		{"otlp without an endpoint", map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, Settings{On: true, Protocol: ProtocolHTTP}, ""},
		{"grpc", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, Settings{On: true, Protocol: ProtocolGRPC}, ""},
		{"the traces protocol wins", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
			"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, Settings{On: true, Protocol: ProtocolHTTP}, ""},
		{"none", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_TRACES_EXPORTER": "none"}, Settings{}, ""},
		{"the SDK disabled", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_SDK_DISABLED": "true"}, Settings{}, ""},
		{"a protocol urlflow lacks", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
			Settings{}, `OTEL_EXPORTER_OTLP_PROTOCOL: want http/protobuf or grpc, as in OTEL_EXPORTER_OTLP_PROTOCOL=grpc: got "http/json"`},
		{"an exporter urlflow lacks", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"},
			Settings{}, `OTEL_TRACES_EXPORTER: urlflow exports traces with otlp only (or none): got "zipkin"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := FromEnv(env(c.vars))
			if c.err != "" {
				if err == nil || err.Error() != c.err {
					t.Fatalf("error %v, want %s", err, c.err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("FromEnv = %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
}

func TestWithTracingOffEveryHelperHandsBackWhatItGot(t *testing.T) {
	if Enabled() {
		t.Fatal("tracing is on before anything turned it on")
	}
	h := http.NewServeMux()
	if got, ok := Handler(h).(*http.ServeMux); !ok || got != h {
		t.Error("Handler wrapped the handler with tracing off")
	}
	base := http.DefaultTransport.(*http.Transport).Clone() // not the default, which other tests' servers close
	if Transport(base, true) != base {
		t.Error("Transport wrapped the transport with tracing off")
	}
	ctx := context.Background()
	if Propagate(ctx) != ctx || StartVisit(ctx) != ctx || InFlow(ctx, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01") != ctx {
		t.Error("a helper changed the context with tracing off")
	}
	if Carried(ctx) != "" {
		t.Error("Carried gave a trace context with tracing off")
	}
	if shutdown, err := Setup(ctx, Settings{}, Service{Name: "urlflow"}, slog.Default()); err != nil || Enabled() || shutdown(ctx) != nil {
		t.Error("Setup with tracing off turned something on or failed")
	}
}

// record turns tracing on with a provider that keeps every span, for the test.
func record(t *testing.T) *tracetest.InMemoryExporter {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	shutdown := Use(sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)), slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(func() { shutdown(context.Background()) })
	return exp
}

func attr(s sdktrace.ReadOnlySpan, key attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func TestTheTransportSendsTraceContextOnlyWhenAskedAndRecordsNoURL(t *testing.T) {
	exp := record(t)
	var got []string
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("traceparent"))
		mu.Unlock()
	}))
	defer srv.Close()
	ctx, parent := Tracer().Start(context.Background(), "parent")
	defer parent.End()
	url := srv.URL + "/v1/users/CANARY-path?api_key=CANARY-query"
	for _, c := range []struct {
		transport http.RoundTripper
		ctx       context.Context
	}{{Transport(nil, false), ctx}, {Transport(nil, false), Propagate(ctx)}, {Transport(nil, true), ctx}} {
		req, _ := http.NewRequestWithContext(c.ctx, http.MethodGet, url, nil)
		resp, err := (&http.Client{Transport: c.transport}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if got[0] != "" || got[1] == "" || got[2] == "" {
		t.Errorf("traceparent sent: %q; want none, then one when the context asks, then one always", got)
	}
	if !strings.Contains(got[1], parent.SpanContext().TraceID().String()) {
		t.Errorf("traceparent %q is not of the caller's trace %s", got[1], parent.SpanContext().TraceID())
	}
	spans := exp.GetSpans().Snapshots()
	if len(spans) != 3 {
		t.Fatalf("%d spans, want 3", len(spans))
	}
	for _, s := range spans {
		if s.SpanKind() != trace.SpanKindClient || s.Name() != "GET" || s.Parent().SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("span %q kind %v parent %v; want a client span GET under the caller's", s.Name(), s.SpanKind(), s.Parent().SpanID())
		}
		if v, _ := attr(s, "http.response.status_code"); v.AsInt64() != 200 {
			t.Errorf("status attribute %v, want 200", v.String())
		}
		for _, kv := range s.Attributes() {
			if strings.Contains(kv.Value.String(), "CANARY") {
				t.Errorf("attribute %s = %q holds the URL's path or query", kv.Key, kv.Value.String())
			}
		}
	}
}

func TestAFailedRequestsSpanSaysWhatKindOfFailureWithoutTheURL(t *testing.T) {
	exp := record(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/x?token=CANARY", nil)
	if _, err := (&http.Client{Transport: Transport(nil, false)}).Do(req); err == nil {
		t.Fatal("a request to a closed port succeeded")
	}
	s := exp.GetSpans().Snapshots()[0]
	if s.Status().Description != "connection failed" {
		t.Errorf("status %q, want connection failed", s.Status().Description)
	}
}

func TestAFlowsTraceContextIsSmallAndLeadsBackToItsSpan(t *testing.T) {
	record(t)
	ctx, span := Tracer().Start(context.Background(), "tools/call set_secret")
	defer span.End()
	carried := Carried(ctx)
	if len(carried) != 55 || !strings.HasPrefix(carried, "00-"+span.SpanContext().TraceID().String()) {
		t.Fatalf("carried %q (%d bytes), want the 55-byte traceparent of the span", carried, len(carried))
	}
	later := trace.SpanContextFromContext(InFlow(context.Background(), carried))
	if later.TraceID() != span.SpanContext().TraceID() || later.SpanID() != span.SpanContext().SpanID() {
		t.Errorf("InFlow leads to %v, want the span that carried it", later)
	}
	if InFlow(context.Background(), "not a traceparent") != context.Background() {
		t.Error("InFlow took a malformed traceparent")
	}
}

func TestAPageVisitJoinsTheFlowsTrace(t *testing.T) {
	exp := record(t)
	flowCtx, flowSpan := Tracer().Start(context.Background(), "tools/call set_secret")
	flowSpan.End()
	carried := Carried(flowCtx)

	reqCtx, reqSpan := Tracer().Start(context.Background(), "GET")
	reqCtx = StartVisit(reqCtx)
	Visited(reqCtx, "ELICITATIONID", carried)
	Route(reqCtx, http.MethodGet, "/e/:id")
	EndVisit(reqCtx, http.MethodGet, "/e/:id")
	reqSpan.End()

	spans := exp.GetSpans().Snapshots()
	var visit, request sdktrace.ReadOnlySpan
	for _, s := range spans {
		switch {
		case s.SpanContext().SpanID() == reqSpan.SpanContext().SpanID():
			request = s
		case s.SpanContext().TraceID() == flowSpan.SpanContext().TraceID() && s.Name() == "GET /e/:id":
			visit = s
		}
	}
	if request == nil || visit == nil {
		t.Fatalf("spans %v: want the request's and a visit in the flow's trace", spans)
	}
	if request.Name() != "GET /e/:id" || len(request.Links()) != 1 || request.Links()[0].SpanContext.SpanID() != flowSpan.SpanContext().SpanID() {
		t.Errorf("request span %q links %v; want it named by its route and linked to the flow's span", request.Name(), request.Links())
	}
	if visit.Parent().SpanID() != flowSpan.SpanContext().SpanID() || len(visit.Links()) != 1 ||
		visit.Links()[0].SpanContext.SpanID() != reqSpan.SpanContext().SpanID() {
		t.Errorf("visit's parent %v links %v; want the flow's span as parent and a link to the request", visit.Parent(), visit.Links())
	}
	if v, _ := attr(visit, ElicitationID); v.AsString() != "ELICITATIONID" {
		t.Errorf("visit's elicitation ID %q", v.AsString())
	}
}

func TestMCPMetaTraceContextIsTheParent(t *testing.T) {
	record(t)
	meta := map[string]any{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "tracestate": "vendor=x"}
	ctx, ok := FromMeta(context.Background(), meta)
	sc := trace.SpanContextFromContext(ctx)
	if !ok || sc.TraceID().String() != "0af7651916cd43dd8448eb211c80319c" || sc.TraceState().Get("vendor") != "x" {
		t.Errorf("FromMeta = %v, %v", sc, ok)
	}
	for _, bad := range []map[string]any{nil, {}, {"traceparent": 7}, {"traceparent": "00-zz-yy-01"}} {
		if _, ok := FromMeta(context.Background(), bad); ok {
			t.Errorf("FromMeta took %v", bad)
		}
	}
}

func TestLogLinesInASpanNameItsTraceAndSpan(t *testing.T) {
	record(t)
	var buf bytes.Buffer
	log := slog.New(LogHandler(slog.NewJSONHandler(&buf, nil)))
	ctx, span := Tracer().Start(context.Background(), "x")
	log.InfoContext(ctx, "in a span")
	span.End()
	log.Info("outside")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if !strings.Contains(lines[0], `"trace_id":"`+span.SpanContext().TraceID().String()+`"`) ||
		!strings.Contains(lines[0], `"span_id":"`+span.SpanContext().SpanID().String()+`"`) {
		t.Errorf("line in a span: %s", lines[0])
	}
	if strings.Contains(lines[1], "trace_id") {
		t.Errorf("line outside any span names a trace: %s", lines[1])
	}
}

func TestRedisCommandsAreTracedWithoutArgumentsAndOnlyInsideASpan(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	shutdown := Use(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(withoutLoneRedis(sdktrace.NewSimpleSpanProcessor(exp)))), slog.Default())
	defer shutdown(context.Background())
	mem := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mem.Addr()})
	defer rdb.Close()
	if err := InstrumentRedis(rdb); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rdb.Set(ctx, "alone", "CANARY-alone", 0) // a background loop's command, with a new connection's HELLO: no trace of their own
	ctx, span := Tracer().Start(ctx, "request")
	rdb.Set(ctx, "key", "CANARY-value", time.Minute)
	span.End()

	var redisSpans []tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.InstrumentationScope.Name == redisScope {
			redisSpans = append(redisSpans, s)
		}
	}
	if len(redisSpans) != 1 || redisSpans[0].Parent.SpanID() != span.SpanContext().SpanID() {
		t.Fatalf("redis spans %v; want the one command inside the request's span", redisSpans)
	}
	for _, kv := range redisSpans[0].Attributes {
		if strings.Contains(kv.Value.String(), "CANARY") {
			t.Errorf("attribute %s = %q holds the command's arguments", kv.Key, kv.Value.String())
		}
	}
}

// otlpSpans reads the spans of OTLP requests.
type otlpSpans struct {
	mu    sync.Mutex
	spans []*tracepb.Span
	names []string // the service.name of each span's resource
}

func (o *otlpSpans) add(req *collector.ExportTraceServiceRequest) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				o.spans = append(o.spans, s)
				o.names = append(o.names, service)
			}
		}
	}
}

func (o *otlpSpans) want(t *testing.T, name string) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.spans) != 1 || o.spans[0].Name != name || o.names[0] != "urlflow" {
		t.Fatalf("received %d spans %v; want one %q of service urlflow", len(o.spans), o.spans, name)
	}
}

// exportOne sets tracing up from vars, makes one span named name and shuts down, which
// exports it.
func exportOne(t *testing.T, vars map[string]string, name string) {
	t.Helper()
	for k, v := range vars {
		t.Setenv(k, v)
	}
	settings, err := FromEnv(env(vars))
	if err != nil || !settings.On {
		t.Fatalf("settings %+v, %v", settings, err)
	}
	ctx := context.Background()
	shutdown, err := Setup(ctx, settings, Service{Name: "urlflow", Version: "test"}, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	_, span := Tracer().Start(ctx, name)
	span.End()
	if err := shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
}

func TestSpansReachAnOTLPReceiverOverHTTP(t *testing.T) {
	var got otlpSpans
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req collector.ExportTraceServiceRequest
		if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" || proto.Unmarshal(body, &req) != nil {
			http.Error(w, "not an OTLP trace export", http.StatusBadRequest)
			return
		}
		got.add(&req)
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&collector.ExportTraceServiceResponse{})
		w.Write(out)
	}))
	defer srv.Close()
	exportOne(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL}, "over http")
	got.want(t, "over http")
}

type grpcReceiver struct {
	collector.UnimplementedTraceServiceServer
	got *otlpSpans
}

func (g grpcReceiver) Export(_ context.Context, req *collector.ExportTraceServiceRequest) (*collector.ExportTraceServiceResponse, error) {
	g.got.add(req)
	return &collector.ExportTraceServiceResponse{}, nil
}

func TestSpansReachAnOTLPReceiverOverGRPC(t *testing.T) {
	var got otlpSpans
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	collector.RegisterTraceServiceServer(srv, grpcReceiver{got: &got})
	go srv.Serve(ln)
	defer srv.Stop()
	exportOne(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://" + ln.Addr().String(),
		"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "over grpc")
	got.want(t, "over grpc")
}
