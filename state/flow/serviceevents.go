package flow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/state"
)

// A delegating service learns what happens to the elicitations it created from its event
// stream: a Redis stream per service, appended by the step that makes each change (in its
// script; on a Cluster, in the round trip after it, like the deadline index), kept
// ServiceEventsKeep, and read with a resumable position (the stream entry ID).

// ServiceEventsKeep is how long a service's events are kept: a reader that comes back
// later than this is told to resynchronise (ErrEventsGone).
const ServiceEventsKeep = 24 * time.Hour

// ErrEventsGone says that events after the position asked for may no longer be kept.
var ErrEventsGone = errors.New("events after this position are no longer kept")

// ErrBadPosition says that a position is not an event ID of the stream's form.
var ErrBadPosition = errors.New("not an event ID")

func serviceEventsKey(service string) string { return state.KeyPrefix + "svc:" + service + ":events" }

// ServiceEvent is one entry of a service's event stream: the elicitation was created
// (Event Created) or changed state.
type ServiceEvent struct {
	// ID is the entry's position in the stream (SSE's event ID).
	ID    string    `json:"-"`
	Event Event     `json:"event"`
	From  State     `json:"from,omitempty"`
	To    State     `json:"to"`
	At    time.Time `json:"at"`
	// Elicitation is the flow after the change, without its URL and history.
	Elicitation View `json:"elicitation"`
}

// queueServiceEvent appends to e's service's stream, outside the user's slot, the event of
// its creation or state change (from → e.State); nothing for urlflow's own flows.
func (s *Store) queueServiceEvent(ctx context.Context, b *batch, e *Elicitation, ev Event, from State) error {
	if e.Service == "" {
		return nil
	}
	doc, err := json.Marshal(ServiceEvent{Event: ev, From: from, To: e.State, At: e.UpdatedAt, Elicitation: e.View("", nil)})
	if err != nil {
		return fmt.Errorf("encode event of %s: %w", e.ID, err)
	}
	key := serviceEventsKey(e.Service)
	minID := strconv.FormatInt(s.now().Add(-ServiceEventsKeep).UnixMilli(), 10)
	s.outside(b, func(p redis.Pipeliner) {
		p.XAdd(ctx, &redis.XAddArgs{Stream: key, MinID: minID, Approx: true, Values: []string{"d", string(doc)}})
		p.PExpire(ctx, key, ServiceEventsKeep+time.Hour)
	})
	return nil
}

// parsePosition returns the milliseconds and sequence of stream entry ID id.
func parsePosition(id string) (ms, seq uint64, err error) {
	a, b, ok := strings.Cut(id, "-")
	if ms, err = strconv.ParseUint(a, 10, 64); err != nil || !ok {
		return 0, 0, ErrBadPosition
	}
	if seq, err = strconv.ParseUint(b, 10, 64); err != nil {
		return 0, 0, ErrBadPosition
	}
	return ms, seq, nil
}

// CheckPosition returns ErrBadPosition when after is not an event ID, and ErrEventsGone
// when the events of service that followed it may be gone: it is older than
// ServiceEventsKeep, or older than what the stream begins with (the stream was lost).
func (s *Store) CheckPosition(ctx context.Context, service, after string) error {
	ms, seq, err := parsePosition(after)
	if err != nil {
		return err
	}
	if int64(ms) > s.now().Add(time.Minute).UnixMilli() {
		return ErrBadPosition // no event has it yet: the reader would wait past every new one
	}
	// A position at or after the newest event (or "0-0" on a stream without one) lost
	// nothing, however old: trimming takes the oldest events first. So a reset's position
	// is not reset again.
	last, err := s.LastServiceEvent(ctx, service)
	if err != nil {
		return err
	}
	lms, lseq, _ := parsePosition(last)
	if after == last || (last != "0-0" && (ms > lms || (ms == lms && seq >= lseq))) {
		return nil
	}
	if int64(ms) < s.now().Add(-ServiceEventsKeep).UnixMilli() {
		return ErrEventsGone
	}
	first, err := s.rdb.XRangeN(ctx, serviceEventsKey(service), "-", "+", 1).Result()
	if err != nil {
		return fmt.Errorf("read the events of %s: %w", service, err)
	}
	if len(first) == 1 {
		fms, fseq, _ := parsePosition(first[0].ID)
		if ms < fms || (ms == fms && seq < fseq) {
			// after was before the first kept event, which is within the retention:
			// nothing can tell whether events between them were lost.
			return ErrEventsGone
		}
	}
	return nil
}

// LastServiceEvent returns the position of the newest event of service ("0-0" when it
// has none): a reader that starts now reads what comes after it.
func (s *Store) LastServiceEvent(ctx context.Context, service string) (string, error) {
	last, err := s.rdb.XRevRangeN(ctx, serviceEventsKey(service), "+", "-", 1).Result()
	if err != nil {
		return "", fmt.Errorf("read the events of %s: %w", service, err)
	}
	if len(last) == 0 {
		return "0-0", nil
	}
	return last[0].ID, nil
}

// ServiceEvents returns the events of service after position after, at most count,
// waiting up to wait for the first when there is none yet (none after the wait: an empty
// list). The wait holds one Redis connection.
func (s *Store) ServiceEvents(ctx context.Context, service, after string, count int64, wait time.Duration) ([]ServiceEvent, error) {
	if _, _, err := parsePosition(after); err != nil {
		return nil, err
	}
	streams, err := s.rdb.XRead(ctx, &redis.XReadArgs{Streams: []string{serviceEventsKey(service), after}, Count: count, Block: wait}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the events of %s: %w", service, err)
	}
	var out []ServiceEvent
	for _, st := range streams {
		for _, m := range st.Messages {
			var ev ServiceEvent
			doc, _ := m.Values["d"].(string)
			if err := json.Unmarshal([]byte(doc), &ev); err != nil {
				s.log.WarnContext(ctx, "unreadable service event skipped", "service", service, "event_id", m.ID, "err", err)
				continue
			}
			ev.ID = m.ID
			out = append(out, ev)
		}
	}
	return out, nil
}
