package main

import (
	"io"
	"log/slog"

	"github.com/urlflow/urlflow/state"
)

// newLogger returns the log of urlflow dev or serve on w, at the level and in the format
// cfg sets, and sends go-redis's own messages to it too.
func newLogger(cfg *config, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	var log *slog.Logger
	if cfg.LogFormat == "json" {
		log = slog.New(slog.NewJSONHandler(w, opts))
	} else {
		log = slog.New(slog.NewTextHandler(w, opts))
	}
	state.LogRedisTo(log)
	return log
}
