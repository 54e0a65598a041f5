package identity

import (
	"crypto/sha256"
	"crypto/subtle"
)

// Operators recognises operator tokens (URLFLOW_OPERATOR_TOKENS). Operators can read and
// cancel any elicitation, never read or use a credential. Tokens are kept only as SHA-256
// digests and compared in constant time.
type Operators struct {
	digests [][sha256.Size]byte
}

// NewOperators returns the recogniser for tokens. Empty tokens are ignored.
func NewOperators(tokens []string) *Operators {
	o := &Operators{}
	for _, t := range tokens {
		if t != "" {
			o.digests = append(o.digests, sha256.Sum256([]byte(t)))
		}
	}
	return o
}

// Is reports whether token is an operator token. It compares against every configured
// token, so its timing does not reveal which one matched or how much of one.
func (o *Operators) Is(token string) bool {
	if o == nil || token == "" {
		return false
	}
	d := sha256.Sum256([]byte(token))
	match := 0
	for _, want := range o.digests {
		match |= subtle.ConstantTimeCompare(d[:], want[:])
	}
	return match == 1
}
