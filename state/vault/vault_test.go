package vault

import (
	"bytes"
	"encoding/base64"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/urlflow/urlflow/state"
)

// testVault returns a Vault on a fresh one-key ring.
var (
	alice = state.User{Issuer: "https://id.example", Subject: "alice"}
	bob   = state.User{Issuer: "https://id.example", Subject: "bob"}
)

func testVault(t testing.TB) *Vault {
	t.Helper()
	return NewVault(mustParseKeyRing(t, GenerateKeyRing("test")))
}

func mustParseKeyRing(t testing.TB, s string) *KeyRing {
	t.Helper()
	r, err := ParseKeyRing(s)
	if err != nil {
		t.Fatalf("ParseKeyRing: %v", err)
	}
	return r
}

// material returns n bytes of key material that differ for every seed.
func material(seed byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i)*7
	}
	return b
}

var std = base64.StdEncoding.EncodeToString

func TestParseKeyRingAcceptsWellFormedRings(t *testing.T) {
	k1, k2 := material(1, KeySize), material(0xf0, KeySize) // 0xf0.. encodes to + and / in std
	for _, tt := range []struct {
		name string
		text string
		ids  []string
		keys [][]byte
	}{
		{"one key", "k1:" + std(k1), []string{"k1"}, [][]byte{k1}},
		{"url alphabet without padding", "k2:" + base64.RawURLEncoding.EncodeToString(k2), []string{"k2"}, [][]byte{k2}},
		{"url alphabet with padding", "k2:" + base64.URLEncoding.EncodeToString(k2), []string{"k2"}, [][]byte{k2}},
		{"two keys, first active", "new:" + std(k2) + ",old:" + std(k1), []string{"new", "old"}, [][]byte{k2, k1}},
		{"spaces around entries", "  new:" + std(k2) + " ,\told:" + std(k1) + "\n", []string{"new", "old"}, [][]byte{k2, k1}},
		{"every ID character", "Key_2026-03:" + std(k1), []string{"Key_2026-03"}, [][]byte{k1}},
		{"ID of 32 characters", strings.Repeat("a", 32) + ":" + std(k1), []string{strings.Repeat("a", 32)}, [][]byte{k1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseKeyRing(tt.text)
			if err != nil {
				t.Fatalf("ParseKeyRing: %v", err)
			}
			if got := r.ActiveID(); got != tt.ids[0] {
				t.Errorf("ActiveID = %q, want %q", got, tt.ids[0])
			}
			var ids []string
			for _, k := range r.keys {
				ids = append(ids, k.id)
			}
			if !slices.Equal(ids, tt.ids) {
				t.Errorf("key IDs = %v, want %v", ids, tt.ids)
			}
			for i, id := range tt.ids {
				if got, ok := r.key(id); !ok || !bytes.Equal(got, tt.keys[i]) {
					t.Errorf("key %s = %x, want %x", id, got, tt.keys[i])
				}
			}
		})
	}
}

func TestParseKeyRingRefusesMalformedRingsWithoutQuotingKeys(t *testing.T) {
	good := std(material(1, KeySize))
	for _, tt := range []struct {
		name string
		text string
		// want is a part of the error message that helps to find the entry.
		want string
	}{
		{"empty", "", "key 1"},
		{"blank", "   ", "key 1"},
		{"no key ID", good, "key 1"},
		{"empty key ID", ":" + good, "key 1"},
		{"space in key ID", "k 1:" + good, "key 1"},
		{"dot in key ID", "k.1:" + good, "key 1"},
		{"non-ASCII key ID", "schlüssel:" + good, "key 1"},
		{"key ID of 33 characters", strings.Repeat("a", 33) + ":" + good, "key 1"},
		{"key ID used twice", "a:" + good + ",a:" + std(material(9, KeySize)), "key 2 (a)"},
		{"not base64", "k1:not*base64*key*material*at*all", "key 1 (k1)"},
		{"empty key", "k1:", "key 1 (k1)"},
		{"16 bytes", "k1:" + std(material(3, 16)), "key 1 (k1)"},
		{"33 bytes", "k1:" + std(material(4, 33)), "key 1 (k1)"},
		{"64 bytes", "k1:" + std(material(5, 64)), "key 1 (k1)"},
		{"trailing comma", "k1:" + good + ",", "key 2"},
		{"leading comma", ",k1:" + good, "key 1"},
		{"second key bad", "k1:" + good + ",k2:" + std(material(6, 31)), "key 2 (k2)"},
		{"semicolon separated", "k1:" + good + ";k2:" + good, "key 1 (k1)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseKeyRing(tt.text)
			if err == nil {
				t.Fatalf("ParseKeyRing accepted %q as %d keys", tt.text, len(r.keys))
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not name %q", err, tt.want)
			}
			for _, entry := range strings.Split(tt.text, ",") {
				_, key, ok := strings.Cut(entry, ":")
				if !ok {
					key = entry
				}
				if key = strings.TrimSpace(key); len(key) >= 8 && strings.Contains(err.Error(), key) {
					t.Errorf("error %q quotes key material %q", err, key)
				}
			}
		})
	}
}

