package e2e

import (
	"net/http"
	"testing"
	"time"
)

// A new attempt started through the API reaches the originating session as a new
// elicitation/create, and completes like any other.
func TestANewAttemptIsOfferedToTheOriginatingSession(t *testing.T) {
	t.Parallel()
	_, s, c, dev := startWithDev(t, "error")

	_, err := c.Call(t.Context(), "set_secret", map[string]any{"name": "demo_api_key"})
	first := urlElicitationRequired(t, err)[0]
	dev.open(t, first.URL)
	dev.declineOnPage(t)
	c.waitCompletion(first.ElicitationID, 30*time.Second)

	var next elicitation
	if code := s.doJSON(http.MethodPost, "/api/v1/elicitations/"+first.ElicitationID+"/retry", s.Token,
		map[string]bool{"new": true}, &next); code != http.StatusCreated || next.RetryOf != first.ElicitationID {
		t.Fatalf("retry new: %d %+v", code, next)
	}
	offered := c.nextElicitation(30 * time.Second)
	if offered.ElicitationID != next.ID || offered.URL != next.URL || offered.Mode != "url" {
		t.Fatalf("offered %+v, want the new attempt %s at %s", offered, next.ID, next.URL)
	}
	s.waitState(next.ID, s.Token, "consented", 10*time.Second)

	dev.completeSecret(t, next.URL, canary)
	c.waitCompletion(next.ID, 30*time.Second)
	if res := c.CallOK("set_secret", map[string]any{"name": "demo_api_key"}); str(structured(t, res), "status") != "stored" {
		t.Fatalf("after the new attempt: %s", text(res))
	}
	requireEvents(t, s.status(next.ID, s.Token), "created", "client_accept", "browser_open", "verified")
}
