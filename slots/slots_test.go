package slots

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/upstream"
)

func demo(t *testing.T) *Slot {
	t.Helper()
	c, err := NewCatalog([]Slot{{
		Name: "demo_api_key", Label: "Demo API key",
		Validation: Validation{MinLength: 21, MaxLength: 64, Pattern: "demo_[A-Za-z0-9]{16,}", PatternHint: "It starts with demo_."},
	}}, "")
	if err != nil {
		t.Fatal(err)
	}
	s, _ := c.Lookup("demo_api_key")
	return s
}

func TestValidateNamesTheRuleNeverTheValue(t *testing.T) {
	slot := demo(t)
	tests := []struct {
		value string
		rule  string // "" means valid
	}{
		{"demo_0123456789abcdef", ""},
		{"", "Enter your Demo API key"},
		{"demo_short", "too short"},
		{"demo_" + strings.Repeat("a", 60), "too long"},
		{"xemo_0123456789abcdef", "does not look like"},
		{"demo_0123456789abcdef\n", "does not look like"}, // the whole value must match
		{"prefix demo_0123456789abcdef", "does not look like"},
		{"\xff\xfe" + strings.Repeat("a", 30), "not valid text"},
	}
	for _, tt := range tests {
		err := slot.Validate(state.NewSecret(tt.value))
		if tt.rule == "" {
			if err != nil {
				t.Errorf("%q refused: %v", tt.value, err)
			}
			continue
		}
		var invalid *InvalidValueError
		if !errors.As(err, &invalid) || !strings.Contains(invalid.Rule, tt.rule) {
			t.Errorf("%q: got %v, want a rule saying %q", tt.value, err, tt.rule)
			continue
		}
		if tt.value != "" && strings.Contains(err.Error(), tt.value) {
			t.Errorf("the error repeats the value: %v", err)
		}
	}
}

func TestRulesDescribeTheSlot(t *testing.T) {
	got := strings.Join(demo(t).Rules(), " ")
	for _, want := range []string{"Between 21 and 64 characters.", "It starts with demo_."} {
		if !strings.Contains(got, want) {
			t.Errorf("rules %q lack %q", got, want)
		}
	}
}