func TestGenerateKeyRingMakesAFreshUsableRing(t *testing.T) {
	a, b := GenerateKeyRing("main"), GenerateKeyRing("main")
	if a == b {
		t.Fatalf("two generated rings are the same: %q", a)
	}
	r := mustParseKeyRing(t, a)
	if r.ActiveID() != "main" {
		t.Errorf("ActiveID = %q, want main", r.ActiveID())
	}
}

func TestSealThenOpenReturnsTheSecret(t *testing.T) {
	v := testVault(t)
	for _, value := range []string{"", "s3cret", "ünïcödé ✓ \x00 binary", strings.Repeat("long ", 4000)} {
		sealed, err := v.Seal(alice, "demo_api_key", state.NewSecret(value))
		if err != nil {
			t.Fatalf("Seal: %v", err)
		}
		if sealed.KeyID != "test" {
			t.Errorf("sealed with key %q, want the active key test", sealed.KeyID)
		}
		if len(value) >= 6 && bytes.Contains(sealed.Ciphertext, []byte(value)) {
			t.Errorf("ciphertext contains the secret")
		}
		got, err := v.Open(alice, "demo_api_key", sealed)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		if got.Reveal() != value {
			t.Errorf("Open = %q, want %q", got.Reveal(), value)
		}
	}
	a, _ := v.Seal(alice, "demo_api_key", state.NewSecret("same"))
	b, _ := v.Seal(alice, "demo_api_key", state.NewSecret("same"))
	if bytes.Equal(a.Ciphertext, b.Ciphertext) || bytes.Equal(a.WrappedKey, b.WrappedKey) {
		t.Errorf("two seals of the same value are equal: data key or nonce reused")
	}
}

func TestOpenRefusesWhatWasNotSealedForIt(t *testing.T) {
	const value = "s3cret-value"
	v := testVault(t)
	sealed, err := v.Seal(alice, "demo_api_key", state.NewSecret(value))
	if err != nil {
		t.Fatal(err)
	}
	other, err := v.Seal(alice, "demo_api_key", state.NewSecret("other"))
	if err != nil {
		t.Fatal(err)
	}
	flip := func(b []byte, i int) []byte {
		b = slices.Clone(b)
		b[(i+len(b))%len(b)] ^= 0x01
		return b
	}
	for _, tt := range []struct {
		name   string
		vault  *Vault
		user   state.User
		secret string
		sealed Sealed
	}{
		{"another user", v, bob, "demo_api_key", sealed},
		{"same subject at another issuer", v, state.User{Issuer: "https://evil.example", Subject: "alice"}, "demo_api_key", sealed},
		{"another name", v, alice, "other_key", sealed},
		{"ciphertext changed at the end", v, alice, "demo_api_key", Sealed{sealed.KeyID, sealed.WrappedKey, flip(sealed.Ciphertext, -1)}},
		{"ciphertext nonce changed", v, alice, "demo_api_key", Sealed{sealed.KeyID, sealed.WrappedKey, flip(sealed.Ciphertext, 0)}},
		{"ciphertext truncated", v, alice, "demo_api_key", Sealed{sealed.KeyID, sealed.WrappedKey, sealed.Ciphertext[:5]}},
		{"ciphertext empty", v, alice, "demo_api_key", Sealed{sealed.KeyID, sealed.WrappedKey, nil}},
		{"ciphertext of another seal", v, alice, "demo_api_key", Sealed{sealed.KeyID, sealed.WrappedKey, other.Ciphertext}},
		{"wrapped key changed", v, alice, "demo_api_key", Sealed{sealed.KeyID, flip(sealed.WrappedKey, 20), sealed.Ciphertext}},
		{"wrapped key truncated", v, alice, "demo_api_key", Sealed{sealed.KeyID, sealed.WrappedKey[:11], sealed.Ciphertext}},
		{"wrapped key of another seal", v, alice, "demo_api_key", Sealed{sealed.KeyID, other.WrappedKey, sealed.Ciphertext}},
		{"unknown key ID", v, alice, "demo_api_key", Sealed{"k9", sealed.WrappedKey, sealed.Ciphertext}},
		{"no key ID", v, alice, "demo_api_key", Sealed{"", sealed.WrappedKey, sealed.Ciphertext}},
		{"same key ID, other key", NewVault(mustParseKeyRing(t, "test:"+std(material(7, KeySize)))), alice, "demo_api_key", sealed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.vault.Open(tt.user, tt.secret, tt.sealed)
			if !errors.Is(err, ErrUnopenable) {
				t.Fatalf("Open error = %v, want ErrUnopenable", err)
			}
			if !got.IsZero() {
				t.Errorf("Open returned a value along with the error")
			}
			if strings.Contains(err.Error(), value) {
				t.Errorf("error %q contains the secret", err)
			}
		})
	}
}

