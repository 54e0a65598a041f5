package state

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

const plaintext = "hunter2-plaintext"

// form is how a secret travels in other packages: an exported field of a struct.
type form struct {
	Slot  string
	Value Secret
}

func TestSecretNeverPrintsItsValue(t *testing.T) {
	s := NewSecret(plaintext)
	f := form{Slot: "demo_api_key", Value: s}
	for _, tt := range []struct {
		name string
		out  string
	}{
		{"%v", fmt.Sprintf("%v", s)},
		{"%s", fmt.Sprintf("%s", s)},
		{"%+v", fmt.Sprintf("%+v", s)},
		{"%#v", fmt.Sprintf("%#v", s)},
		{"%q", fmt.Sprintf("%q", s)},
		{"%d", fmt.Sprintf("%d", s)},
		{"%x", fmt.Sprintf("%x", s)},
		{"Sprint", fmt.Sprint(s)},
		{"Sprintln", fmt.Sprintln("value", s)},
		{"pointer %v", fmt.Sprintf("%v", &s)},
		{"pointer %#v", fmt.Sprintf("%#v", &s)},
		{"struct %v", fmt.Sprintf("%v", f)},
		{"struct %+v", fmt.Sprintf("%+v", f)},
		{"struct %#v", fmt.Sprintf("%#v", f)},
		{"struct pointer %+v", fmt.Sprintf("%+v", &f)},
		{"slice %v", fmt.Sprintf("%v", []Secret{s})},
		{"map %v", fmt.Sprintf("%v", map[string]Secret{"k": s})},
		{"error", fmt.Errorf("bad value %v", s).Error()},
	} {
		if strings.Contains(tt.out, plaintext) || !strings.Contains(tt.out, "[redacted]") {
			t.Errorf("%s printed %q, want [redacted] and never the value", tt.name, tt.out)
		}
	}
}

func TestSecretNeverReachesALog(t *testing.T) {
	s := NewSecret(plaintext)
	for _, tt := range []struct {
		name    string
		handler func(*bytes.Buffer) slog.Handler
	}{
		{"json", func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) }},
		{"text", func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) }},
	} {
		for _, attr := range []slog.Attr{
			slog.Any("secret", s),
			slog.Any("secret", &s),
			slog.Any("form", form{Slot: "demo_api_key", Value: s}),
			slog.Any("form", &form{Slot: "demo_api_key", Value: s}),
			slog.Group("request", slog.Any("secret", s)),
		} {
			var buf bytes.Buffer
			slog.New(tt.handler(&buf)).Info("secret received", attr)
			if out := buf.String(); strings.Contains(out, plaintext) || !strings.Contains(out, "[redacted]") {
				t.Errorf("%s handler logged %v as %q, want [redacted] and never the value", tt.name, attr, out)
			}
		}
		var buf bytes.Buffer
		slog.New(tt.handler(&buf)).With("secret", s).Info("with")
		if out := buf.String(); strings.Contains(out, plaintext) {
			t.Errorf("%s handler logged Logger.With as %q", tt.name, out)
		}
	}
}

func TestSecretMarshalsToJSONRedacted(t *testing.T) {
	s := NewSecret(plaintext)
	for _, v := range []any{s, &s, form{Slot: "demo_api_key", Value: s}, map[string]Secret{"k": s}, []Secret{s}} {
		out, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("json.Marshal(%T): %v", v, err)
		}
		if strings.Contains(string(out), plaintext) || !strings.Contains(string(out), `"[redacted]"`) {
			t.Errorf("json.Marshal(%T) = %s, want \"[redacted]\" and never the value", v, out)
		}
	}
}

func TestRevealReturnsTheValue(t *testing.T) {
	if got := NewSecret(plaintext).Reveal(); got != plaintext {
		t.Errorf("Reveal = %q, want %q", got, plaintext)
	}
	for _, tt := range []struct {
		secret Secret
		zero   bool
	}{
		{Secret{}, true},
		{NewSecret(""), true},
		{NewSecret(" "), false},
		{NewSecret(plaintext), false},
	} {
		if got := tt.secret.IsZero(); got != tt.zero {
			t.Errorf("IsZero of %q = %v, want %v", tt.secret.Reveal(), got, tt.zero)
		}
	}
}

func TestSecretInAnUnexportedFieldDoesNotPrintItsValue(t *testing.T) {
	const value = "hunter2-unexported"
	type holder struct {
		name   string
		secret Secret
	}
	h := holder{name: "slot", secret: NewSecret(value)}
	for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
		if out := fmt.Sprintf(format, h); strings.Contains(out, value) {
			t.Errorf("%s of a struct with an unexported Secret printed the value: %s", format, out)
		}
	}
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "holder", h)
	if strings.Contains(buf.String(), value) {
		t.Errorf("slog printed the value: %s", buf.String())
	}
}
