package web

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/urlflow/urlflow/state/flow"
	"github.com/urlflow/urlflow/state/webhooks"
	"github.com/urlflow/urlflow/web/api"
)

// sse is one event read from an event stream.
type sse struct {
	id, event, data string
}

// eventStream is an open GET /api/v1/events of a service.
type eventStream struct {
	t      *testing.T
	events chan sse
	status int
	body   string // the answer when it is not a stream
	stop   context.CancelFunc
}

// followEvents opens service's event stream, resuming after lastID when not empty.
func (f *fixture) followEvents(t *testing.T, service, lastID string) *eventStream {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.URL+"/api/v1/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+f.serviceKeys[service])
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := (&http.Client{Transport: testTransport}).Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	s := &eventStream{t: t, events: make(chan sse, 64), status: resp.StatusCode, stop: cancel}
	t.Cleanup(s.close)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		var b strings.Builder
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			b.WriteString(sc.Text())
		}
		resp.Body.Close()
		s.body = b.String()
		return s
	}
	go func() {
		defer resp.Body.Close()
		defer close(s.events)
		sc := bufio.NewScanner(resp.Body)
		var cur sse
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if cur.event != "" {
					s.events <- cur
				}
				cur = sse{}
			case strings.HasPrefix(line, "id: "):
				cur.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				cur.event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				cur.data = strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	return s
}

func (s *eventStream) close() { s.stop() }

// next returns the next event, failing the test after 10 seconds without one.
func (s *eventStream) next() sse {
	s.t.Helper()
	select {
	case ev, ok := <-s.events:
		if !ok {
			s.t.Fatal("the event stream ended")
		}
		return ev
	case <-time.After(10 * time.Second):
		s.t.Fatal("no event within 10s")
	}
	return sse{}
}

// nextChange returns the next elicitation event, decoded.
func (s *eventStream) nextChange() (string, api.EventData) {
	s.t.Helper()
	ev := s.next()
	if ev.event != "elicitation" {
		s.t.Fatalf("event %q %s, want an elicitation event", ev.event, ev.data)
	}
	var d api.EventData
	if err := json.Unmarshal([]byte(ev.data), &d); err != nil {
		s.t.Fatal(err)
	}
	return ev.id, d
}

// quiet fails the test if an event arrives within d.
func (s *eventStream) quiet(d time.Duration) {
	s.t.Helper()
	select {
	case ev := <-s.events:
		s.t.Fatalf("unexpected event %q %s", ev.event, ev.data)
	case <-time.After(d):
	}
}

func TestAServiceFollowsItsElicitationsAndResumesWhereItLeft(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	weatherEvents := f.followEvents(t, weather, "")
	calendarEvents := f.followEvents(t, calendar, "")

	v := created(t, f.asService(t, weather, http.MethodPost, "/api/v1/elicitations", f.userTokenFor(t, "alice", weather), createDemoKey), http.StatusCreated)
	createdID, c := weatherEvents.nextChange()
	if c.Event != flow.Created || c.To != flow.Pending || c.Elicitation.ID != v.ID || c.Elicitation.URL != v.URL || c.Elicitation.Service != weather {
		t.Errorf("first event %+v, want the creation of %s with its URL", c, v.ID)
	}
	f.asService(t, weather, http.MethodPost, "/api/v1/elicitations/"+v.ID+"/answer", "", `{"action": "accept"}`).want(t, http.StatusOK)
	_, accepted := weatherEvents.nextChange()
	if accepted.Event != flow.ClientAccept || accepted.From != flow.Pending || accepted.To != flow.Consented {
		t.Errorf("second event %+v, want the accept", accepted)
	}
	f.asService(t, weather, http.MethodPost, "/api/v1/elicitations/"+v.ID+"/cancel", "", "").want(t, http.StatusOK)
	cancelledID, cancelled := weatherEvents.nextChange()
	if cancelled.To != flow.Cancelled || cancelled.Elicitation.URL != "" {
		t.Errorf("third event %+v, want cancelled, without a URL", cancelled)
	}
	// Nothing of weather reaches calendar, nor of urlflow's own flows anyone.
	f.newFlow(t, "alice")
	calendarEvents.quiet(time.Second)
	weatherEvents.quiet(200 * time.Millisecond)

	// A reader that reconnects after the creation gets what followed it, in order.
	weatherEvents.close()
	again := f.followEvents(t, weather, createdID)
	if _, d := again.nextChange(); d.Event != flow.ClientAccept {
		t.Errorf("resumed with %+v, want the accept", d)
	}
	if id, _ := again.nextChange(); id != cancelledID {
		t.Errorf("resumed with %s, want %s", id, cancelledID)
	}
	again.quiet(500 * time.Millisecond)
}

