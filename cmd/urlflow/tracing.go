package main

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/urlflow/urlflow/internal/tracing"
)

// loadTracing reads the OTEL_* variables that turn tracing on (package tracing). They are
// OpenTelemetry's own, read from the environment only, so they are not settings of the
// table.
func (c *config) loadTracing(l *loading, getenv env) {
	var err error
	if c.Tracing, err = tracing.FromEnv(openTelemetryEnv(getenv)); err != nil {
		l.problemf("%v", err)
	}
}

// startTracing turns tracing on when cfg says so: the log names the trace and span of
// each line logged in a request, and the requests urlflow makes with Go's default client
// (to the OpenID provider and the third-party OAuth providers) get client spans. It
// returns the log to use and the function that sends what is left and stops.
func startTracing(ctx context.Context, cfg *config, log *slog.Logger) (*slog.Logger, func(), error) {
	host, _ := os.Hostname() // service.instance.id; empty (left out) when unknown
	shutdown, err := tracing.Setup(ctx, cfg.Tracing, tracing.Service{Name: "urlflow", Version: version(), Instance: host}, log)
	if err != nil {
		return nil, nil, err
	}
	if !cfg.Tracing.On {
		return log, func() {}, nil
	}
	log = slog.New(tracing.LogHandler(log.Handler()))
	defaultClient := http.DefaultClient
	http.DefaultClient = &http.Client{Transport: tracing.Transport(nil, false)}
	log.Info("tracing on: spans go to the OTLP endpoint of the OTEL_* variables", "protocol", cfg.Tracing.Protocol)
	return log, func() {
		http.DefaultClient = defaultClient
		flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := shutdown(flushCtx); err != nil {
			log.Warn("OpenTelemetry: the last spans were not exported", "err", err)
		}
	}, nil
}
