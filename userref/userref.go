// Package userref makes the user reference that a delegating service knows a user by: an
// opaque, stable pseudonym of the user for that one service, so that a service can store it
// instead of the issuer's subject, and two services cannot tell that they serve the same
// person by comparing references.
//
// The one idea to hold: a reference is a keyed hash (HMAC-SHA-256) of the service and the
// user, under a key of its own (URLFLOW_USER_REFERENCE_KEY), not the key ring: rotating
// URLFLOW_KEYS never changes a reference, and changing this key changes every one.
package userref

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base32"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/urlflow/urlflow/state"
)

// Prefix starts every reference, so that one is recognised in logs and support requests.
const Prefix = "usr_"

// MinKeySize is the least number of bytes a key has.
const MinKeySize = 32

// Refs makes the references of users, under one key.
type Refs struct {
	key []byte
}

// ErrShortKey says that a key has fewer than MinKeySize bytes.
var ErrShortKey = fmt.Errorf("a user reference key has at least %d bytes", MinKeySize)

// New returns the Refs made under key, which has at least MinKeySize bytes.
func New(key []byte) (*Refs, error) {
	if len(key) < MinKeySize {
		return nil, ErrShortKey
	}
	return &Refs{key: append([]byte(nil), key...)}, nil
}

// Parse returns the Refs of a key given as base64 (standard or URL alphabet, padded or not)
// of at least MinKeySize bytes, as a setting holds it.
func Parse(text string) (*Refs, error) {
	text = strings.TrimSpace(text)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if key, err := enc.DecodeString(text); err == nil {
			return New(key)
		}
	}
	return nil, errors.New("a user reference key is base64, e.g. the output of: openssl rand -base64 32")
}

// encoding writes references in lower-case letters and digits: they go into URLs, file
// names and case-insensitive columns unchanged.
var encoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// Of returns the reference of user for service: Prefix and 32 characters (160 bits of the
// keyed hash). Each part is length-prefixed, so no two (service, issuer, subject) share an
// input. A nil Refs (a deployment without services, which needs no key) makes none: "".
func (r *Refs) Of(service string, user state.User) string {
	if r == nil {
		return ""
	}
	mac := hmac.New(sha256.New, r.key)
	for _, part := range []string{"urlflow user reference v1", service, user.Issuer, user.Subject} {
		fmt.Fprintf(mac, "%d:%s", len(part), part)
	}
	return Prefix + encoding.EncodeToString(mac.Sum(nil)[:20])
}

// Valid reports whether s has the form of a reference (it does not say whether one was made).
func Valid(s string) bool {
	rest, ok := strings.CutPrefix(s, Prefix)
	if !ok || len(rest) != 32 {
		return false
	}
	_, err := encoding.DecodeString(rest)
	return err == nil
}
