package delegate_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/urlflow/urlflow/delegate"
)

// Client.Follow reads urlflow's event stream and tells each owed client session that its
// user finished; a lost connection is resumed from the last event read (Last-Event-ID),
// and a reset (events lost) makes it ask urlflow about every elicitation still owed.

// eventTap is the transport of a Client between it and urlflow's event stream: it sees
// each event the Client reads and each position it asks for, and can take the stream
// down (cut the open one, refuse new ones) and bring it up again.
type eventTap struct {
	mu        sync.Mutex
	down      bool
	open      []io.Closer
	positions []string // Last-Event-ID of each connection ("" for none)
	events    []sse    // the events the Client read, in order
	changed   chan struct{}
}

// sse is one server-sent event.
type sse struct{ ID, Event, Data string }

func newEventTap() *eventTap { return &eventTap{changed: make(chan struct{}, 1)} }

func (tap *eventTap) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Path != "/api/v1/events" {
		return testTransport.RoundTrip(req)
	}
	tap.mu.Lock()
	tap.positions = append(tap.positions, req.Header.Get("Last-Event-ID"))
	down := tap.down
	tap.mu.Unlock()
	if down {
		return nil, errors.New("the test took the event stream down")
	}
	resp, err := testTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	tap.mu.Lock()
	tap.open = append(tap.open, resp.Body)
	tap.mu.Unlock()
	resp.Body = &tappedStream{ReadCloser: resp.Body, tap: tap}
	return resp, nil
}

// tappedStream hands the tap each event as the Client reads it.
type tappedStream struct {
	io.ReadCloser
	tap     *eventTap
	partial []byte
	cur     sse
}

func (s *tappedStream) Read(p []byte) (int, error) {
	n, err := s.ReadCloser.Read(p)
	s.partial = append(s.partial, p[:n]...)
	for {
		i := bytes.IndexByte(s.partial, '\n')
		if i < 0 {
			break
		}
		line := string(s.partial[:i])
		s.partial = s.partial[i+1:]
		switch {
		case line == "" && s.cur.Event != "":
			s.tap.saw(s.cur)
			s.cur = sse{}
		case strings.HasPrefix(line, "id: "):
			s.cur.ID = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			s.cur.Event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			s.cur.Data = strings.TrimPrefix(line, "data: ")
		}
	}
	return n, err
}

func (tap *eventTap) saw(ev sse) {
	tap.mu.Lock()
	tap.events = append(tap.events, ev)
	tap.mu.Unlock()
	select {
	case tap.changed <- struct{}{}:
	default:
	}
}

// waitEvent waits until the Client has read an event of kind whose data holds text, and
// returns it.
func (tap *eventTap) waitEvent(t testing.TB, kind, text string) sse {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		tap.mu.Lock()
		for _, ev := range tap.events {
			if ev.Event == kind && strings.Contains(ev.Data, text) {
				tap.mu.Unlock()
				return ev
			}
		}
		tap.mu.Unlock()
		select {
		case <-tap.changed:
		case <-deadline:
			t.Fatalf("the Client read no %s event with %q", kind, text)
		}
	}
}

// lastID returns the ID of the last event the Client read.
func (tap *eventTap) lastID() string {
	tap.mu.Lock()
	defer tap.mu.Unlock()
	if len(tap.events) == 0 {
		return ""
	}
	return tap.events[len(tap.events)-1].ID
}

// takeDown cuts the open stream and refuses new ones until bringUp.
func (tap *eventTap) takeDown() {
	tap.mu.Lock()
	defer tap.mu.Unlock()
	tap.down = true
	for _, c := range tap.open {
		c.Close()
	}
	tap.open = nil
}

func (tap *eventTap) bringUp() {
	tap.mu.Lock()
	defer tap.mu.Unlock()
	tap.down = false
}

// positionsAsked returns the Last-Event-ID of each connection so far.
func (tap *eventTap) positionsAsked() []string {
	tap.mu.Lock()
	defer tap.mu.Unlock()
	return append([]string(nil), tap.positions...)
}

func TestFollowResumesALostStreamFromTheLastEventItRead(t *testing.T) {
	t.Parallel()
	u := startUrlflow(t)
	tap := newEventTap()
	w := startWeather(t, u, delegate.Options{Style: delegate.StyleError, HTTPClient: &http.Client{Transport: tap}})
	w.follow(t)
	nina := w.connect(t, clientOptions{Token: u.userToken("nina"), URLMode: true})
	_, err := nina.call("forecast", forecast)
	asked := urlElicitationRequired(t, err)
	tap.waitEvent(t, "elicitation", asked.ElicitationID) // its creation
	read := tap.lastID()

	// The stream is lost while the user finishes: the events wait in urlflow.
	tap.takeDown()
	newPerson(t, u, "nina").completeSecret(asked.URL, demoKey())
	if u.elicitation(asked.ElicitationID) != "complete" {
		t.Fatal("the flow did not complete")
	}
	tap.bringUp()
	nina.waitCompletion(asked.ElicitationID, 20*time.Second)

	positions := tap.positionsAsked()
	if len(positions) < 2 || positions[0] != "" {
		t.Fatalf("positions asked %q, want a first stream from now and at least one reconnection", positions)
	}
	for _, p := range positions[1:] {
		if p != read {
			t.Errorf("a reconnection asked from %q, want the last event read, %q", p, read)
		}
	}
	tap.waitEvent(t, "elicitation", `"to":"complete"`) // replayed, not lost
	wantForecast(t, nina.callOK("forecast", forecast))
}

