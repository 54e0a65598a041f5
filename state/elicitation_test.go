package state

import (
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestViewShowsTheURLOnlyWhileTheFlowRuns(t *testing.T) {
	const link = "https://urlflow.example/e/ID"
	history := []Entry{{Event: Created, Actor: ActorClient, To: Pending}}
	for _, s := range States {
		e := &Elicitation{ID: "ID", User: alice, Kind: KindOAuth, Target: "acme", State: s, RetryOf: "OLD"}
		v := e.View(link, history)
		if want := !s.Terminal(); (v.URL == link) != want {
			t.Errorf("%s: View URL = %q, want it shown: %v", s, v.URL, want)
		}
		if v.ID != "ID" || v.State != s || v.Kind != KindOAuth || v.Target != "acme" || v.RetryOf != "OLD" || len(v.History) != 1 {
			t.Errorf("%s: View = %+v", s, v)
		}
	}
	if v := (&Elicitation{State: Pending, ExpiresAt: time.Now()}).View(link, nil); v.History != nil {
		t.Errorf("View without history = %+v", v.History)
	}
}

func TestElicitationURLIsThePublicURLAndTheID(t *testing.T) {
	for _, tt := range []struct{ public, want string }{
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080/e/ABC"},
		{"https://urlflow.example/", "https://urlflow.example/e/ABC"},
		{"https://example.com/urlflow", "https://example.com/urlflow/e/ABC"},
	} {
		u, err := url.Parse(tt.public)
		if err != nil {
			t.Fatal(err)
		}
		if got := ElicitationURL(u, "ABC"); got != tt.want {
			t.Errorf("ElicitationURL(%s) = %s, want %s", tt.public, got, tt.want)
		}
	}
}

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

func TestValidIDAcceptsOnlyTheIDShape(t *testing.T) {
	for _, tt := range []struct {
		id    string
		valid bool
	}{
		{"ABCDEFGHIJKLMNOPQRSTUVWXYZ", true},
		{"234567ABCDEFGHIJKLMNOPQRST", true},
		{"abcdefghijklmnopqrstuvwxyz", false},
		{"ABCDEFGHIJKLMNOPQRSTUVWXY", false},
		{"ABCDEFGHIJKLMNOPQRSTUVWXYZA", false},
		{"ABCDEFGHIJKLMNOPQRSTUVWXY1", false},
		{"ABCDEFGHIJKLMNOPQRSTUVWXYZ\n", false},
		{"", false},
	} {
		if got := ValidID(tt.id); got != tt.valid {
			t.Errorf("ValidID(%q) = %v, want %v", tt.id, got, tt.valid)
		}
	}
}
