package api

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/urlflow/urlflow/oauth/identity"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/flow"
	"github.com/urlflow/urlflow/state/serviceevents"
	"github.com/urlflow/urlflow/web/respond"
)

// A delegating service follows its elicitations on GET /api/v1/events: a server-sent-events
// stream of every creation and change of state of the elicitations it created, read from
// its Redis stream (package serviceevents), so that a stream opened on any replica sees the
// changes of all. A reader that reconnects with Last-Event-ID gets what it missed, for
// serviceevents.Keep; an older position gets a reset event first, after which the
// stream goes on from now: the reader reads the state of its elicitations again.

// DefaultEventsKeepAlive is how often an event stream without events sends a comment, so
// that proxies on the way keep it open.
const DefaultEventsKeepAlive = 15 * time.Second

// MaxEventStreams bounds the streams one service holds open on one replica: each holds a
// Redis connection while it waits.
const MaxEventStreams = 4

// eventBatch bounds the events read from Redis at once.
const eventBatch = 100

// eventStreams counts the open event streams of each service on this replica.
type eventStreams struct {
	mu   sync.Mutex
	open map[string]int
}

// take counts a new stream of service, unless it holds MaxEventStreams already.
func (e *eventStreams) take(service string) (release func(), ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.open[service] >= MaxEventStreams {
		return nil, false
	}
	if e.open == nil {
		e.open = map[string]int{}
	}
	e.open[service]++
	return func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.open[service]--; e.open[service] == 0 {
			delete(e.open, service)
		}
	}, true
}

// EventData is the data of an elicitation event on the stream.
type EventData struct {
	Event       flow.Event `json:"event"`
	From        flow.State `json:"from,omitempty"`
	To          flow.State `json:"to"`
	At          time.Time  `json:"at"`
	Elicitation flow.View  `json:"elicitation"`
}

// apiEvents is GET /api/v1/events, for delegating services only.
func (s *API) apiEvents(c echo.Context) error {
	who, _ := identity.CallerFrom(c.Request().Context())
	svc, ok := s.opts.Services.Lookup(who.Service)
	if !ok {
		return respond.Refuse(http.StatusForbidden, "only a delegating service has an event stream; users read their elicitations one by one")
	}
	after, reset, err := s.startPosition(c, svc.Name)
	if err != nil {
		return err
	}
	release, ok := s.eventStreams.take(svc.Name)
	if !ok {
		c.Response().Header().Set("Retry-After", "5")
		return respond.Refuse(http.StatusTooManyRequests, "the service %s has %d event streams open on this replica already; close one", svc.Name, MaxEventStreams)
	}
	defer release()

	w := c.Response()
	w.Header().Set(echo.HeaderContentType, "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no") // a buffering proxy would hold events back
	w.WriteHeader(http.StatusOK)
	if reset {
		// The position is what the stream goes on from, so that a reader that reconnects
		// after the reset does not get it again.
		fmt.Fprintf(w, "id: %s\nevent: reset\ndata: {\"reason\":\"events after the last one you read are no longer kept (they are kept %s): read the state of your elicitations again\"}\n\n",
			after, serviceevents.Keep)
	} else {
		fmt.Fprint(w, ": urlflow events\n\n")
	}
	w.Flush()
	return s.streamEvents(c, svc.Name, after)
}

// startPosition returns where the event stream of service starts for c: after the
// reader's Last-Event-ID, or now. reset is set when events after the reader's position
// may be gone: it must read the state of its elicitations again.
func (s *API) startPosition(c echo.Context, service string) (after string, reset bool, err error) {
	ctx := c.Request().Context()
	after = cmp.Or(c.Request().Header.Get("Last-Event-ID"), c.QueryParam("lastEventId"))
	if after != "" {
		switch err := s.opts.ServiceEvents.CheckPosition(ctx, service, after); {
		case errors.Is(err, serviceevents.ErrBadPosition):
			return "", false, respond.Refuse(http.StatusBadRequest, "Last-Event-ID: not an event ID of this stream; leave it out to start from now")
		case errors.Is(err, serviceevents.ErrEventsGone):
			reset = true
		case err != nil:
			return "", false, err
		}
	}
	if after == "" || reset {
		after, err = s.opts.ServiceEvents.Last(ctx, service)
	}
	return after, reset, err
}

// streamEvents writes the events of service after position after to c's stream as they
// come, with a keep-alive comment when none came for a while, until the reader leaves.
func (s *API) streamEvents(c echo.Context, service, after string) error {
	ctx, w := c.Request().Context(), c.Response()
	keepAlive := cmp.Or(s.opts.EventsKeepAlive, DefaultEventsKeepAlive)
	for {
		events, err := s.opts.ServiceEvents.Read(ctx, service, after, eventBatch, keepAlive)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			// The reader reconnects with the last ID it read and loses nothing.
			s.log.WarnContext(ctx, "event stream ended", "service", service, "err", err)
			return nil
		}
		if len(events) == 0 {
			fmt.Fprint(w, ": keep-alive\n\n")
		}
		for _, ev := range events {
			kind, data, err := s.eventData(ev)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "id: %s\nevent: %s\ndata: %s\n\n", ev.ID, kind, data)
			after = ev.ID
		}
		w.Flush() // a reader that left ends the request's context, and the read above
	}
}

// The SSE event types of the stream.
const (
	eventElicitation = "elicitation"
	eventCredential  = "credential"
)

// eventData returns the SSE event type and data of ev: an elicitation's event, with the
// URL of a flow that runs, or a credential's.
func (s *API) eventData(ev serviceevents.Event) (kind string, data []byte, err error) {
	if ev.Credential != nil {
		data, err = json.Marshal(ev.Credential)
		return eventCredential, data, err
	}
	el := *ev.Elicitation
	if !el.Elicitation.State.Terminal() {
		el.Elicitation.URL = flow.ElicitationURL(s.opts.PublicURL, el.Elicitation.ID)
	}
	data, err = json.Marshal(EventData(el))
	return eventElicitation, data, err
}

// apiWebhook is GET /api/v1/elicitations/{id}/webhook: the delivery record of the webhook
// that told the elicitation's service it ended, for the service and operators.
func (s *API) apiWebhook(c echo.Context) error {
	who, e, err := s.callerElicitation(c)
	if err != nil {
		return err
	}
	if !who.Operator && who.Service == "" {
		// The delivery is the service's plumbing; its errors may name the service's hosts.
		return unknownElicitation(e.ID)
	}
	d, err := s.opts.Webhooks.Delivery(c.Request().Context(), e.ID)
	if errors.Is(err, state.ErrNotFound) {
		return noWebhook()
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, d)
}