func TestCatalogNamesEveryProblem(t *testing.T) {
	_, err := NewCatalog([]Slot{
		{Name: "Bad Name", Label: "x"},
		{Name: "no_label"},
		{Name: "neg", Label: "x", Validation: Validation{MinLength: -1}},
		{Name: "huge", Label: "x", Validation: Validation{MaxLength: DefaultMaxLength + 1}},
		{Name: "bad_re", Label: "x", Validation: Validation{Pattern: "[a-"}},
		{Name: "twice", Label: "x"},
		{Name: "twice", Label: "y"},
	}, "")
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{"Bad Name: name must match", "no_label: label is required", "neg: min_length",
		"huge: max_length cannot exceed", "bad_re: pattern does not compile", "twice: defined twice"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestMaxLengthDefaults(t *testing.T) {
	c, err := NewCatalog([]Slot{{Name: "k", Label: "K"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	s, _ := c.Lookup("k")
	if s.Validation.MaxLength != DefaultMaxLength {
		t.Fatalf("max length %d", s.Validation.MaxLength)
	}
	if err := s.Validate(state.NewSecret(strings.Repeat("a", DefaultMaxLength+1))); err == nil {
		t.Fatal("an over-long value was accepted")
	}
	if names := c.Names(); len(names) != 1 || names[0] != "k" {
		t.Fatalf("names %v", names)
	}
}

// FuzzValidate checks that no value makes Validate panic, and that its error is always one
// of the slot's fixed messages, so it can never carry any part of the value.
func FuzzValidate(f *testing.F) {
	for _, seed := range []string{"", "demo_0123456789abcdef", "\xff", strings.Repeat("x", 5000), "s no"} {
		f.Add(seed)
	}
	c, err := NewCatalog([]Slot{{Name: "k", Label: "K", Validation: Validation{MinLength: 3, MaxLength: 100, Pattern: "[a-z_0-9]+"}}}, "")
	if err != nil {
		f.Fatal(err)
	}
	slot, _ := c.Lookup("k")
	messages := map[string]bool{
		"invalid value: Enter your K.":                                         true,
		"invalid value: The value is not valid text.":                          true,
		"invalid value: That is too short: it needs at least 3 characters.":    true,
		"invalid value: That is too long: it can have at most 100 characters.": true,
		"invalid value: That does not look like a K.":                          true,
	}
	f.Fuzz(func(t *testing.T, value string) {
		err := slot.Validate(state.NewSecret(value))
		if err != nil && !messages[err.Error()] {
			t.Fatalf("unexpected message: %v", err)
		}
	})
}

func TestAPIConfigurationIsCheckedWithEveryProblemNamed(t *testing.T) {
	_, err := NewCatalog([]Slot{
		{Name: "no_base", Label: "x", API: &upstream.API{Inject: upstream.Injection{Header: "Authorization"}}},
		{Name: "relative", Label: "x", API: &upstream.API{BaseURL: "/api", Inject: upstream.Injection{Header: "X"}}},
		{Name: "query_in_base", Label: "x", API: &upstream.API{BaseURL: "https://api.example/v1?x=1", Inject: upstream.Injection{Header: "X"}}},
		{Name: "two_ways", Label: "x", API: &upstream.API{BaseURL: "https://api.example", Inject: upstream.Injection{Header: "X", Query: "key"}}},
		{Name: "no_way", Label: "x", API: &upstream.API{BaseURL: "https://api.example"}},
		{Name: "no_placeholder", Label: "x", API: &upstream.API{BaseURL: "https://api.example", Inject: upstream.Injection{Header: "X", Template: "Bearer"}}},
		{Name: "bad_method", Label: "x", API: &upstream.API{BaseURL: "https://api.example", Methods: []string{"TRACE"}, Inject: upstream.Injection{Query: "k"}}},
		{Name: "slow", Label: "x", API: &upstream.API{BaseURL: "https://api.example", Timeout: time.Hour, Inject: upstream.Injection{Query: "k"}}},
		{Name: "verify_alone", Label: "x", Verify: &upstream.Verify{Path: "/me"}},
		{Name: "bad_status", Label: "x", API: &upstream.API{BaseURL: "https://api.example", Inject: upstream.Injection{Query: "k"}}, Verify: &upstream.Verify{Status: []int{42}}},
	}, "")
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		"no_base: api.base_url is required", "relative: api.base_url must be an absolute http(s) URL",
		"query_in_base: api.base_url cannot have a query", "two_ways: api.inject needs exactly one",
		"no_way: api.inject needs exactly one", "no_placeholder: api.inject.template must contain {secret}",
		`bad_method: api.methods: "TRACE"`, "slow: api.timeout", "verify_alone: verify needs an api section",
		"bad_status: verify.status: 42",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestAPIDefaultsAndThePublicURLPlaceholder(t *testing.T) {
	c, err := NewCatalog([]Slot{{Name: "k", Label: "K",
		API:    &upstream.API{BaseURL: "{public_url}/demo/api/", Methods: []string{"get", "post"}, Inject: upstream.Injection{Header: "Authorization"}},
		Verify: &upstream.Verify{Path: "/whoami"},
	}}, "http://127.0.0.1:9999/")
	if err != nil {
		t.Fatal(err)
	}
	s, _ := c.Lookup("k")
	a := s.API
	if a.Base().String() != "http://127.0.0.1:9999/demo/api" || !a.Allows("POST") || !a.Allows("get") || a.Allows("DELETE") ||
		a.Inject.Template != upstream.SecretPlaceholder || a.Timeout != upstream.DefaultTimeout || a.MaxResponseBytes != upstream.DefaultMaxResponseBytes ||
		a.ResponseHeaders[0] != "Content-Type" || s.Verify.Method != "GET" || s.Verify.Status[0] != 200 {
		t.Fatalf("defaults: %+v %+v", a, s.Verify)
	}
}

func TestCatalogsDoNotShareTheirConfiguration(t *testing.T) {
	list := []Slot{{Name: "k", Label: "K", API: &upstream.API{BaseURL: "{public_url}/api", Inject: upstream.Injection{Query: "key"}}}}
	a, err := NewCatalog(list, "http://one.example")
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewCatalog(list, "http://two.example")
	if err != nil {
		t.Fatal(err)
	}
	sa, _ := a.Lookup("k")
	sb, _ := b.Lookup("k")
	if sa.API.Base().Host != "one.example" || sb.API.Base().Host != "two.example" || list[0].API.Base() != nil {
		t.Fatalf("catalogs share state: %s %s %v", sa.API.Base(), sb.API.Base(), list[0].API.Base())
	}
}

// A value of the address's parts that is, or could be, the secret is refused and blanked;
// others are kept and bound.
func TestBindEnteredRefusesAPartThatCouldBeTheSecret(t *testing.T) {
	c, err := NewCatalog([]Slot{{Name: "desk", Label: "Desk token", Validation: Validation{Pattern: "tok_[a-z0-9]{16,}"},
		API: &upstream.API{BaseURL: "https://{site}.desk.example/api", Inject: upstream.Injection{Header: "Authorization"},
			Parameters: []upstream.Parameter{{Name: "site", Label: "Desk site", Pattern: "[a-z0-9_-]{2,40}"}}}}}, "")
	if err != nil {
		t.Fatal(err)
	}
	slot, _ := c.Lookup("desk")
	secret := state.NewSecret("tok_0123456789abcdefgh")
	for _, site := range []string{"tok_0123456789abcdefgh", "0123456789abcd", "tok_zyxwvutsrqponmlkji"} {
		values, api, err := slot.BindEntered(map[string]string{"site": site}, secret)
		var invalid *upstream.InvalidParameterError
		if !errors.As(err, &invalid) || invalid.Name != "site" || api != nil || values["site"] != "" || strings.Contains(err.Error(), site) {
			t.Errorf("site %q: %v %v %v, want it refused and blanked", site, values, api, err)
		}
	}
	values, api, err := slot.BindEntered(map[string]string{"site": "acme"}, secret)
	if err != nil || values["site"] != "acme" || api.Base().Host != "acme.desk.example" {
		t.Errorf("site acme: %v %v %v", values, api, err)
	}
}
