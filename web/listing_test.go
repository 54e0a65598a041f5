package web

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/flow"
)

// listed pages through GET /api/v1/elicitations?query with token, and returns every item.
func (f *fixture) listed(t *testing.T, token, query string) []flow.Listed {
	t.Helper()
	var all []flow.Listed
	cursor := ""
	for range 100 {
		q, err := url.ParseQuery(query)
		if err != nil {
			t.Fatal(err)
		}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		got := f.api(t, http.MethodGet, "/api/v1/elicitations?"+q.Encode(), token, "")
		var page flow.Listing
		got.decode(t, &page)
		if got.Status != http.StatusOK {
			t.Fatalf("listing %q answered %d: %s", query, got.Status, got.Body)
		}
		all = append(all, page.Elicitations...)
		if cursor = page.Next; cursor == "" {
			return all
		}
	}
	t.Fatalf("listing %q does not end", query)
	return nil
}

func listedIDs(items []flow.Listed) []string {
	var ids []string
	for _, it := range items {
		ids = append(ids, it.ID)
	}
	return ids
}

func TestAnOperatorListsEveryonesFlowsAndFindsTheStuckOnes(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	alices := f.newFlow(t, "alice")
	f.clock.Advance(time.Second)
	bobs := f.newFlow(t, "bob", func(n *flow.NewElicitation) { n.Client = state.ClientInfo{Name: "claude-code"} })
	f.clock.Advance(time.Second)
	ended := f.newFlow(t, "bob")
	f.apply(t, ended.ID, flow.CancelRequested, state.ActorUser)

	all := f.listed(t, f.operatorToken, "limit=1")
	if got, want := listedIDs(all), []string{alices.ID, bobs.ID, ended.ID}; !slices.Equal(got, want) {
		t.Fatalf("listed %v, want %v, oldest first", got, want)
	}
	if it := all[1]; it.User == nil || it.User.Subject != "bob" || it.Client.Name != "claude-code" || it.Era != "2026-07-28" ||
		it.State != flow.Pending || it.URL != f.URL+"/e/"+bobs.ID || it.Stuck != "" || it.History != nil {
		t.Errorf("bob's flow listed as %+v", it)
	}
	for query, want := range map[string][]string{
		"user=bob":                {bobs.ID, ended.ID},
		"state=cancelled":         {ended.ID},
		"state=pending,cancelled": {alices.ID, bobs.ID, ended.ID},
		"client=claude-code":      {bobs.ID},
		"olderThan=2s":            {alices.ID},
		"kind=oauth":              nil,
		"stuck=true":              nil,
	} {
		if got := listedIDs(f.listed(t, f.operatorToken, query)); !slices.Equal(got, want) {
			t.Errorf("%s: listed %v, want %v", query, got, want)
		}
	}

	f.clock.Advance(flow.DefaultStuckAfter.Pending)
	stuck := f.listed(t, f.operatorToken, "stuck=true")
	if got := listedIDs(stuck); !slices.Equal(got, []string{alices.ID, bobs.ID}) || stuck[0].Stuck != flow.Stuck(flow.Pending) {
		t.Errorf("stuck after %s: %+v, want alice's and bob's pending flows", flow.DefaultStuckAfter.Pending, stuck)
	}
	// One stuck flow a page: the listing counts them, and goes back as it went forward.
	page := func(query string) flow.Listing {
		got := f.api(t, http.MethodGet, "/api/v1/elicitations?"+query, f.operatorToken, "")
		var l flow.Listing
		got.decode(t, &l)
		if got.Status != http.StatusOK {
			t.Fatalf("%s answered %d: %s", query, got.Status, got.Body)
		}
		return l
	}
	first := page("stuck=true&limit=1")
	second := page("stuck=true&limit=1&cursor=" + first.Next)
	back := page("stuck=true&limit=1&cursor=" + second.Prev)
	if first.Total == nil || *first.Total != 2 || first.Prev != "" || second.Elicitations[0].ID != bobs.ID || second.Next != "" ||
		len(back.Elicitations) != 1 || back.Elicitations[0].ID != alices.ID || back.Prev != "" || back.Next == "" {
		t.Errorf("stuck, a flow a page: first %+v, second %+v, back %+v", first, second, back)
	}
	if all := page("limit=1"); all.Total != nil {
		t.Errorf("a listing of every flow has a total: %d", *all.Total)
	}
	// A read-only token reads as much.
	if got := listedIDs(f.listed(t, f.readOnlyToken, "stuck=true&user=alice")); !slices.Equal(got, []string{alices.ID}) {
		t.Errorf("read-only operator: listed %v, want alice's stuck flow", got)
	}

	var sum flow.Summary
	got := f.api(t, http.MethodGet, "/api/v1/elicitations/summary", f.operatorToken, "")
	got.decode(t, &sum)
	if got.Status != http.StatusOK || sum.Running[flow.Pending] != 2 || sum.Stuck[flow.Stuck(flow.Pending)] != 2 ||
		sum.OwedNotifications != 0 || sum.StuckAfterSeconds[flow.Stuck(flow.Pending)] != 120 {
		t.Errorf("summary answered %d %+v", got.Status, sum)
	}
}

func TestUsersAndServicesListOnlyTheirOwnFlows(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	alices := f.newFlow(t, "alice")
	f.newFlow(t, "bob")
	asked := f.newFlow(t, "alice", func(n *flow.NewElicitation) { n.Service = weather })
	f.newFlow(t, "alice", func(n *flow.NewElicitation) { n.Service = calendar })

	mine := f.listed(t, f.token(t, "alice"), "")
	if got := listedIDs(mine); len(got) != 3 || !slices.Contains(got, alices.ID) || !slices.Contains(got, asked.ID) {
		t.Errorf("alice listed %v, want her three flows", got)
	}
	for _, it := range mine {
		if it.User != nil {
			t.Errorf("a user's listing shows the user: %+v", it.User)
		}
	}
	if got := listedIDs(f.listed(t, f.serviceKeys[weather], "")); !slices.Equal(got, []string{asked.ID}) {
		t.Errorf("the weather service listed %v, want only the flow it asked for", got)
	}
	var sum flow.Summary
	f.api(t, http.MethodGet, "/api/v1/elicitations/summary", f.token(t, "bob"), "").decode(t, &sum)
	if sum.Running[flow.Pending] != 1 {
		t.Errorf("bob's summary counts %d pending flows, want his 1", sum.Running[flow.Pending])
	}

	for _, tc := range []struct {
		name, token, query string
		status             int
	}{
		{"a user filtering by user", f.token(t, "alice"), "user=bob", http.StatusForbidden},
		{"a service naming another", f.serviceKeys[weather], "service=" + calendar, http.StatusForbidden},
		{"an unknown filter", f.operatorToken, "owner=bob", http.StatusBadRequest},
		{"an unknown state", f.operatorToken, "state=stuck", http.StatusBadRequest},
		{"a bad duration", f.operatorToken, "olderThan=ten", http.StatusBadRequest},
		{"a bad era", f.operatorToken, "era=2024", http.StatusBadRequest},
		{"a limit too high", f.operatorToken, "limit=501", http.StatusBadRequest},
		{"a made-up cursor", f.operatorToken, "cursor=bm90IGEgY3Vyc29y", http.StatusBadRequest},
		{"no token", "", "", http.StatusUnauthorized},
	} {
		if got := f.api(t, http.MethodGet, "/api/v1/elicitations?"+tc.query, tc.token, ""); got.Status != tc.status {
			t.Errorf("%s: answered %d %s, want %d", tc.name, got.Status, got.Body, tc.status)
		}
	}
}

func TestTheOwedFilterListsTheFlowsWhoseNotificationIsOwed(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	owed := f.newFlow(t, "alice", inSession(f.liveSession(t, "alice")))
	f.apply(t, owed.ID, flow.ClientDecline, state.ActorClient)
	quiet := f.newFlow(t, "bob") // no session: nothing to notify
	f.apply(t, quiet.ID, flow.ClientDecline, state.ActorClient)
	if !f.get(t, owed.ID).NotificationOwed() {
		t.Fatal("the declined flow of a session owes no notification: the test sees nothing")
	}

	var page flow.Listing
	answer := f.api(t, http.MethodGet, "/api/v1/elicitations?owed=true", f.operatorToken, "")
	answer.decode(t, &page)
	if answer.Status != http.StatusOK || len(page.Elicitations) != 1 || page.Elicitations[0].ID != owed.ID {
		t.Errorf("owed=true listed %d (%d); want alice's flow alone", len(page.Elicitations), answer.Status)
	}
	f.api(t, http.MethodGet, "/api/v1/elicitations?owed=maybe", f.operatorToken, "").want(t, http.StatusBadRequest, "owed: want true or false")

	op := f.browser(t, "operator")
	op.signIn("/admin")
	overview := op.get("/admin")
	if !strings.Contains(overview.Body, `href="/admin?owed=true"`) {
		t.Error("the overview's 'notification owed' does not link to the owed flows")
	}
	list := op.get("/admin?owed=true")
	list.want(t, http.StatusOK, owed.ID[:12])
	allFlows := list.Text()[strings.Index(list.Text(), "All flows"):]
	if strings.Contains(allFlows, quiet.ID[:12]) {
		t.Error("the owed list shows a flow that owes nothing")
	}
}
