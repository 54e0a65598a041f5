package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/urlflow/urlflow/internal/redistest"
)

const subscribedLine = "subscribed to elicitation events"

func TestRedisOutageIsReportedAndRecoveredFrom(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	s := startServer(t, serverConfig{Redis: rs, Style: "error"})
	c := connect(t, s, clientConfig{Token: s.Token, URLMode: true})
	readyz := func() (int, map[string]string) {
		var checks map[string]string
		code := s.getJSON("/readyz", "", &checks)
		return code, checks
	}
	if code, checks := readyz(); code != http.StatusOK || checks["redis"] != "ok" || checks["keys"] != "ok" {
		t.Fatalf("/readyz before the outage: %d %v", code, checks)
	}
	// A browser signed in, on a link of its own, before the outage.
	b := newFormBrowser(t, s, "dev")
	if page := b.signIn("/"); page.Status != http.StatusSeeOther {
		t.Fatalf("sign-in answered %d", page.Status)
	}
	unreachable := "/e/" + randomID()
	eventually(t, 10*time.Second, "the event subscription is up", func() bool {
		return strings.Count(s.Output(), subscribedLine) == 1
	})

	rs.Stop()
	if code, checks := readyz(); code != http.StatusServiceUnavailable || checks["redis"] != "unavailable" {
		t.Fatalf("/readyz without Redis: %d %v, want 503 with redis unavailable", code, checks)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := c.Call(ctx, "set_secret", map[string]any{"name": "demo_api_key"})
	if err != nil {
		t.Fatalf("set_secret without Redis failed at the protocol level: %v", err)
	}
	words := text(res)
	if !res.IsError || !strings.Contains(words, "nothing was changed") {
		t.Fatalf("set_secret without Redis: isError=%v %s", res.IsError, words)
	}
	_, port, _ := strings.Cut(rs.Addr, ":")
	for _, detail := range []string{rs.Addr, port, "dial", "refused", "redis:", "EOF"} {
		if strings.Contains(words, detail) {
			t.Fatalf("the tool result reveals %q: %s", detail, words)
		}
	}
	api := s.api(http.MethodGet, elicitationPath(randomID()), s.Token, "")
	if api.status != http.StatusServiceUnavailable || strings.Contains(string(api.body), port) || strings.Contains(string(api.body), "dial") {
		t.Fatalf("the API without Redis answered %d %s", api.status, api.body)
	}

	page := b.get(unreachable)
	if page.Status != http.StatusServiceUnavailable || !strings.Contains(page.Text(), "Nothing was changed") || strings.Contains(page.HTML, port) || strings.Contains(page.HTML, "dial") {
		t.Fatalf("a page without Redis answered %d: %s", page.Status, page.Text())
	}

	rs.Restart(t)
	eventually(t, 30*time.Second, "/readyz answers 200 again", func() bool {
		code, _ := readyz()
		return code == http.StatusOK
	})
	eventually(t, 30*time.Second, "the event subscription is back", func() bool {
		return strings.Count(s.Output(), subscribedLine) >= 2
	})

	// A whole flow works again, notification included.
	params := askErrorStyle(t, c)
	b.completeSecret(params.URL, canary)
	c.waitCompletion(params.ElicitationID, 30*time.Second)
	s.waitDelivered(params.ElicitationID, s.Token)
	if res := c.CallOK("set_secret", map[string]any{"name": "demo_api_key"}); str(structured(t, res), "status") != "stored" {
		t.Fatalf("set_secret after the outage: %s", text(res))
	}
	requireEvents(t, s.status(params.ElicitationID, s.Token), "created", "browser_open", "verified", "notified")
}
