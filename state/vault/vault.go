// Package vault seals credentials with envelope encryption under the key ring from
// configuration (URLFLOW_KEYS), and derives the service's other keys from it.
//
// The one idea to hold: a sealed value opens only for the user and the name it was sealed
// for (both are in the associated data), and only while the key ring still holds the key
// that wrapped it. The first key of the ring is active: it seals, and the keys derived from
// it sign. Every other key is verify-only: it opens what it sealed and verifies what its
// derived keys signed, and never seals or signs anything new. That is what lets keys
// rotate without signing anyone out: add a key at the end (verify-only) on every replica,
// then move it to the front (active), reseal, and remove the old key last
// (docs/production.md#keys-and-rotation).
package vault

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/urlflow/urlflow/state"
)

// KeySize is the size of every key in a KeyRing: AES-256.
const KeySize = 32

// A KeyRing holds the keys from configuration (URLFLOW_KEYS), in their order. The first key
// is active: it wraps new data keys and derives the keys that sign. The others are
// verify-only: they still unwrap what they wrapped and verify what their derived keys
// signed, which is how keys rotate.
type KeyRing struct {
	keys []ringKey
}

type ringKey struct {
	id       string
	material []byte
}

var keyIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

// ParseKeyRing parses "kid:base64-of-32-bytes" entries separated by commas. Errors name
// the entry by position and key ID, never the key material.
func ParseKeyRing(s string) (*KeyRing, error) {
	var r KeyRing
	seen := map[string]bool{}
	for i, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		id, b64, ok := strings.Cut(entry, ":")
		if !ok || !keyIDPattern.MatchString(id) {
			return nil, fmt.Errorf("key %d: want kid:base64-of-32-bytes with kid of [A-Za-z0-9_-]", i+1)
		}
		if seen[id] {
			return nil, fmt.Errorf("key %d (%s): key ID used twice", i+1, id)
		}
		seen[id] = true
		material, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			material, err = base64.RawURLEncoding.DecodeString(strings.TrimRight(b64, "="))
		}
		if err != nil {
			return nil, fmt.Errorf("key %d (%s): not base64", i+1, id)
		}
		if len(material) != KeySize {
			return nil, fmt.Errorf("key %d (%s): %d bytes, want %d", i+1, id, len(material), KeySize)
		}
		r.keys = append(r.keys, ringKey{id: id, material: material})
	}
	return &r, nil
}

// GenerateKeyRing returns the text of a new key ring with one random key named kid: an
// entry of URLFLOW_KEYS.
func GenerateKeyRing(kid string) string {
	return kid + ":" + base64.StdEncoding.EncodeToString(randomBytes(KeySize))
}

// NewKeyID returns a key ID for a key made at now: k, the date, and four random hex digits
// (k20260512-3fa9), so that IDs sort by age and two made the same day differ.
func NewKeyID(now time.Time) string {
	return fmt.Sprintf("k%s-%x", now.UTC().Format("20060102"), randomBytes(2))
}

// ValidKeyID reports whether id can name a key of a ring: 1 to 32 of A-Z a-z 0-9 _ -.
func ValidKeyID(id string) bool { return keyIDPattern.MatchString(id) }

// ActiveID returns the ID of the active key.
func (r *KeyRing) ActiveID() string { return r.keys[0].id }

// IDs returns the IDs of the ring's keys in their order, the active one first.
func (r *KeyRing) IDs() []string {
	out := make([]string, len(r.keys))
	for i, k := range r.keys {
		out[i] = k.id
	}
	return out
}

// Has reports whether the ring holds a key with id.
func (r *KeyRing) Has(id string) bool {
	_, ok := r.key(id)
	return ok
}

// Derive returns a 32-byte key for purpose, derived from the active key with HKDF-SHA256:
// the key that signs. Rotating the active key changes every derived key, which is why a
// reader verifies with DeriveAll.
func (r *KeyRing) Derive(purpose string) []byte { return derive(r.keys[0].material, purpose) }

// DeriveAll returns the key for purpose derived from each key of the ring, the active one
// first: the first signs or seals, and every one verifies or opens. Every derived key is
// used this way (session cookies, CSRF tokens, requestStates, elicitation IDs), so that
// what was signed before a rotation still verifies after it while its key is in the ring.
func (r *KeyRing) DeriveAll(purpose string) [][]byte {
	out := make([][]byte, len(r.keys))
	for i, k := range r.keys {
		out[i] = derive(k.material, purpose)
	}
	return out
}

func derive(material []byte, purpose string) []byte {
	k, err := hkdf.Key(sha256.New, material, nil, "urlflow "+purpose, KeySize)
	if err != nil {
		panic(fmt.Sprintf("derive key: %v", err)) // only for lengths HKDF cannot produce
	}
	return k
}

func (r *KeyRing) key(id string) ([]byte, bool) {
	for _, k := range r.keys {
		if k.id == id {
			return k.material, true
		}
	}
	return nil, false
}

