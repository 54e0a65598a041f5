package tracing

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"strconv"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Handler wraps h, the whole HTTP surface, so that each request gets a server span, in
// the trace of the traceparent header when the request has one. The span is named by the
// method until Route names its route; otelhttp records the path (never the query), the
// status, the client's address and user agent. With tracing off, Handler returns h.
func Handler(h http.Handler) http.Handler {
	if !Enabled() {
		return h
	}
	return otelhttp.NewHandler(h, "http", otelhttp.WithPropagators(propagator),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method }))
}

// Route names the server span of ctx's request after its route ("GET /e/:id"), the same
// for every ID.
func Route(ctx context.Context, method, route string) {
	if !Enabled() || route == "" {
		return
	}
	span := trace.SpanFromContext(ctx)
	span.SetName(method + " " + route)
	span.SetAttributes(semconv.HTTPRoute(route))
}

// Transport wraps base so that each request it sends gets a client span: its method, the
// server's address and port, the status code and, on failure, the error; never its path,
// query, headers or body. With always set it sends the trace context (traceparent) to the
// server; otherwise only requests whose context Propagate marked do. With tracing off,
// Transport returns base.
func Transport(base http.RoundTripper, always bool) http.RoundTripper {
	if !Enabled() {
		return base
	}
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{base: base, always: always}
}

type transport struct {
	base   http.RoundTripper
	always bool
}

type propagateKey struct{}

// Propagate marks ctx so that Transport sends the trace context with its requests: for
// the third-party APIs whose slot asks for it.
func Propagate(ctx context.Context) context.Context {
	if !Enabled() {
		return ctx
	}
	return context.WithValue(ctx, propagateKey{}, true)
}

func (t *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	host, port := r.URL.Hostname(), r.URL.Port()
	attrs := []attribute.KeyValue{semconv.HTTPRequestMethodKey.String(r.Method), semconv.ServerAddress(host), semconv.URLScheme(r.URL.Scheme)}
	if n, err := strconv.Atoi(port); err == nil {
		attrs = append(attrs, semconv.ServerPort(n))
	}
	ctx, span := Tracer().Start(r.Context(), r.Method, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	defer span.End()
	if t.always || ctx.Value(propagateKey{}) != nil {
		r = r.Clone(ctx)
		propagator.Inject(ctx, propagation.HeaderCarrier(r.Header))
	} else {
		r = r.WithContext(ctx)
	}
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		span.SetStatus(codes.Error, transportFailure(err))
		return nil, err
	}
	span.SetAttributes(semconv.HTTPResponseStatusCode(resp.StatusCode))
	if resp.StatusCode >= 500 {
		span.SetStatus(codes.Error, "")
	}
	return resp, nil
}

// transportFailure says in a few words what kind of failure err is, for a span's status.
// It never gives err's text, which can hold the request's URL and with it a query.
func transportFailure(err error) string {
	var dns *net.DNSError
	var op *net.OpError
	switch {
	case errors.Is(err, context.Canceled):
		return "request cancelled"
	case errors.Is(err, context.DeadlineExceeded), os.IsTimeout(err):
		return "timed out"
	case errors.As(err, &dns):
		return "host name not resolved"
	case errors.As(err, &op) && op.Op == "dial":
		return "connection failed"
	}
	return "request failed"
}
