package e2e

import (
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/urlflow/urlflow/internal/redistest"
)

func TestMCPRequestsOverTheUsersLimitAreRefusedWithRetryAfter(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverConfig{Redis: redistest.Start(t), Env: []string{"URLFLOW_RATE_LIMIT_MCP=6/24h"}})
	c := connect(t, s, clientConfig{Token: s.Token, URLMode: true})

	var err error
	for i := 0; i < 10 && err == nil; i++ {
		_, err = c.Call(t.Context(), "list_connections", nil)
	}
	if err == nil || !strings.Contains(err.Error(), "Too Many Requests") {
		t.Fatalf("ten calls within the limit of six a day: the last error is %v, want Too Many Requests", err)
	}
	resp := initialize(t, s.MCPURL, s.Token)
	retry, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
	if resp.StatusCode != http.StatusTooManyRequests || retry < 1 || retry > 24*60*60 {
		t.Fatalf("over the limit: %d, Retry-After %q; want 429 and at most a day", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	// Another user has a limit of their own.
	if resp := initialize(t, s.MCPURL, s.devToken("bob")); resp.StatusCode != http.StatusOK {
		t.Fatalf("bob's initialize answered %d: his limit is his own", resp.StatusCode)
	}
	// The first refusal of the window is logged, the ones after it are not.
	if n := strings.Count(s.Output(), `msg="rate limit reached"`); n != 1 {
		t.Errorf("the refusals were logged %d times, want once:\n%s", n, s.Output())
	}
}

func TestFormPostsOverTheUsersLimitChangeNothing(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverConfig{Redis: redistest.Start(t), Style: "error", Env: []string{"URLFLOW_RATE_LIMIT_FORMS=2/24h"}})
	c := connect(t, s, clientConfig{Token: s.Token, URLMode: true})
	params := askErrorStyle(t, c)
	dev := newFormBrowser(t, s, "dev")
	dev.open(params.URL)
	form := dev.continueToForm(params.ElicitationID)

	post := func(value string) webPage {
		return dev.post("/e/"+params.ElicitationID+"/secret", url.Values{"csrf": {form.csrf(t)}, "secret": {value}})
	}
	for range 2 {
		if page := post("not-a-demo-key"); page.Status != http.StatusUnprocessableEntity {
			t.Fatalf("a rejected value within the limit answered %d: %s", page.Status, page.Text())
		}
	}
	before := s.status(params.ElicitationID, s.Token)
	page := post(canary) // a valid key, but one post too many
	retry, _ := strconv.Atoi(page.Header.Get("Retry-After"))
	if page.Status != http.StatusTooManyRequests || retry < 1 || retry > 24*60*60 || !strings.Contains(page.Text(), "Nothing was changed") {
		t.Fatalf("the third post answered %d, Retry-After %q: %s", page.Status, page.Header.Get("Retry-After"), page.Text())
	}
	after := s.status(params.ElicitationID, s.Token)
	if after.State != "in_progress" || !reflect.DeepEqual(after.events(), before.events()) {
		t.Fatalf("the refused post changed the flow: %s %v, was %s %v", after.State, after.events(), before.State, before.events())
	}
	if strings.Contains(page.HTML, canary) {
		t.Error("the refusal page shows the posted value")
	}
}
