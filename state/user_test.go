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
