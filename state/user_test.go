package state

import (
	"strings"
	"testing"
)

func TestUserKeySeparatesIssuerAndSubject(t *testing.T) {
	a := User{Issuer: "https://a.example", Subject: "x"}
	for _, other := range []User{
		{Issuer: "https://a.example", Subject: "y"},
		{Issuer: "https://b.example", Subject: "x"},
		{Issuer: "https://a.examplex", Subject: ""},
	} {
		if a.Key() == other.Key() {
			t.Errorf("users %+v and %+v share the key %s", a, other, a.Key())
		}
	}
	if a.Key() != (User{Issuer: "https://a.example", Subject: "x"}).Key() {
		t.Errorf("User.Key is not stable")
	}
	if strings.ContainsAny(a.Key(), "{}:") {
		t.Errorf("User.Key %q would break the Redis key names or hash tags", a.Key())
	}
}

func TestNewClientInfoBoundsAndCleansWhatTheClientSays(t *testing.T) {
	long := strings.Repeat("x", 1000)
	got := NewClientInfo("evil\u202e-client\n", "\u2067Trusted "+long, " 1.0\x00."+long)
	if got.Name != "evil-client" {
		t.Errorf("name %q", got.Name)
	}
	if !strings.HasPrefix(got.Title, "Trusted xxx") || !strings.HasSuffix(got.Title, "…") || len([]rune(got.Title)) != ClientNameLimit {
		t.Errorf("title %q", got.Title)
	}
	if !strings.HasPrefix(got.Version, "1.0.xxx") || len([]rune(got.Version)) != ClientVersionLimit {
		t.Errorf("version %q", got.Version)
	}
	if NewClientInfo("", "", "") != (ClientInfo{}) {
		t.Error("nothing reported is not the zero ClientInfo")
	}
}
