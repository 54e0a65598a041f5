package flow

import (
	"net/url"
	"testing"
	"time"

	"github.com/urlflow/urlflow/state"
)

func TestViewShowsTheURLOnlyWhileTheFlowRuns(t *testing.T) {
	const link = "https://urlflow.example/e/ID"
	history := []Entry{{Event: Created, Actor: state.ActorClient, To: Pending}}
	for _, s := range States {
		e := &Elicitation{ID: "ID", User: alice, Kind: state.KindOAuth, Target: "acme", State: s, RetryOf: "OLD"}
		v := e.View(link, history)
		if want := !s.Terminal(); (v.URL == link) != want {
			t.Errorf("%s: View URL = %q, want it shown: %v", s, v.URL, want)
		}
		if v.ID != "ID" || v.State != s || v.Kind != state.KindOAuth || v.Target != "acme" || v.RetryOf != "OLD" || len(v.History) != 1 {
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
