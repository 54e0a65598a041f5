package slots

import (
	"errors"
	"strings"
	"testing"

	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/upstream"
)

func TestEntropyBitsRefusesWhatIsEasyToGuess(t *testing.T) {
	tests := []struct {
		value    string
		min, max float64
	}{
		{"", 0, 0},
		{"1234", 12, 12},                    // a PIN
		{strings.Repeat("a", 16), 2, 2},     // one character, repeated
		{"passwordpassword", 53, 54},        // few distinct characters
		{"48203917561029384756", 66, 67},    // every digit: 20 × log2(10)
		{"4820391756102938475", 63, 64},     // one digit fewer
		{"Xq7kP2mZ9LwVt4Rb", 79, 81},        // random letters and digits
		{"3f9a1c0b7e2d4a68", 78, 79},        // random hex
		{"demo_0123456789abcdef", 110, 111}, // the README's example key
		{strings.Repeat("ab", 40), 8, 8},    // a long pattern counts its distinct characters
		{"ééééééééééééééééé", 2, 2},         // non-ASCII, repeated
		{"日本語のパスワードです", 49, 50},             // non-ASCII, distinct, 11 characters
	}
	for _, tt := range tests {
		if got := EntropyBits(tt.value); got < tt.min || got > tt.max {
			t.Errorf("EntropyBits(%q) = %.1f, want %.0f to %.0f", tt.value, got, tt.min, tt.max)
		}
	}
}

func apiSlot(t *testing.T, v Validation) *Slot {
	t.Helper()
	c, err := NewCatalog([]Slot{{Name: "k", Label: "Key", Validation: v,
		API: &upstream.API{BaseURL: "https://api.example", Inject: upstream.Injection{Header: "Authorization"}}}}, "")
	if err != nil {
		t.Fatal(err)
	}
	s, _ := c.Lookup("k")
	return s
}

func TestASlotWithAnAPIRefusesAWeakValueAndSaysWhy(t *testing.T) {
	slot := apiSlot(t, Validation{MinLength: 4})
	if slot.Validation.MinLength != APIMinLength || slot.Validation.MinEntropyBits != APIMinEntropyBits {
		t.Fatalf("minimum not applied: %+v", slot.Validation)
	}
	tests := []struct {
		value string
		rule  string // "" means valid
	}{
		{"1234", "too short: it needs at least 16 characters"},
		{"0000000000001234", "too easy to guess: it needs an estimated 64 bits"},
		{"passwordpassword", "too easy to guess"},
		{"Xq7kP2mZ9LwVt4Rb", ""},
	}
	for _, tt := range tests {
		err := slot.Validate(state.NewSecret(tt.value))
		if tt.rule == "" {
			if err != nil || !slot.Strong(tt.value) {
				t.Errorf("%q refused: %v", tt.value, err)
			}
			continue
		}
		var invalid *InvalidValueError
		if !errors.As(err, &invalid) || !strings.Contains(invalid.Rule, tt.rule) {
			t.Errorf("%q: got %v, want a rule saying %q", tt.value, err, tt.rule)
		}
		if slot.Strong(tt.value) {
			t.Errorf("%q counts as strong", tt.value)
		}
		if strings.Contains(err.Error(), tt.value) {
			t.Errorf("the error repeats the value: %v", err)
		}
	}
	rules := strings.Join(slot.Rules(), " ")
	for _, want := range []string{"Between 16 and 4096 characters.", "at least an estimated 64 bits of randomness"} {
		if !strings.Contains(rules, want) {
			t.Errorf("rules %q lack %q", rules, want)
		}
	}
}

func TestAStrengthMinimumCanBeRaisedNotLowered(t *testing.T) {
	raised := apiSlot(t, Validation{MinLength: 32, MinEntropyBits: 128})
	if err := raised.Validate(state.NewSecret("Xq7kP2mZ9LwVt4Rb")); err == nil {
		t.Error("a value under the raised minimum was accepted")
	}
	if err := raised.Validate(state.NewSecret("Xq7kP2mZ9LwVt4RbHn3sW8cJ5yTf6gDe")); err != nil {
		t.Errorf("a value above the raised minimum was refused: %v", err)
	}

	api := &upstream.API{BaseURL: "https://api.example", Inject: upstream.Injection{Query: "key"}}
	_, err := NewCatalog([]Slot{
		{Name: "low_entropy", Label: "x", API: api, Validation: Validation{MinEntropyBits: 40}},
		{Name: "short_max", Label: "x", API: api, Validation: Validation{MaxLength: 8}},
		{Name: "negative", Label: "x", Validation: Validation{MinEntropyBits: -1}},
	}, "")
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{"low_entropy: min_entropy_bits 40 is below 64", "short_max: max_length 8 is below 16",
		"negative: min_length, max_length and min_entropy_bits cannot be negative"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestASlotWithoutAnAPIKeepsItsOwnRules(t *testing.T) {
	c, err := NewCatalog([]Slot{{Name: "pin", Label: "PIN", Validation: Validation{MinLength: 4, MaxLength: 4, Pattern: "[0-9]+"}}}, "")
	if err != nil {
		t.Fatal(err)
	}
	s, _ := c.Lookup("pin")
	if err := s.Validate(state.NewSecret("1234")); err != nil || !s.Strong("1234") {
		t.Fatalf("a PIN that only urlflow stores was refused: %v", err)
	}
	if rules := strings.Join(s.Rules(), " "); strings.Contains(rules, "bits") {
		t.Errorf("rules of a slot without a minimum mention one: %q", rules)
	}
}
