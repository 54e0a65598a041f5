package flow

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base32"
	"encoding/base64"
	"fmt"
	"regexp"
	"sync"
)

// An elicitation ID carries, sealed, the key of its user, so that a replica finds the
// record (which lives in the user's slot) from the ID alone, without an index read. It is
// the base32 text (no padding) of a random 12-byte nonce and the user key's 16 bytes
// sealed with AES-256-GCM under that nonce, with a 12-byte tag: 64 characters. Two IDs of
// one user share nothing a reader can compare, and an ID that was not made with one of the
// store's keys opens to nothing and is not looked up at all.
//
// IDs made before (26 characters of random base32, legacyIDPattern) carry nothing; the
// eid:ID index written with them is still read for them until they are past retention.

const (
	idNonceSize = 12
	idTagSize   = 12
	userKeySize = 16
)

var (
	idEncoding      = base32.StdEncoding.WithPadding(base32.NoPadding)
	idPattern       = regexp.MustCompile(`^[A-Z2-7]{64}$`)
	legacyIDPattern = regexp.MustCompile(`^[A-Z2-7]{26}$`)
	idAssociated    = []byte("urlflow elicitation id")
)

// ValidID reports whether id has the shape of an elicitation ID, of either form. Anything
// else is not looked up at all.
func ValidID(id string) bool { return idPattern.MatchString(id) || legacyIDPattern.MatchString(id) }

// idSealer seals user keys into IDs with the first of its keys, and opens them with any.
type idSealer struct {
	aeads []cipher.AEAD
}

// processIDKey is the key of stores given none (tests): made once per process.
var processIDKey = sync.OnceValue(func() []byte {
	k := make([]byte, 32)
	rand.Read(k)
	return k
})

func newIDSealer(keys [][]byte) (*idSealer, error) {
	if len(keys) == 0 {
		keys = [][]byte{processIDKey()}
	}
	s := &idSealer{}
	for i, k := range keys {
		block, err := aes.NewCipher(k)
		if err != nil {
			return nil, fmt.Errorf("elicitation ID key %d: %w", i+1, err)
		}
		aead, err := cipher.NewGCMWithTagSize(block, idTagSize)
		if err != nil {
			return nil, fmt.Errorf("elicitation ID key %d: %w", i+1, err)
		}
		s.aeads = append(s.aeads, aead)
	}
	return s, nil
}

// newID returns a new ID that carries userKey (state.User.Key).
func (s *idSealer) newID(userKey string) (string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(userKey)
	if err != nil || len(raw) != userKeySize {
		return "", fmt.Errorf("new elicitation ID: user key %q is not %d bytes of base64", userKey, userKeySize)
	}
	out := make([]byte, idNonceSize, idNonceSize+userKeySize+idTagSize)
	rand.Read(out)
	out = s.aeads[0].Seal(out, out, raw, idAssociated)
	return idEncoding.EncodeToString(out), nil
}

// userKey returns the user key that id carries, and false when id is not an ID of this
// form made with one of the sealer's keys.
func (s *idSealer) userKey(id string) (string, bool) {
	if !idPattern.MatchString(id) {
		return "", false
	}
	b, err := idEncoding.DecodeString(id)
	if err != nil {
		return "", false
	}
	for _, aead := range s.aeads {
		if raw, err := aead.Open(nil, b[:idNonceSize], b[idNonceSize:], idAssociated); err == nil {
			return base64.RawURLEncoding.EncodeToString(raw), true
		}
	}
	return "", false
}
