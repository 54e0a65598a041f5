package state

import (
	"fmt"
	"regexp"
	"unicode"
	"unicode/utf8"
)

// Metadata is a delegating service's own small map of strings about a flow and the
// credential it stores: given in its create request, kept with both, and shown back to the
// service (answers, events, webhooks) and to operators, never to the user's client.
type Metadata map[string]string

// The bounds of Metadata.
const (
	MetadataEntries  = 16   // at most this many entries
	MetadataKeyBytes = 40   // each key 1 to this many bytes of metadataKey
	MetadataBytes    = 2048 // keys and values together
)

// metadataKey is the form of a key: letters, digits and . _ : -, starting with a letter or
// digit.
var metadataKey = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]*$`)

// CheckMetadata returns what is wrong with m, or nil: too many entries, a key of the wrong
// form, a value that is not UTF-8 or holds a control character, more than MetadataBytes in
// all. Nothing of a value is repeated in the error.
func CheckMetadata(m Metadata) error {
	if len(m) > MetadataEntries {
		return fmt.Errorf("at most %d entries, got %d", MetadataEntries, len(m))
	}
	total := 0
	for k, v := range m {
		if len(k) > MetadataKeyBytes || !metadataKey.MatchString(k) {
			return fmt.Errorf("key %q: want 1 to %d of A-Z a-z 0-9 . _ : -, starting with a letter or digit", truncate(k), MetadataKeyBytes)
		}
		if !utf8.ValidString(v) {
			return fmt.Errorf("the value of %s is not UTF-8", k)
		}
		for _, r := range v {
			if unicode.IsControl(r) {
				return fmt.Errorf("the value of %s holds a control character", k)
			}
		}
		total += len(k) + len(v)
	}
	if total > MetadataBytes {
		return fmt.Errorf("at most %d bytes of keys and values together, got %d", MetadataBytes, total)
	}
	return nil
}

// truncate cuts a key that is too long to quote in full.
func truncate(s string) string {
	if len(s) <= MetadataKeyBytes+10 {
		return s
	}
	return s[:MetadataKeyBytes] + "…"
}
