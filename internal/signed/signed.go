// Package signed seals small JSON documents with HMAC-SHA256, so that a party that only
// carries one back (an MCP client echoing a requestState) can neither forge nor alter it.
// A sealed document is readable by anyone who holds it: it keeps nothing secret.
package signed

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
)

// MaxLen bounds the text Open accepts.
const MaxLen = 4096

// Errors of Open. Neither quotes the text.
var (
	ErrMalformed = errors.New("it is malformed")
	ErrNotIssued = errors.New("it was not issued by this server or was changed")
)

// Sealer seals documents with its first key and opens those that any of its keys sealed,
// so that a document sealed before a key rotation still opens after it.
type Sealer struct {
	keys [][]byte
}

// NewSealer returns a Sealer that seals with the first of keys and opens with every one
// of them (the active key of a ring first, then the others: vault.KeyRing.DeriveAll).
// There must be one key or more, each of 32 bytes or more.
func NewSealer(keys ...[]byte) Sealer {
	if len(keys) == 0 {
		panic("signed: no key")
	}
	for _, k := range keys {
		if len(k) < 32 {
			panic("signed: the key needs 32 bytes or more")
		}
	}
	return Sealer{keys: keys}
}

func mac(key []byte, payload string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// Seal returns the signed text of doc, which must encode as JSON:
// base64url(JSON) "." base64url(HMAC).
func (s Sealer) Seal(doc any) string {
	data, err := json.Marshal(doc)
	if err != nil {
		panic("signed: a document that does not encode: " + err.Error())
	}
	payload := base64.RawURLEncoding.EncodeToString(data)
	return payload + "." + mac(s.keys[0], payload)
}

// Open decodes into doc the document sealed in text if one of the Sealer's keys sealed it,
// and returns ErrMalformed or ErrNotIssued otherwise.
func (s Sealer) Open(text string, doc any) error {
	payload, sig, ok := strings.Cut(text, ".")
	if !ok || len(text) > MaxLen {
		return ErrMalformed
	}
	if !s.issued(payload, sig) {
		return ErrNotIssued
	}
	data, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil || json.Unmarshal(data, doc) != nil {
		return ErrMalformed
	}
	return nil
}

// issued reports whether sig is the signature of payload under one of the keys.
func (s Sealer) issued(payload, sig string) bool {
	for _, k := range s.keys {
		if hmac.Equal([]byte(sig), []byte(mac(k, payload))) {
			return true
		}
	}
	return false
}
