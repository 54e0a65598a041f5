package state

import (
	"fmt"
	"io"
	"log/slog"
)

// Secret holds a credential in clear. Its value never prints: fmt, slog and encoding/json
// all show "[redacted]", and because the value sits behind a pointer, even a Secret in an
// unexported struct field (where fmt cannot call its methods) prints as an address, not the
// value. Only Reveal returns it, at the one place that uses it.
type Secret struct{ value *string }

// NewSecret wraps v.
func NewSecret(v string) Secret { return Secret{value: &v} }

// Reveal returns the secret in clear.
func (s Secret) Reveal() string {
	if s.value == nil {
		return ""
	}
	return *s.value
}

// IsZero reports whether s is empty.
func (s Secret) IsZero() bool { return s.Reveal() == "" }

const redacted = "[redacted]"

// String returns "[redacted]".
func (Secret) String() string { return redacted }

// GoString returns "[redacted]".
func (Secret) GoString() string { return redacted }

// Format writes "[redacted]" for every verb: without it, verbs that fmt does not route
// to String (%d, for one) would print the value.
func (Secret) Format(f fmt.State, _ rune) { io.WriteString(f, redacted) }

// LogValue returns "[redacted]".
func (Secret) LogValue() slog.Value { return slog.StringValue(redacted) }

// MarshalJSON returns "[redacted]".
func (Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }
