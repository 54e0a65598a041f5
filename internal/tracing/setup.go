package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// Protocols of the OTLP exporter.
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// Settings say whether and how to export traces, as the OTEL_* environment variables ask.
type Settings struct {
	// On is set when traces are exported.
	On bool
	// Protocol is ProtocolHTTP or ProtocolGRPC. The exporter reads the rest of its
	// settings (endpoint, headers, certificates, timeout) from the environment itself.
	Protocol string
}

// FromEnv reads the settings from getenv. Tracing is off unless OTEL_TRACES_EXPORTER is
// otlp, or it is unset and an OTLP endpoint is (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT); OTEL_SDK_DISABLED=true turns it off whatever else
// says. The error names the variable and what it takes.
func FromEnv(getenv func(string) string) (Settings, error) {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return Settings{}, nil
	}
	on := getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	switch exporter := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exporter {
	case "":
	case "none":
		return Settings{}, nil
	case "otlp":
		on = true
	default:
		return Settings{}, fmt.Errorf("OTEL_TRACES_EXPORTER: urlflow exports traces with otlp only (or none): got %q", exporter)
	}
	if !on {
		return Settings{}, nil
	}
	name, protocol := "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if protocol == "" {
		name, protocol = "OTEL_EXPORTER_OTLP_PROTOCOL", getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch protocol = strings.TrimSpace(protocol); protocol {
	case "", ProtocolHTTP:
		return Settings{On: true, Protocol: ProtocolHTTP}, nil
	case ProtocolGRPC:
		return Settings{On: true, Protocol: ProtocolGRPC}, nil
	}
	return Settings{}, fmt.Errorf("%s: want %s or %s, as in %s=%s: got %q", name, ProtocolHTTP, ProtocolGRPC, name, ProtocolGRPC, protocol)
}

// Service names the process in its traces' resource: OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES take precedence over it. Instance, when set, is
// service.instance.id.
type Service struct {
	Name, Version, Instance string
}

// Setup turns tracing on as s says, exporting the spans of svc, and returns the function
// that flushes and stops the export (a no-op when s is off). Export failures are logged on
// log. With s off, it changes nothing.
func Setup(ctx context.Context, s Settings, svc Service, log *slog.Logger) (shutdown func(context.Context) error, err error) {
	if !s.On {
		return func(context.Context) error { return nil }, nil
	}
	exporter, err := newExporter(ctx, s.Protocol)
	if err != nil {
		return nil, fmt.Errorf("OpenTelemetry exporter (%s): %w", s.Protocol, err)
	}
	attrs := []attribute.KeyValue{semconv.ServiceName(svc.Name), semconv.ServiceVersion(svc.Version)}
	if svc.Instance != "" {
		attrs = append(attrs, semconv.ServiceInstanceID(svc.Instance))
	}
	res, err := resource.New(ctx, resource.WithAttributes(attrs...), resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("OpenTelemetry resource (OTEL_RESOURCE_ATTRIBUTES): %w", err)
	}
	return Use(sdktrace.NewTracerProvider(sdktrace.WithResource(res),
		sdktrace.WithSpanProcessor(withoutLoneRedis(sdktrace.NewBatchSpanProcessor(exporter)))), log), nil
}

func newExporter(ctx context.Context, protocol string) (sdktrace.SpanExporter, error) {
	if protocol == ProtocolGRPC {
		return otlptracegrpc.New(ctx)
	}
	return otlptracehttp.New(ctx)
}

// Use makes provider the process's tracer provider, with W3C trace context, and turns
// tracing on; errors of the export go to log. It returns the function that shuts provider
// down (and turns tracing off). Setup uses it; tests use it with a recording provider.
func Use(provider *sdktrace.TracerProvider, log *slog.Logger) (shutdown func(context.Context) error) {
	otel.SetTracerProvider(provider)
	otel.SetTextMapPropagator(propagator)
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("OpenTelemetry: spans not exported", "err", err)
	}))
	enabled.Store(true)
	return func(ctx context.Context) error {
		enabled.Store(false)
		return provider.Shutdown(ctx)
	}
}