func TestRotatedRingOpensOldSealsAndSealsWithTheNewKey(t *testing.T) {
	a, b := "A:"+std(material(10, KeySize)), "B:"+std(material(20, KeySize))
	before := NewVault(mustParseKeyRing(t, a))
	old, err := before.Seal(alice, "demo_api_key", state.NewSecret("sealed under A"))
	if err != nil {
		t.Fatal(err)
	}

	after := NewVault(mustParseKeyRing(t, b+","+a))
	if got, err := after.Open(alice, "demo_api_key", old); err != nil || got.Reveal() != "sealed under A" {
		t.Errorf("rotated ring opens the old seal as %q, %v", got.Reveal(), err)
	}
	fresh, err := after.Seal(alice, "demo_api_key", state.NewSecret("sealed under B"))
	if err != nil {
		t.Fatal(err)
	}
	if fresh.KeyID != "B" {
		t.Errorf("rotated ring seals with key %q, want B", fresh.KeyID)
	}
	if got, err := after.Open(alice, "demo_api_key", fresh); err != nil || got.Reveal() != "sealed under B" {
		t.Errorf("rotated ring opens its own seal as %q, %v", got.Reveal(), err)
	}
	if _, err := before.Open(alice, "demo_api_key", fresh); !errors.Is(err, ErrUnopenable) {
		t.Errorf("the old ring opens a seal under B (err %v)", err)
	}
	retired := NewVault(mustParseKeyRing(t, b))
	if _, err := retired.Open(alice, "demo_api_key", old); !errors.Is(err, ErrUnopenable) {
		t.Errorf("a ring without A opens a seal under A (err %v)", err)
	}
	if !after.HasKey(old) || !after.HasKey(fresh) || retired.HasKey(old) || !retired.HasKey(fresh) {
		t.Error("HasKey does not say which ring holds the key of a seal")
	}
}

func TestDeriveIsStableAndSeparatesPurposes(t *testing.T) {
	a, b := "A:"+std(material(10, KeySize)), "B:"+std(material(20, KeySize))
	ring := mustParseKeyRing(t, a)
	cookie := ring.Derive("session cookie")
	if len(cookie) != KeySize {
		t.Fatalf("Derive returned %d bytes, want %d", len(cookie), KeySize)
	}
	for _, tt := range []struct {
		name  string
		other []byte
		same  bool
	}{
		{"same ring, same purpose", ring.Derive("session cookie"), true},
		{"same text parsed again", mustParseKeyRing(t, a).Derive("session cookie"), true},
		{"older keys behind the active one do not matter", mustParseKeyRing(t, a+","+b).Derive("session cookie"), true},
		{"another purpose", ring.Derive("request state"), false},
		{"a purpose that only extends it", ring.Derive("session cookie2"), false},
		{"another active key", mustParseKeyRing(t, b+","+a).Derive("session cookie"), false},
		{"the active key itself", ring.keys[0].material, false},
	} {
		if got := bytes.Equal(cookie, tt.other); got != tt.same {
			t.Errorf("%s: equal = %v, want %v", tt.name, got, tt.same)
		}
	}
}

func FuzzParseKeyRing(f *testing.F) {
	good, other := std(material(1, KeySize)), base64.RawURLEncoding.EncodeToString(material(0xf0, KeySize))
	for _, seed := range []string{
		"", ",", ":", "k1:" + good, "k1:" + other, "new:" + good + ", old:" + other,
		"a:" + good + ",a:" + good, "k1:" + good[:20], "k1:" + good + "==", "k1:" + good + ",",
		"ключ:" + good, strings.Repeat("a", 40) + ":" + good, "k1:\n" + good,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		r, err := ParseKeyRing(text)
		if err != nil {
			if r != nil {
				t.Errorf("ParseKeyRing returned a ring with error %v", err)
			}
			return
		}
		if r.ActiveID() == "" || len(r.Derive("fuzz")) != KeySize {
			t.Fatalf("accepted ring %q has no usable active key", text)
		}
		v := NewVault(r)
		sealed, err := v.Seal(alice, "fuzz", state.NewSecret("value"))
		if err != nil {
			t.Fatalf("Seal with accepted ring %q: %v", text, err)
		}
		if sealed.KeyID != r.ActiveID() {
			t.Errorf("sealed with %q, want the active key %q", sealed.KeyID, r.ActiveID())
		}
		got, err := v.Open(alice, "fuzz", sealed)
		if err != nil || got.Reveal() != "value" {
			t.Fatalf("accepted ring %q does not round-trip: %q, %v", text, got.Reveal(), err)
		}
	})
}
