package services

import (
	"os"
	"slices"
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

func TestAWebhookIsSentTheTypesOfMessageItNames(t *testing.T) {
	every := &Webhook{}
	some := &Webhook{Events: []string{"elicitation.*", "credential.deleted"}}
	for _, typ := range WebhookEventTypes {
		if !every.Wants(typ) {
			t.Errorf("a webhook without events is not sent %s", typ)
		}
		want := typ == "credential.deleted" || strings.HasPrefix(typ, "elicitation.")
		if some.Wants(typ) != want {
			t.Errorf("a webhook of %v is sent %s: %v", some.Events, typ, !want)
		}
	}
	if len(WebhookEventTypes) != 11 {
		t.Errorf("%d types of message: %v", len(WebhookEventTypes), WebhookEventTypes)
	}
}

func TestAServiceWebhookIsHTTPSWithASecret(t *testing.T) {
	_, d := NewKey()
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	const next = "whsec_bmV4dC1zZWNyZXQtb2YtdHdlbnR5LWZvdXItYnl0ZXM="
	files := map[string]string{"good": secret + "\n", "bad": "hunter2", "empty": "\n# no secret yet\n",
		"rotating":        "# the new secret signs too while receivers learn it\n" + secret + "\n\n" + next + "\n",
		"bad second line": secret + "\nhunter2\n"}
	catalog := func(hook WebhookConfig) (*Catalog, error) {
		return NewCatalog([]Config{{Name: "weather", Label: "Weather", Resource: "https://weather.example/mcp", Slots: []string{"key"}, Webhook: &hook}},
			Options{Slots: []string{"key"}, Keys: map[string][]string{"weather": {d}}, ReadFile: func(name string) ([]byte, error) {
				if f, ok := files[name]; ok {
					return []byte(f), nil
				}
				return nil, os.ErrNotExist
			}})
	}
	for _, ok := range []string{"https://hooks.weather.example/urlflow", "http://127.0.0.1:9090/hook", "http://localhost/hook", "http://[::1]:80/h"} {
		c, err := catalog(WebhookConfig{URL: ok, SecretFile: "good"})
		if err != nil {
			t.Errorf("%s: %v", ok, err)
			continue
		}
		if s, _ := c.Lookup("weather"); s.Webhook == nil || s.Webhook.URL != ok || len(s.Webhook.Keys) != 1 || len(s.Webhook.Keys[0]) != 24 || !c.WebhookWants("weather", "elicitation.complete") {
			t.Errorf("%s: %+v", ok, s.Webhook)
		}
	}
	c, err := catalog(WebhookConfig{URL: "https://hooks.weather.example/", SecretFile: "rotating"})
	if s, _ := c.Lookup("weather"); err != nil || len(s.Webhook.Keys) != 2 {
		t.Errorf("a secret file of two secrets, a comment and a blank line: %+v, %v; want two keys", s, err)
	}
	for _, tc := range []struct {
		hook WebhookConfig
		says string
	}{
		{WebhookConfig{URL: "http://hooks.weather.example/urlflow", SecretFile: "good"}, "want https"},
		{WebhookConfig{URL: "/hook", SecretFile: "good"}, "want an absolute https URL"},
		{WebhookConfig{URL: "https://hooks.weather.example/"}, "secret_file is required"},
		{WebhookConfig{URL: "https://hooks.weather.example/", SecretFile: "bad"}, `want "whsec_"`},
		{WebhookConfig{URL: "https://hooks.weather.example/", SecretFile: "missing"}, "secret_file: file does not exist"},
		{WebhookConfig{URL: "https://hooks.weather.example/", SecretFile: "empty"}, "holds no secret"},
		{WebhookConfig{URL: "https://hooks.weather.example/", SecretFile: "bad second line"}, `line 2: webhook secret: want "whsec_"`},
		{WebhookConfig{URL: "https://hooks.weather.example/", SecretFile: "good", Events: []string{"credential.removed"}}, `events: "credential.removed" is not a type of message`},
	} {
		_, err := catalog(tc.hook)
		if err == nil || !strings.Contains(err.Error(), "service weather: webhook: ") || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%+v: %v, want it to say %q", tc.hook, err, tc.says)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Error("the error repeats the file's content")
		}
	}
}

