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

// Sealer seals and opens documents with one key.
type Sealer struct {
	key []byte
}

// NewSealer returns a Sealer for key, which must have 32 bytes or more.
func NewSealer(key []byte) Sealer {
	if len(key) < 32 {
		panic("signed: the key needs 32 bytes or more")
	}
	return Sealer{key: key}
}

func (s Sealer) mac(payload string) string {
	m := hmac.New(sha256.New, s.key)
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
	return payload + "." + s.mac(payload)
}

// Open decodes into doc the document sealed in text if this key sealed it, and returns
// ErrMalformed or ErrNotIssued otherwise.
func (s Sealer) Open(text string, doc any) error {
	payload, mac, ok := strings.Cut(text, ".")
	if !ok || len(text) > MaxLen {
		return ErrMalformed
	}
	if !hmac.Equal([]byte(mac), []byte(s.mac(payload))) {
		return ErrNotIssued
	}
	data, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil || json.Unmarshal(data, doc) != nil {
		return ErrMalformed
	}
	return nil
}
