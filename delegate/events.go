package delegate

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Event is one event of urlflow's event stream of your server (GET /api/v1/events).
type Event struct {
	// ID is its position in the stream: Events from it goes on after it.
	ID string
	// Type is "elicitation" (Elicitation is set), "credential" (Credential is set) or
	// "reset": events after the position asked for are no longer kept (24 hours), and the
	// stream goes on from now; read the state of your running elicitations again.
	Type        string
	Elicitation *ElicitationChange
	Credential  *CredentialEvent
}

// ElicitationChange is a change of one of your server's elicitations.
type ElicitationChange struct {
	// Event is "created", or the event of the change ("client_accept", "verified",
	// "cancel", ...); From and To the states before and after it.
	Event       string      `json:"event"`
	From        string      `json:"from"`
	To          string      `json:"to"`
	At          time.Time   `json:"at"`
	Elicitation Elicitation `json:"elicitation"`
}

// Events reads your server's events from urlflow, in order, after position lastEventID
// (from now when empty), and hands each to fn: elicitation and credential changes and
// resets (events of types it does not know are skipped). After a dropped connection it
// reconnects from the last event read. It returns when ctx ends (ctx's error), when fn
// returns an error (that error), or when urlflow refuses the stream (an *APIError: a
// wrong key, or a lastEventID that is not a position of the stream).
func (c *Client) Events(ctx context.Context, lastEventID string, fn func(*Event) error) error {
	return c.events(ctx, lastEventID, fn, false)
}

// events is Events; with retryRefused, it also reconnects after a refusal of the stream.
func (c *Client) events(ctx context.Context, lastEventID string, fn func(*Event) error, retryRefused bool) error {
	last := lastEventID
	for {
		err := c.readEvents(ctx, &last, fn)
		var handled *handlerError
		var refused *APIError
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.As(err, &handled):
			return handled.err
		case !retryRefused && errors.As(err, &refused) && refused.Status != http.StatusTooManyRequests && refused.Status < 500:
			return err
		}
		c.log.Warn("urlflow event stream ended; reconnecting", "err", err)
		if err := sleep(ctx, time.Second); err != nil {
			return err
		}
	}
}

// handlerError carries the error of Events' fn out of readEvents.
type handlerError struct{ err error }

func (e *handlerError) Error() string { return e.err.Error() }

// readEvents reads one connection of the event stream after *last, keeping the position of
// the last event read in *last.
func (c *Client) readEvents(ctx context.Context, last *string, fn func(*Event) error) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base.JoinPath("api/v1/events").String(), nil)
	if err != nil {
		return err
	}
	if err := c.authorize(req); err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	if *last != "" {
		req.Header.Set("Last-Event-ID", *last)
	}
	resp, err := c.opts.HTTPClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, err := c.answer(resp, http.MethodGet, "events", nil)
		return err
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var id, event string
	var data []string
	for sc.Scan() {
		line := sc.Text()
		if line != "" {
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "id":
				id = value
			case "event":
				event = value
			case "data":
				data = append(data, value)
			}
			continue
		}
		// Every event moves the position, also one of a type this package skips.
		if id != "" {
			*last = id
		}
		if ev, err := parseEvent(id, event, strings.Join(data, "\n")); err != nil {
			c.log.Warn("urlflow event not understood", "event", event, "err", err)
		} else if ev != nil {
			if err := fn(ev); err != nil {
				return &handlerError{err}
			}
		}
		event, data = "", nil
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return io.ErrUnexpectedEOF // urlflow never ends the stream itself
}

// parseEvent reads one event of the stream; nil for a type it does not know.
func parseEvent(id, event, data string) (*Event, error) {
	ev := &Event{ID: id, Type: event}
	switch event {
	case "elicitation":
		ev.Elicitation = &ElicitationChange{}
		if err := json.Unmarshal([]byte(data), ev.Elicitation); err != nil {
			return nil, fmt.Errorf("delegate: event %s: %w", id, err)
		}
	case "credential":
		ev.Credential = &CredentialEvent{}
		if err := json.Unmarshal([]byte(data), ev.Credential); err != nil {
			return nil, fmt.Errorf("delegate: event %s: %w", id, err)
		}
	case "reset":
	default:
		return nil, nil
	}
	return ev, nil
}