func TestAnEventStreamTooOldToResumeIsReset(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	created(t, f.asService(t, weather, http.MethodPost, "/api/v1/elicitations", f.userTokenFor(t, "alice", weather), createDemoKey), http.StatusCreated)

	old := f.followEvents(t, weather, "1000-0") // 1970: long past what is kept
	reset := old.next()
	if reset.event != "reset" || !strings.Contains(reset.data, "read the state of your elicitations again") || reset.id == "" {
		t.Fatalf("first event %+v, want a reset", reset)
	}
	old.quiet(500 * time.Millisecond) // it goes on from now: the creation is not sent again

	for _, bad := range []string{"yesterday", "12", "1-x"} {
		if s := f.followEvents(t, weather, bad); s.status != http.StatusBadRequest || !strings.Contains(s.body, "Last-Event-ID") {
			t.Errorf("Last-Event-ID %q: %d %s, want 400", bad, s.status, s.body)
		}
	}
	if s := f.followEvents(t, weather, ""); s.status != http.StatusOK {
		t.Errorf("a stream from now: %d", s.status)
	}
	user := request{method: http.MethodGet, path: "/api/v1/events", token: f.token(t, "alice")}
	f.send(t, nil, user).want(t, http.StatusForbidden, "only a delegating service")
}

func TestAServiceHoldsAFewEventStreamsAtOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	for range api.MaxEventStreams {
		if s := f.followEvents(t, weather, ""); s.status != http.StatusOK {
			t.Fatalf("stream refused: %d %s", s.status, s.body)
		}
	}
	over := f.followEvents(t, weather, "")
	if over.status != http.StatusTooManyRequests {
		t.Errorf("stream %d: %d %s, want 429", api.MaxEventStreams+1, over.status, over.body)
	}
	if s := f.followEvents(t, calendar, ""); s.status != http.StatusOK {
		t.Errorf("another service's stream: %d", s.status)
	}
}

func TestTheWebhookOfAnEndedFlowIsReadableByWhoMayReadTheFlow(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	v := created(t, f.asService(t, keyholder, http.MethodPost, "/api/v1/elicitations", f.userTokenFor(t, "alice", keyholder), createDemoKey), http.StatusCreated)
	path := "/api/v1/elicitations/" + v.ID + "/webhook"
	f.asService(t, keyholder, http.MethodGet, path, "", "").want(t, http.StatusNotFound, "has not ended")

	f.asService(t, keyholder, http.MethodPost, "/api/v1/elicitations/"+v.ID+"/cancel", "", "").want(t, http.StatusOK)
	got := f.asService(t, keyholder, http.MethodGet, path, "", "")
	var d webhooks.Delivery
	got.decode(t, &d)
	if got.Status != http.StatusOK || d.ID != webhooks.ID(v.ID) || d.Type != "elicitation.cancelled" || d.Service != keyholder ||
		d.Attempts != 0 || d.NextAttemptAt == nil {
		t.Errorf("the delivery: %d %s", got.Status, got.Body)
	}
	f.api(t, http.MethodGet, path, f.operatorToken, "").want(t, http.StatusOK, webhooks.ID(v.ID))
	f.api(t, http.MethodGet, path, f.token(t, "alice"), "").want(t, http.StatusNotFound, `"unknown"`) // the service's plumbing
	f.asService(t, weather, http.MethodGet, path, "", "").want(t, http.StatusNotFound, `"unknown"`)

	// A service without a webhook has none queued.
	w := created(t, f.asService(t, weather, http.MethodPost, "/api/v1/elicitations", f.userTokenFor(t, "alice", weather), createDemoKey), http.StatusCreated)
	f.asService(t, weather, http.MethodPost, "/api/v1/elicitations/"+w.ID+"/cancel", "", "").want(t, http.StatusOK)
	f.asService(t, weather, http.MethodGet, "/api/v1/elicitations/"+w.ID+"/webhook", "", "").want(t, http.StatusNotFound, "no webhook")
}
