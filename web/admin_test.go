package web

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/urlflow/urlflow/internal/buildinfo"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/audit"
	"github.com/urlflow/urlflow/state/flow"
)

func TestAnOperatorFindsAStuckFlowAndCancelsItWithAReason(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	stuck := f.newFlow(t, "alice")
	f.clock.Advance(flow.DefaultStuckAfter.Pending)
	fresh := f.newFlow(t, "bob")

	op := f.browser(t, "operator")
	f.send(t, op.client, request{method: http.MethodGet, path: "/admin"}).want(t, http.StatusSeeOther)
	op.signIn("/admin")
	overview := op.get("/admin")
	overview.want(t, http.StatusOK, "Stuck flows", "pending 2 1 2m", "All flows, oldest first")
	stuckSection := overview.Text()[strings.Index(overview.Text(), "Stuck flows"):strings.Index(overview.Text(), "All flows")]
	if !strings.Contains(overview.Body, "/admin/flows/"+stuck.ID) || strings.Contains(stuckSection, fresh.ID[:12]) {
		t.Errorf("the stuck flow is not listed first, alone:\n%s", stuckSection)
	}
	op.get("/admin?user=bob").want(t, http.StatusOK, fresh.ID[:12])
	op.get("/admin?olderThan=ten").want(t, http.StatusOK, "olderThan: want a duration")

	page := op.get("/admin/flows/" + stuck.ID)
	page.want(t, http.StatusOK, "Timeline", "created", "alice", "Cancel this flow")
	path := "/admin/flows/" + stuck.ID + "/cancel"
	before := f.snapshot(t, stuck.ID)
	op.post(path, url.Values{"csrf": {page.csrf(t)}}).want(t, http.StatusBadRequest, "Say why")
	op.post(path, url.Values{"reason": {"no CSRF"}}).want(t, http.StatusForbidden)
	confirm := op.post(path, url.Values{"csrf": {page.csrf(t)}, "reason": {"the user asked on the helpdesk"}})
	confirm.want(t, http.StatusOK, "Cancel this flow?", "the user asked on the helpdesk", "No, go back")
	f.wantUnchanged(t, stuck.ID, before)

	done := op.post(path, url.Values{"csrf": {confirm.csrf(t)}, "reason": {"the user asked on the helpdesk"}, "confirm": {"yes"}})
	if done.Status != http.StatusSeeOther || done.Location() != "/admin/flows/"+stuck.ID+"?done=cancel" {
		t.Fatalf("the confirmed cancel answered %d to %q", done.Status, done.Location())
	}
	f.wantState(t, stuck.ID, flow.Cancelled)
	last := f.lastEntry(t, stuck.ID)
	if last.Actor != state.ActorOperator || last.By != "browser operator" || last.Reason != "the user asked on the helpdesk" {
		t.Errorf("the cancel is recorded as %+v", last)
	}
	op.get(done.Location()).want(t, http.StatusOK, "The flow is cancelled.", "browser operator", "Start a new attempt")

	// A new attempt of the cancelled flow, through the same two steps.
	page = op.get("/admin/flows/" + stuck.ID)
	retried := op.post("/admin/flows/"+stuck.ID+"/retry", url.Values{"csrf": {page.csrf(t)}, "reason": {"second try"}, "confirm": {"yes"}})
	if retried.Status != http.StatusSeeOther || !strings.HasSuffix(retried.Location(), "?done=retry") {
		t.Fatalf("the retry answered %d to %q", retried.Status, retried.Location())
	}
	if next := f.get(t, stuck.ID).RetriedBy; next == "" || !strings.Contains(retried.Location(), next) {
		t.Errorf("the retry went to %q, the new attempt is %q", retried.Location(), next)
	}
	// An action that no longer applies changes nothing.
	op.post(path, url.Values{"csrf": {page.csrf(t)}, "reason": {"again"}, "confirm": {"yes"}}).want(t, http.StatusConflict, "no longer applies")
}

func TestTheOperatorsPagesRefuseEveryoneElse(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	e := f.newFlow(t, "bob")
	alice := f.browser(t, "alice")
	alice.signIn("/connections")
	alice.get("/admin").want(t, http.StatusForbidden, "for urlflow's operators, and you are signed in as alice", "operators:",
		"In urlflow dev, sign out and sign in as operator")
	alice.get("/admin/flows/"+e.ID).want(t, http.StatusForbidden, "for urlflow's operators")
	page := alice.get("/connections")
	before := f.snapshot(t, e.ID)
	alice.post("/admin/flows/"+e.ID+"/cancel", url.Values{"csrf": {page.csrf(t)}, "reason": {"x"}, "confirm": {"yes"}}).
		want(t, http.StatusForbidden, "Nothing was shown or changed")
	f.wantUnchanged(t, e.ID, before)
	if got := f.send(t, nil, request{method: http.MethodGet, path: "/admin/flows/" + e.ID}); got.Status != http.StatusSeeOther ||
		!strings.HasPrefix(got.Location(), "/auth/login?next=") {
		t.Errorf("signed out: %d %q, want a redirect to sign in", got.Status, got.Location())
	}
}

func TestTheIssuersGroupClaimMakesAnOperator(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{oidc: true})
	carol := f.browser(t, "carol") // in the group urlflow-operators at the issuer
	carol.signIn("/admin")
	carol.get("/admin").want(t, http.StatusOK, "Stuck flows")
	dave := f.browser(t, "dave")
	dave.signIn("/admin")
	refused := dave.get("/admin")
	refused.want(t, http.StatusForbidden, "for urlflow's operators, and you are signed in as dave")
	if strings.Contains(refused.Text(), "urlflow dev") {
		t.Errorf("urlflow serve's refusal speaks of urlflow dev: %s", refused.Text())
	}
}