// Sealed is a credential encrypted with envelope encryption: a fresh data key encrypts the
// value, and the key ring's KeyID key wraps the data key. Both layers use AES-256-GCM with
// associated data naming the credential's user and name, so a sealed value moved to
// another user or name does not open.
type Sealed struct {
	KeyID      string `json:"kid"`
	WrappedKey []byte `json:"wrappedKey"`
	Ciphertext []byte `json:"ciphertext"`
}

// Vault seals and opens credentials with a key ring.
type Vault struct {
	ring *KeyRing
}

// NewVault returns a Vault on ring.
func NewVault(ring *KeyRing) *Vault { return &Vault{ring: ring} }

// ErrUnopenable is returned when a sealed credential does not open: an unknown key ID,
// another user or name, or tampering.
var ErrUnopenable = errors.New("credential does not open")

func associatedData(userKey, name string) []byte {
	return []byte("urlflow credential v1\x00" + userKey + "\x00" + name)
}

// Seal encrypts secret for user's credential name with the active key.
func (v *Vault) Seal(user state.User, name string, secret state.Secret) (Sealed, error) {
	ad := associatedData(user.Key(), name)
	dataKey := randomBytes(KeySize)
	ct, err := gcmSeal(dataKey, []byte(secret.Reveal()), ad)
	if err != nil {
		return Sealed{}, fmt.Errorf("seal credential %s: %w", name, err)
	}
	active := v.ring.keys[0]
	wrapped, err := gcmSeal(active.material, dataKey, ad)
	if err != nil {
		return Sealed{}, fmt.Errorf("seal credential %s: %w", name, err)
	}
	return Sealed{KeyID: active.id, WrappedKey: wrapped, Ciphertext: ct}, nil
}

// Open decrypts user's credential name. It returns ErrUnopenable when the value was sealed
// for someone or something else, with an unknown key, or was changed.
func (v *Vault) Open(user state.User, name string, s Sealed) (state.Secret, error) {
	kek, ok := v.ring.key(s.KeyID)
	if !ok {
		return state.Secret{}, fmt.Errorf("open credential %s: key %q not in the key ring: %w", name, s.KeyID, ErrUnopenable)
	}
	ad := associatedData(user.Key(), name)
	dataKey, err := gcmOpen(kek, s.WrappedKey, ad)
	if err != nil {
		return state.Secret{}, fmt.Errorf("open credential %s: %w", name, ErrUnopenable)
	}
	plain, err := gcmOpen(dataKey, s.Ciphertext, ad)
	if err != nil {
		return state.Secret{}, fmt.Errorf("open credential %s: %w", name, ErrUnopenable)
	}
	return state.NewSecret(string(plain)), nil
}

// ActiveID returns the ID of the key that Seal and Rewrap wrap data keys with.
func (v *Vault) ActiveID() string { return v.ring.ActiveID() }

// HasKey reports whether the ring holds the key that wrapped s. Without it s never opens
// (its key was retired); with it, only Open tells, since that needs the value decrypted.
func (v *Vault) HasKey(s Sealed) bool { return v.ring.Has(s.KeyID) }

// Rewrap returns s with its data key wrapped by the active key instead of the key that
// wrapped it, for credential name of the user whose key is userKey (state.User.Key). The
// ciphertext stays as it is: the value is never decrypted. It returns s itself when the
// active key wraps it already, and ErrUnopenable when s does not open.
func (v *Vault) Rewrap(userKey, name string, s Sealed) (Sealed, error) {
	active := v.ring.keys[0]
	if s.KeyID == active.id {
		return s, nil
	}
	kek, ok := v.ring.key(s.KeyID)
	if !ok {
		return Sealed{}, fmt.Errorf("rewrap credential %s: key %q not in the key ring: %w", name, s.KeyID, ErrUnopenable)
	}
	ad := associatedData(userKey, name)
	dataKey, err := gcmOpen(kek, s.WrappedKey, ad)
	if err != nil {
		return Sealed{}, fmt.Errorf("rewrap credential %s: %w", name, ErrUnopenable)
	}
	wrapped, err := gcmSeal(active.material, dataKey, ad)
	if err != nil {
		return Sealed{}, fmt.Errorf("rewrap credential %s: %w", name, err)
	}
	return Sealed{KeyID: active.id, WrappedKey: wrapped, Ciphertext: s.Ciphertext}, nil
}

// gcmSeal returns nonce || AES-GCM(key, plain, ad).
func gcmSeal(key, plain, ad []byte) ([]byte, error) {
	aead, err := newGCM(key)
	if err != nil {
		return nil, err
	}
	nonce := randomBytes(aead.NonceSize())
	return aead.Seal(nonce, nonce, plain, ad), nil
}

func gcmOpen(key, sealed, ad []byte) ([]byte, error) {
	aead, err := newGCM(key)
	if err != nil {
		return nil, err
	}
	if len(sealed) < aead.NonceSize() {
		return nil, errors.New("sealed value too short")
	}
	n := aead.NonceSize()
	return aead.Open(nil, sealed[:n], sealed[n:], ad)
}

func newGCM(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b) // never fails (crypto/rand, Go 1.24+)
	return b
}