func TestAServiceMayAuthenticateAsItsOAuthClient(t *testing.T) {
	c, err := NewCatalog([]Config{
		{Name: "weather", Label: "Weather", Resource: "https://weather.example/mcp", Slots: []string{"key"}, ClientID: "weather-client"},
	}, Options{Slots: []string{"key"}})
	if err != nil {
		t.Fatalf("a service with a client and no keys: %v", err)
	}
	if name, _, ok := c.ServiceOfClient("weather-client"); !ok || name != "weather" {
		t.Errorf("ServiceOfClient = %q, %v", name, ok)
	}
	if _, _, ok := c.ServiceOfClient(""); ok {
		t.Error("the empty client is a service's")
	}
	_, err = NewCatalog([]Config{
		{Name: "weather", Label: "Weather", Resource: "https://weather.example/mcp", Slots: []string{"key"}, ClientID: "shared"},
		{Name: "calendar", Label: "Calendar", Resource: "https://calendar.example/mcp", Slots: []string{"key"}, ClientID: "shared"},
		{Name: "mail", Label: "Mail", Resource: "https://mail.example/mcp", Slots: []string{"key"}},
	}, Options{Slots: []string{"key"}})
	for _, want := range []string{"service calendar: client_id shared is also the client of weather", "service mail: keys_file or client_id is required"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want it to say %q", err, want)
		}
	}
}

// A service's client credentials token must carry the scopes of client_scopes, by default
// DefaultClientScope alone; they are checked as scope tokens (RFC 6749, section 3.3) and
// make sense only with client_id.
func TestAServiceClientTokenMustCarryItsClientScopes(t *testing.T) {
	config := func(clientID string, scopes []string) []Config {
		return []Config{{Name: "weather", Label: "Weather", Resource: "https://weather.example/mcp", Slots: []string{"key"},
			ClientID: clientID, ClientScopes: scopes}}
	}
	_, d := NewKey()
	opts := Options{Slots: []string{"key"}, Keys: map[string][]string{"weather": {d}}}
	for _, tc := range []struct {
		name   string
		scopes []string
		want   []string
	}{
		{"by default", nil, []string{DefaultClientScope}},
		{"as configured", []string{"weather:urlflow", "urlflow:delegate"}, []string{"weather:urlflow", "urlflow:delegate"}},
	} {
		c, err := NewCatalog(config("weather-client", tc.scopes), opts)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		name, scopes, ok := c.ServiceOfClient("weather-client")
		if !ok || name != "weather" || !slices.Equal(scopes, tc.want) {
			t.Errorf("%s: ServiceOfClient = %q, %q, %v; want weather, %q", tc.name, name, scopes, ok, tc.want)
		}
		if s, _ := c.Lookup("weather"); !slices.Equal(s.ClientScopes, tc.want) {
			t.Errorf("%s: ClientScopes %q, want %q", tc.name, s.ClientScopes, tc.want)
		}
	}
	if DefaultClientScope != "urlflow:delegate" {
		t.Errorf("DefaultClientScope is %q; the README documents urlflow:delegate", DefaultClientScope)
	}
	if c, err := NewCatalog(config("", nil), opts); err != nil {
		t.Fatal(err)
	} else if s, _ := c.Lookup("weather"); len(s.ClientScopes) != 0 {
		t.Errorf("a service without a client has the client scopes %q", s.ClientScopes)
	}
	for _, tc := range []struct {
		name, clientID string
		scopes         []string
		says           string
	}{
		{"without client_id", "", []string{"urlflow:delegate"}, "service weather: client_scopes: only with client_id"},
		{"an empty list", "weather-client", []string{}, "service weather: client_scopes: name at least one scope"},
		{"an empty scope", "weather-client", []string{""}, `service weather: client_scopes: "" is not a scope`},
		{"a space", "weather-client", []string{"urlflow delegate"}, `service weather: client_scopes: "urlflow delegate" is not a scope`},
		{"a quote", "weather-client", []string{`urlflow"`}, `is not a scope`},
		{"a backslash", "weather-client", []string{`urlflow\d`}, `is not a scope`},
		{"beyond ASCII", "weather-client", []string{"urlflow:délégué"}, `is not a scope`},
	} {
		_, err := NewCatalog(config(tc.clientID, tc.scopes), opts)
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v, want it to say %q", tc.name, err, tc.says)
		}
	}
}
