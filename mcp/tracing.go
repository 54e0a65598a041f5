package mcp

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/urlflow/urlflow/internal/tracing"
)

// Attributes of the MCP spans, as OpenTelemetry's conventions for MCP name them.
const (
	methodAttr    = attribute.Key("mcp.method.name")
	toolAttr      = attribute.Key("gen_ai.tool.name")
	errorCodeAttr = attribute.Key("rpc.jsonrpc.error_code")
)

// traceReceived gives each MCP method a server receives a server span, named by the
// method and, for tools/call, the tool (or "unknown" for a name that is none of urlflow's): in the trace of the request's params._meta
// traceparent when the client sent one (linked to the HTTP request's span), in the HTTP
// request's trace otherwise. The span holds the method and the tool's name, never the
// arguments, the result or an error's text.
func traceReceived(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		params := paramsOf(req)
		var meta map[string]any
		if params != nil {
			meta = params.GetMeta()
		}
		name, attrs := method, []attribute.KeyValue{methodAttr.String(method)}
		if call, ok := params.(*sdk.CallToolParamsRaw); ok {
			tool := "unknown" // a name urlflow does not know is the client's own text
			if _, known := registeredTools.Load(call.Name); known {
				tool = call.Name
			}
			name += " " + tool
			attrs = append(attrs, toolAttr.String(tool))
		}
		opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...)}
		parent, fromMeta := tracing.FromMeta(ctx, meta)
		if httpSpan := trace.SpanContextFromContext(ctx); fromMeta && httpSpan.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: httpSpan}))
		}
		ctx, span := tracing.Tracer().Start(parent, name, opts...)
		defer span.End()
		res, err := next(ctx, method, req)
		failed(span, res, err)
		return res, err
	}
}

// traceSent gives each message a server sends (elicitation/create, the completion
// notification, progress) a client span named by its method, with the elicitation ID
// of a completion notification.
func traceSent(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		attrs := []attribute.KeyValue{methodAttr.String(method)}
		if done, ok := paramsOf(req).(*sdk.ElicitationCompleteParams); ok {
			attrs = append(attrs, tracing.ElicitationID.String(done.ElicitationID))
		}
		ctx, span := tracing.Tracer().Start(ctx, method, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
		defer span.End()
		res, err := next(ctx, method, req)
		failed(span, res, err)
		return res, err
	}
}

// paramsOf returns the params of req, nil when it has none.
func paramsOf(req sdk.Request) sdk.Params {
	if req == nil {
		return nil
	}
	p := req.GetParams()
	if p == nil {
		return nil
	}
	if v := reflect.ValueOf(p); v.Kind() == reflect.Pointer && v.IsNil() {
		return nil
	}
	return p
}

// failed marks span as failed when err is set or res is a tool's error result, saying
// only the JSON-RPC error code: an error's text can repeat what the client sent. The
// error that asks the client to open a link (−32042) is how a tool asks, not a failure.
func failed(span trace.Span, res sdk.Result, err error) {
	var wire *jsonrpc.Error
	switch {
	case errors.As(err, &wire):
		span.SetAttributes(errorCodeAttr.Int64(wire.Code))
		if wire.Code != sdk.CodeURLElicitationRequired {
			span.SetStatus(codes.Error, fmt.Sprintf("JSON-RPC error %d", wire.Code))
		}
	case err != nil:
		span.SetStatus(codes.Error, "failed")
	}
	if r, ok := res.(*sdk.CallToolResult); ok && r != nil && r.IsError {
		span.SetStatus(codes.Error, "tool error result")
	}
}