func TestFollowAfterAResetAsksUrlflowAboutEachElicitationStillOwed(t *testing.T) {
	t.Parallel()
	u := startUrlflow(t)
	tap := newEventTap()
	w := startWeather(t, u, delegate.Options{Style: delegate.StyleError, HTTPClient: &http.Client{Transport: tap}})
	w.follow(t)
	olga := w.connect(t, clientOptions{Token: u.userToken("olga"), URLMode: true})
	paul := w.connect(t, clientOptions{Token: u.userToken("paul"), URLMode: true})
	_, err := olga.call("forecast", forecast)
	olgas := urlElicitationRequired(t, err)
	_, err = paul.call("forecast", forecast)
	pauls := urlElicitationRequired(t, err)
	tap.waitEvent(t, "elicitation", pauls.ElicitationID)

	// Down for longer than urlflow keeps events: Olga finishes, and the events that say so
	// are gone when the Client comes back.
	tap.takeDown()
	newPerson(t, u, "olga").completeSecret(olgas.URL, demoKey())
	u.forgetOldEvents()
	tap.bringUp()
	tap.waitEvent(t, "reset", "")
	olga.waitCompletion(olgas.ElicitationID, 20*time.Second)
	eventually(t, 10*time.Second, "the Client reads Paul's elicitation, also owed", func() bool {
		return len(w.API.calls("GET /api/v1/elicitations/"+pauls.ElicitationID)) > 0
	})
	// Paul's flow still runs, and the stream goes on from the reset.
	paul.noCompletion(200 * time.Millisecond)
	newPerson(t, u, "paul").completeSecret(pauls.URL, demoKey())
	paul.waitCompletion(pauls.ElicitationID, 20*time.Second)
}

func TestFollowRetriesARefusedStreamAndReturnsWhenItsContextEnds(t *testing.T) {
	t.Parallel()
	u := startUrlflow(t)
	w := startWeather(t, u, delegate.Options{Key: "urlflow_sk_NOTAKEYOFANYSERVICE"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Client.Follow(ctx) }()
	eventually(t, 10*time.Second, "a second attempt after a refusal", func() bool {
		return len(w.API.calls("GET /api/v1/events")) >= 2
	})
	for _, c := range w.API.calls("GET /api/v1/events") {
		if c.Status != http.StatusUnauthorized {
			t.Errorf("an attempt answered %d, want 401", c.Status)
		}
	}
	if log := w.Log.String(); !strings.Contains(log, "urlflow event stream ended; reconnecting") || !strings.Contains(log, "401") {
		t.Errorf("the refusal is not logged:\n%s", log)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Follow returned %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Follow did not return after its context ended")
	}
}

// An event whose data is not urlflow's, and a stream that ends, stand in for failures that
// urlflow cannot be made to produce: Follow logs the event, goes on, and reconnects from
// the last event it read.
func TestFollowSkipsAnEventItCannotReadAndReconnectsFromIt(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var positions []string
	reconnected := make(chan struct{})
	standIn := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/events" || r.Header.Get("Authorization") != "Bearer urlflow_sk_K" || r.Header.Get("Accept") != "text/event-stream" {
			http.Error(w, "not as urlflow's stream is asked for", http.StatusBadRequest)
			return
		}
		mu.Lock()
		positions = append(positions, r.Header.Get("Last-Event-ID"))
		n := len(positions)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		if n == 1 {
			fmt.Fprint(w, ": urlflow events\n\nid: 5-0\nevent: elicitation\ndata: {not json\n\n: keep-alive\n\n")
			return // the stream ends
		}
		if n == 2 {
			close(reconnected)
		}
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer standIn.Close()
	log := &syncBuffer{}
	c, err := delegate.New(delegate.Options{URL: standIn.URL, Key: "urlflow_sk_K", Logger: slogTo(log)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Follow(ctx) }()
	select {
	case <-reconnected:
	case <-time.After(10 * time.Second):
		t.Fatal("Follow did not reconnect")
	}
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if positions[1] != "5-0" {
		t.Errorf("reconnected from %q, want 5-0, the last event read", positions[1])
	}
	for _, want := range []string{"urlflow event not understood", "urlflow event stream ended; reconnecting"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the log does not say %q:\n%s", want, log)
		}
	}
}
