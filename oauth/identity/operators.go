package identity

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
)

// Operators recognises operator tokens (URLFLOW_OPERATOR_TOKENS, and the read-only ones of
// URLFLOW_OPERATOR_READONLY_TOKENS). Operators read every user's elicitations, and those
// with a read-write token cancel and retry them; no operator ever reads or uses a
// credential. Tokens are kept only as SHA-256 digests and compared in constant time.
type Operators struct {
	tokens []operatorToken
}

type operatorToken struct {
	digest [sha256.Size]byte
	op     Operator
}

// Operator is who holds an operator token.
type Operator struct {
	// Name names the token in histories and logs: "token " and the first 8 hexadecimal
	// digits of its SHA-256 digest, which tells tokens apart without revealing them.
	Name string
	// ReadOnly is set for a token that may only read.
	ReadOnly bool
}

// NewOperators returns the recogniser for read-write tokens readWrite and read-only tokens
// readOnly. Empty tokens are ignored.
func NewOperators(readWrite, readOnly []string) *Operators {
	o := &Operators{}
	add := func(tokens []string, ro bool) {
		for _, t := range tokens {
			if t != "" {
				d := sha256.Sum256([]byte(t))
				o.tokens = append(o.tokens, operatorToken{digest: d, op: Operator{Name: "token " + hex.EncodeToString(d[:4]), ReadOnly: ro}})
			}
		}
	}
	add(readWrite, false)
	add(readOnly, true)
	return o
}

// Match returns the operator whose token is token. It compares against every configured
// token, so its timing does not reveal which one matched or how much of one.
func (o *Operators) Match(token string) (Operator, bool) {
	if o == nil || token == "" {
		return Operator{}, false
	}
	d := sha256.Sum256([]byte(token))
	var found Operator
	match := 0
	for _, t := range o.tokens {
		eq := subtle.ConstantTimeCompare(d[:], t.digest[:])
		if eq == 1 {
			found = t.op
		}
		match |= eq
	}
	return found, match == 1
}

// Is reports whether token is an operator token, read-only or not.
func (o *Operators) Is(token string) bool {
	_, ok := o.Match(token)
	return ok
}
