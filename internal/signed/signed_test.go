package signed

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

type doc struct {
	A string `json:"a"`
	N int    `json:"n"`
}

func TestSealOpen(t *testing.T) {
	s := NewSealer(bytes.Repeat([]byte{1}, 32))
	text := s.Seal(doc{A: "x", N: 7})
	var got doc
	if err := s.Open(text, &got); err != nil || got != (doc{A: "x", N: 7}) {
		t.Fatalf("Open = %+v, %v", got, err)
	}

	other := NewSealer(bytes.Repeat([]byte{2}, 32))
	payload, mac, _ := strings.Cut(text, ".")
	altered := other.Seal(doc{A: "y", N: 7})
	for name, tc := range map[string]struct {
		text string
		want error
	}{
		"another key":       {altered, ErrNotIssued},
		"payload swapped":   {strings.Split(altered, ".")[0] + "." + mac, ErrNotIssued},
		"no signature":      {payload, ErrMalformed},
		"signature removed": {payload + ".", ErrNotIssued},
		"too long":          {strings.Repeat("a", MaxLen) + "." + mac, ErrMalformed},
		"empty":             {"", ErrMalformed},
	} {
		if err := s.Open(tc.text, &got); !errors.Is(err, tc.want) {
			t.Errorf("%s: Open = %v, want %v", name, err, tc.want)
		}
	}

	// A signed payload that is not the document's JSON is malformed, not accepted.
	notJSON := "bm90IGpzb24" // base64url("not json")
	if err := s.Open(notJSON+"."+s.mac(notJSON), &got); !errors.Is(err, ErrMalformed) {
		t.Errorf("signed non-JSON: Open = %v", err)
	}
}

func TestShortKeyRefused(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("a 16-byte key was accepted")
		}
	}()
	NewSealer(make([]byte, 16))
}
