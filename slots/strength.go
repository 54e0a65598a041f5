package slots

import (
	"math"
	"unicode/utf8"

	"github.com/urlflow/urlflow/state"
)

// The least a secret of a slot with an api must be. urlflow redacts the secret from what the
// API sends back, and an answer that depends on whether a guess equals the secret tells the
// guesser something: against a short or simple secret, a tool that can make calls can find
// it by trying. Slots can raise both figures, never lower them.
const (
	// APIMinLength is the least min_length of a slot with an api, in characters.
	APIMinLength = 16
	// APIMinEntropyBits is the least min_entropy_bits of a slot with an api.
	APIMinEntropyBits = 64
)

// Sizes of the character classes EntropyBits counts.
const (
	lowerPool  = 26
	upperPool  = 26
	digitPool  = 10
	symbolPool = 33 // ASCII punctuation and the space
	otherPool  = 100
)

// EntropyBits estimates how many bits of randomness value holds, for refusing values that are
// easy to guess. It is an estimate from the characters alone, generous to random values and
// blind to words and sequences:
//
//   - each character counts log2 of the pool of the classes value uses (lower-case and
//     upper-case ASCII letters 26 each, digits 10, ASCII symbols and the space 33, any other
//     character 100), but at most log2 of the number of distinct characters, plus 1;
//   - at most twice as many characters count as there are distinct ones.
//
// So "1234" estimates 12 bits, sixteen "a" 2, "passwordpassword" 53, twenty digits that
// use all ten 66, and sixteen random letters and digits about 80.
func EntropyBits(value string) float64 {
	distinct := map[rune]bool{}
	var lower, upper, digit, symbol, other bool
	n := 0
	for _, r := range value {
		n++
		distinct[r] = true
		switch {
		case r >= 'a' && r <= 'z':
			lower = true
		case r >= 'A' && r <= 'Z':
			upper = true
		case r >= '0' && r <= '9':
			digit = true
		case r >= ' ' && r <= '~':
			symbol = true
		default:
			other = true
		}
	}
	if n == 0 {
		return 0
	}
	pool := 0
	for _, c := range []struct {
		used bool
		size int
	}{{lower, lowerPool}, {upper, upperPool}, {digit, digitPool}, {symbol, symbolPool}, {other, otherPool}} {
		if c.used {
			pool += c.size
		}
	}
	perChar := min(math.Log2(float64(pool)), math.Log2(float64(len(distinct)))+1)
	counted := min(n, 2*len(distinct))
	return float64(counted) * perChar
}

// Weak reports whether value, stored for the slot, falls short of the minimum that a slot
// with an api has: a value stored before the minimum existed.
func (s *Slot) Weak(value state.Secret) bool { return s.API != nil && !s.Strong(value.Reveal()) }

// Strong reports whether value meets the slot's minimum length and estimated entropy. A
// value stored before the slot had its minimum may not; it still works, and urlflow
// suggests replacing it.
func (s *Slot) Strong(value string) bool {
	v := s.Validation
	return utf8.RuneCountInString(value) >= v.MinLength && EntropyBits(value) >= float64(v.MinEntropyBits)
}
