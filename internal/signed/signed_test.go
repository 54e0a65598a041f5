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
	payload, sig, _ := strings.Cut(text, ".")
	altered := other.Seal(doc{A: "y", N: 7})
	for name, tc := range map[string]struct {
		text string
		want error
	}{
		"another key":       {altered, ErrNotIssued},
		"payload swapped":   {strings.Split(altered, ".")[0] + "." + sig, ErrNotIssued},
		"no signature":      {payload, ErrMalformed},
		"signature removed": {payload + ".", ErrNotIssued},
		"too long":          {strings.Repeat("a", MaxLen) + "." + sig, ErrMalformed},
		"empty":             {"", ErrMalformed},
	} {
		if err := s.Open(tc.text, &got); !errors.Is(err, tc.want) {
			t.Errorf("%s: Open = %v, want %v", name, err, tc.want)
		}
	}

	// A signed payload that is not the document's JSON is malformed, not accepted.
	notJSON := "bm90IGpzb24" // base64url("not json")
	if err := s.Open(notJSON+"."+mac(s.keys[0], notJSON), &got); !errors.Is(err, ErrMalformed) {
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

func TestASealerOpensWhatAnyOfItsKeysSealedAndSealsWithTheFirst(t *testing.T) {
	oldKey, newKey := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	before := NewSealer(oldKey)
	during := NewSealer(newKey, oldKey)
	after := NewSealer(newKey)
	var got doc
	if err := during.Open(before.Seal(doc{A: "old"}), &got); err != nil {
		t.Errorf("sealed under [old], opened by [new, old]: %v", err)
	}
	sealed := during.Seal(doc{A: "new"})
	if err := after.Open(sealed, &got); err != nil {
		t.Errorf("sealed under [new, old], opened by [new]: %v", err)
	}
	if err := before.Open(sealed, &got); !errors.Is(err, ErrNotIssued) {
		t.Errorf("sealed under [new, old], opened by [old] = %v, want ErrNotIssued: the first key seals", err)
	}
	if err := after.Open(before.Seal(doc{A: "old"}), &got); !errors.Is(err, ErrNotIssued) {
		t.Errorf("sealed under [old], opened by [new] = %v, want ErrNotIssued", err)
	}
}