func TestOnlyTheOperatorsPagesSayWhichURLFlowThisIs(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	e := f.newFlow(t, "alice")
	op := f.browser(t, "operator")
	op.signIn("/admin")
	footer := "urlflow " + buildinfo.Get().Short()
	op.get("/admin").want(t, http.StatusOK, footer)
	op.get("/admin/flows/"+e.ID).want(t, http.StatusOK, footer)
	alice := f.browser(t, "alice")
	alice.signIn("/e/" + e.ID)
	page := alice.open(e.ID)
	page.want(t, http.StatusOK)
	if strings.Contains(page.Body, "site-version") {
		t.Error("a user's page shows urlflow's version")
	}
}

func TestTheOperatorPageOffersOnlyActionsThatCanHelpAndSaysWhyStuck(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	session := f.liveSession(t, "alice")
	e := f.newFlow(t, "alice", inSession(session))
	f.apply(t, e.ID, flow.ClientDecline, state.ActorClient)
	op := f.browser(t, "operator")
	op.signIn("/admin")
	op.get("/admin/flows/"+e.ID).want(t, http.StatusOK, "Send the notification again")

	if _, err := f.store.Deliveries().SessionEnded(t.Context(), e.ID, session, "the client closed it", false); err != nil {
		t.Fatal(err)
	}
	page := op.get("/admin/flows/" + e.ID)
	page.want(t, http.StatusOK, "cannot be sent again: the client's session ended (the client closed it)", "Start a new attempt")
	if strings.Contains(page.Text(), "Send the notification again") {
		t.Error("the page offers to send the notification again to a session that ended")
	}

	f.newFlow(t, "bob")
	f.clock.Advance(flow.DefaultStuckAfter.Pending)
	op.get("/admin").want(t, http.StatusOK, "stuck: the client has not answered")
}

func TestAReadOnlyOperatorLooksAndNeverActs(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	e := f.newFlow(t, "alice")
	viewer := f.browser(t, "viewer")
	viewer.signIn("/admin")
	viewer.get("/admin").want(t, http.StatusOK, "Stuck flows", e.ID[:12])
	page := viewer.get("/admin/flows/" + e.ID)
	page.want(t, http.StatusOK, "Timeline", "Your operator role is read-only")
	if strings.Contains(page.Text(), "Cancel this flow") {
		t.Error("the read-only operator is offered to cancel")
	}
	before := f.snapshot(t, e.ID)
	viewer.post("/admin/flows/"+e.ID+"/cancel", url.Values{"csrf": {page.csrf(t)}, "reason": {"looks stuck"}, "confirm": {"yes"}}).
		want(t, http.StatusForbidden, "read-only", "Nothing was changed")
	f.wantUnchanged(t, e.ID, before)
	f.trail.Flush(t.Context()) // a refusal is written with the next batch of waiting events
	refused := false
	for _, ev := range f.audited(t, "viewer") {
		refused = refused || (ev.Event == audit.IdentityRefused && strings.Contains(ev.Reason, "read-only operator may not cancel"))
	}
	if !refused {
		t.Error("the audit trail does not record the read-only operator's refused cancel")
	}
}

func TestTheOperatorsListCountsPagesBackAndShowsEveryStuckFlow(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	var stuck []string
	for range 12 {
		stuck = append(stuck, f.newFlow(t, "alice").ID)
		f.clock.Advance(time.Millisecond)
	}
	f.clock.Advance(flow.DefaultStuckAfter.Pending)
	op := f.browser(t, "operator")
	op.signIn("/admin")

	overview := op.get("/admin")
	overview.want(t, http.StatusOK, "The oldest 10 of 12 stuck flows.")
	all, ok := overview.link("All 12 stuck flows, page by page")
	top := overview.Body[:strings.Index(overview.Body, `id="flows"`)]
	if !ok || !strings.Contains(top, "/admin/flows/"+stuck[9]) || strings.Contains(top, "/admin/flows/"+stuck[10]) {
		t.Fatalf("no link to every stuck flow, or not the 10 oldest shown at the top: %s", overview.Text())
	}
	if all != "/admin?stuck=true#flows" {
		t.Errorf("the link to every stuck flow goes to %q", all)
	}

	// Five a page: 12 in all, and back as forward.
	first := op.get("/admin?stuck=true&limit=5")
	first.want(t, http.StatusOK, "12 flows match.")
	for _, back := range []string{"Previous page", "First page"} {
		if _, ok := first.link(back); ok {
			t.Errorf("the first page offers %q", back)
		}
	}
	next, ok := first.link("Next page")
	if !ok {
		t.Fatalf("the first of three pages offers no next page: %s", first.Text())
	}
	// listed is what the list of a page holds, below the stuck flows at the top.
	listed := func(a answer) string { return a.Body[strings.Index(a.Body, `id="flows"`):] }
	second := op.get(strings.TrimSuffix(next, "#flows"))
	second.want(t, http.StatusOK, "12 flows match.", "First page", "Previous page", "Next page")
	for _, id := range stuck[5:10] {
		if !strings.Contains(listed(second), "/admin/flows/"+id) {
			t.Errorf("the second page does not list %s", id)
		}
	}
	prev, _ := second.link("Previous page")
	back := op.get(strings.TrimSuffix(prev, "#flows"))
	for _, id := range stuck[:5] {
		if !strings.Contains(listed(back), "/admin/flows/"+id) {
			t.Errorf("the page before the second does not list %s", id)
		}
	}
	if strings.Contains(listed(back), "/admin/flows/"+stuck[5]) {
		t.Error("the page before the second lists the second's first flow")
	}
}
