package userref

import (
	"bytes"
	"encoding/base64"
	"errors"
	"testing"

	"github.com/urlflow/urlflow/state"
)

func TestReferenceIsStablePerServiceAndUnlinkableAcross(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	refs, err := New(key)
	if err != nil {
		t.Fatal(err)
	}
	alice := state.User{Issuer: "https://id.example", Subject: "alice"}
	a1, a2 := refs.Of("weather", alice), refs.Of("weather", alice)
	if a1 != a2 || !Valid(a1) {
		t.Fatalf("references of one user at one service: %q and %q (valid %v)", a1, a2, Valid(a1))
	}
	others := map[string]string{
		"another service":     refs.Of("calendar", alice),
		"another subject":     refs.Of("weather", state.User{Issuer: alice.Issuer, Subject: "bob"}),
		"another issuer":      refs.Of("weather", state.User{Issuer: "https://other.example", Subject: "alice"}),
		"parts moved between": refs.Of("weather", state.User{Issuer: "https://id.examplealice", Subject: ""}),
	}
	for what, ref := range others {
		if ref == a1 {
			t.Errorf("%s gives the same reference %q", what, ref)
		}
	}
	other, _ := New(bytes.Repeat([]byte{8}, 32))
	if other.Of("weather", alice) == a1 {
		t.Error("another key gives the same reference")
	}
}

func TestReferenceVector(t *testing.T) {
	refs, err := New([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	// Computed once and written down: a reference must never change for a given key, or
	// every service's stored references break; a change of the derivation fails here.
	const want = "usr_qzof4g3vypw2uohxzwy37th3ch5twlot"
	got := refs.Of("weather", state.User{Issuer: "https://id.example", Subject: "alice"})
	if got != want {
		t.Fatalf("Of = %q, want %q", got, want)
	}
}

func TestParse(t *testing.T) {
	key := bytes.Repeat([]byte{0xfb}, 32)
	for _, text := range []string{base64.StdEncoding.EncodeToString(key), base64.RawURLEncoding.EncodeToString(key),
		" " + base64.StdEncoding.EncodeToString(key) + "\n"} {
		if _, err := Parse(text); err != nil {
			t.Errorf("Parse(%q): %v", text, err)
		}
	}
	if _, err := Parse(base64.StdEncoding.EncodeToString(key[:31])); !errors.Is(err, ErrShortKey) {
		t.Errorf("a 31-byte key: %v, want ErrShortKey", err)
	}
	if _, err := Parse("not base64!"); err == nil {
		t.Error("text that is not base64 was accepted")
	}
}

func TestValid(t *testing.T) {
	for s, want := range map[string]bool{
		"usr_abcdefghijklmnopqrstuvwxyz234567": true,
		"usr_abcdefghijklmnopqrstuvwxyz23456":  false,
		"usr_ABCDEFGHIJKLMNOPQRSTUVWXYZ234567": false,
		"abcdefghijklmnopqrstuvwxyz234567":     false,
		"":                                     false,
	} {
		if Valid(s) != want {
			t.Errorf("Valid(%q) = %v", s, !want)
		}
	}
}
