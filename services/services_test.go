package services

import (
	"strings"
	"testing"
	"time"

	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/ratelimit"
)

func TestAServiceAuthenticatesWithAnyOfItsKeysAndNothingElse(t *testing.T) {
	oldKey, oldDigest := NewKey()
	newKey, newDigest := NewKey()
	otherKey, otherDigest := NewKey()
	c, err := NewCatalog([]Config{
		{Name: "weather", Label: "Weather", Resource: "https://weather.example/mcp", Slots: []string{"key"}},
		{Name: "calendar", Label: "Calendar", Resource: "https://calendar.example/mcp", Providers: []string{"acme"}},
	}, Options{Slots: []string{"key"}, Providers: []string{"acme"},
		Keys: map[string][]string{"weather": {oldDigest, "", "# rotated", newDigest}, "calendar": {otherDigest}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key, want string
	}{
		{oldKey, "weather"},
		{newKey, "weather"},
		{otherKey, "calendar"},
		{"", ""},
		{oldKey[:len(oldKey)-1], ""},
		{strings.TrimPrefix(oldKey, KeyPrefix), ""},
		{oldDigest, ""},
	} {
		got, ok := c.ServiceOf(tc.key)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("ServiceOf(%.20q…) = %q, %v; want %q", tc.key, got, ok, tc.want)
		}
	}
	weather, _ := c.Lookup("weather")
	if !weather.Allows(state.KindSecret, "key") || weather.Allows(state.KindOAuth, "acme") || weather.Allows(state.KindOAuth, "key") {
		t.Error("weather may ask for its slot only")
	}
	calendar, _ := c.Lookup("calendar")
	if !calendar.Allows(state.KindOAuth, "acme") || calendar.Allows(state.KindSecret, "acme") {
		t.Error("calendar may ask for its provider only")
	}
}

func TestTwoServicesCannotShareAResourceOrAName(t *testing.T) {
	_, d1 := NewKey()
	_, d2 := NewKey()
	_, err := NewCatalog([]Config{
		{Name: "weather", Label: "Weather", Resource: "https://shared.example/mcp", Slots: []string{"key"}},
		{Name: "weather", Label: "Again", Resource: "https://other.example/mcp", Slots: []string{"key"}},
		{Name: "calendar", Label: "Calendar", Resource: "https://shared.example/mcp", Slots: []string{"key"}},
	}, Options{Slots: []string{"key"}, Keys: map[string][]string{"weather": {d1}, "calendar": {d2}}})
	for _, want := range []string{"service weather: named twice", "service calendar: resource https://shared.example/mcp is also the resource of weather"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want it to say %q", err, want)
		}
	}
}

func TestAKeysFileHoldsDigestsOnly(t *testing.T) {
	key, digest := NewKey()
	for _, tc := range []struct {
		name, file, says string
	}{
		{"a key", key + "\n", "this is a key, not its digest"},
		{"a short digest", digest[:20] + "\n", `want "sha256:" and 64 hex digits`},
		{"nothing", "# none yet\n\n", "holds no key digest"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewCatalog([]Config{{Name: "weather", Label: "Weather", Resource: "https://weather.example/mcp",
				Slots: []string{"key"}, KeysFile: "weather.keys"}},
				Options{Slots: []string{"key"}, ReadFile: func(string) ([]byte, error) { return []byte(tc.file), nil }})
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("error %v, want it to say %q", err, tc.says)
			}
			if err != nil && strings.Contains(err.Error(), key) {
				t.Error("the error repeats the key")
			}
		})
	}
}

func TestAServiceMayHaveItsOwnRateLimit(t *testing.T) {
	_, d := NewKey()
	config := func(limit string) []Config {
		return []Config{{Name: "weather", Label: "Weather", Resource: "https://weather.example/mcp", Slots: []string{"key"}, RateLimit: limit}}
	}
	opts := Options{Slots: []string{"key"}, Keys: map[string][]string{"weather": {d}}}
	c, err := NewCatalog(config("10/1m"), opts)
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := c.Lookup("weather"); s.RateLimit == nil || *s.RateLimit != (ratelimit.Limit{Events: 10, Window: time.Minute}) {
		t.Errorf("rate_limit 10/1m read as %v", s.RateLimit)
	}
	c, _ = NewCatalog(config(""), opts)
	if s, _ := c.Lookup("weather"); s.RateLimit != nil {
		t.Errorf("no rate_limit read as %v, want the default", s.RateLimit)
	}
	if _, err := NewCatalog(config("lots"), opts); err == nil || !strings.Contains(err.Error(), "service weather: rate_limit: want EVENTS/WINDOW") {
		t.Errorf("rate_limit lots: %v", err)
	}
}
