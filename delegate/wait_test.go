package delegate_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/urlflow/urlflow/delegate"
)

// How long a call waits for its user: a push-style call at most PushWait, then an honest
// "still waiting"; a call that carries a progress token as long as the user takes (up to
// ProgressWaitLimit), with a progress notification every ProgressInterval.

func TestAPushCallThatOutlastsPushWaitAnswersStillWaitingAndFollowTellsTheSessionLater(t *testing.T) {
	t.Parallel()
	u := startUrlflow(t)
	const pushWait = 2 * time.Second
	w := startWeather(t, u, delegate.Options{PushWait: pushWait})
	w.follow(t)
	gina := w.connect(t, clientOptions{Token: u.userToken("gina"), URLMode: true})

	start := time.Now()
	res := gina.callOK("forecast", forecast)
	waited := time.Since(start)
	asked := gina.nextElicitation(time.Second)
	if waited < pushWait-100*time.Millisecond || waited > pushWait+5*time.Second {
		t.Errorf("the call answered after %s, want about PushWait (%s)", waited, pushWait)
	}
	got := structured(t, res)
	if res.IsError || got["status"] != "user_action_required" || got["state"] != "consented" || got["url"] != asked.URL ||
		got["elicitationId"] != asked.ElicitationID || !strings.Contains(text(res), "Still waiting") {
		t.Fatalf("after PushWait: %v %q, want an honest still waiting", got, text(res))
	}
	// Each long poll asked urlflow for at most what was left of PushWait.
	for _, c := range w.API.calls("GET /api/v1/elicitations/" + asked.ElicitationID) {
		secs, err := strconv.Atoi(strings.TrimPrefix(c.Query, "wait="))
		if err != nil || secs < 0 || time.Duration(secs)*time.Second > pushWait {
			t.Errorf("a long poll with %q, want wait=0 to %d", c.Query, int(pushWait.Seconds()))
		}
	}

	// The user finishes after the call returned: the session still hears of it.
	newPerson(t, u, "gina").completeSecret(asked.URL, demoKey())
	gina.waitCompletion(asked.ElicitationID, 20*time.Second)
	wantForecast(t, gina.callOK("forecast", forecast))
}

// withProgress is a forecast call that carries a progress token.
func withProgress() *mcp.CallToolParams {
	p := &mcp.CallToolParams{Name: "forecast", Arguments: forecast}
	p.SetProgressToken("forecast-1")
	return p
}

func TestACallWithAProgressTokenHearsProgressAndWaitsPastPushWaitUntilTheUserFinishes(t *testing.T) {
	t.Parallel()
	u := startUrlflow(t)
	w := startWeather(t, u, delegate.Options{PushWait: time.Second, ProgressInterval: time.Second})
	hana := w.connect(t, clientOptions{Token: u.userToken("hana"), URLMode: true})

	call := hana.callAsync(withProgress())
	asked := hana.nextElicitation(30 * time.Second)
	for step := 1; step <= 2; step++ {
		select {
		case p := <-hana.Progress:
			if p.ProgressToken != "forecast-1" || p.Progress != float64(step) || !strings.Contains(p.Message, asked.URL) {
				t.Errorf("progress %+v, want step %d naming the URL", p, step)
			}
		case r := <-call:
			t.Fatalf("the call returned before the user finished: %+v %v", r.res, r.err)
		case <-time.After(10 * time.Second):
			t.Fatalf("no progress notification %d", step)
		}
	}
	newPerson(t, u, "hana").completeSecret(asked.URL, demoKey())
	wantForecast(t, await(t, call, time.Minute))
}

func TestProgressIsPacedByProgressIntervalAndEndsAtProgressWaitLimit(t *testing.T) {
	t.Parallel()
	u := startUrlflow(t)
	const interval, limit = 200 * time.Millisecond, 2 * time.Second
	w := startWeather(t, u, delegate.Options{ProgressInterval: interval, ProgressWaitLimit: limit})
	ivan := w.connect(t, clientOptions{Token: u.userToken("ivan"), URLMode: true})

	start := time.Now()
	res, err := ivan.callWith(withProgress())
	waited := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if got := structured(t, res); got["status"] != "user_action_required" || !strings.Contains(text(res), "Still waiting") {
		t.Fatalf("at ProgressWaitLimit: %v %q, want still waiting", got, text(res))
	}
	if waited < limit-100*time.Millisecond || waited > limit+5*time.Second {
		t.Errorf("the call answered after %s, want about ProgressWaitLimit (%s)", waited, limit)
	}
	// About one notification and one long poll per interval, not a tight loop.
	most := int(waited/interval) + 2
	if n := len(ivan.Progress); n < 3 || n > most {
		t.Errorf("%d progress notifications in %s, want about one every %s", n, waited, interval)
	}
	if n := len(w.API.calls("GET /api/v1/elicitations/")); n > most {
		t.Errorf("%d long polls of urlflow in %s, want about one every %s", n, waited, interval)
	}
}
