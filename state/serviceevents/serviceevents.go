// Package serviceevents keeps each delegating service's event stream in Redis: the
// creation and every change of state of the elicitations it asked for, appended by the step
// that makes each (as a flow.Outbox), and every change of the credentials it holds
// (as a credentials.Lifecycle), kept Keep, and read from a resumable position (the stream
// entry's ID) by GET /api/v1/events on any replica.
//
// The one idea to hold: the stream is written with the step it tells of, so a reader that
// resumes from its last position misses nothing that happened; a position older than what
// is kept is ErrEventsGone, and the reader must resynchronise.
package serviceevents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/credentials"
	"github.com/urlflow/urlflow/state/flow"
)

// Streams keeps the services' streams.
type Streams struct {
	rdb  redis.UniversalClient
	refs flow.UserRefs
	now  func() time.Time
	log  *slog.Logger
}

// New returns the Streams kept in rdb, whose events name users by the references refs
// make; now is time.Now and log slog.Default() if nil.
func New(rdb redis.UniversalClient, refs flow.UserRefs, now func() time.Time, log *slog.Logger) *Streams {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.Default()
	}
	return &Streams{rdb: rdb, refs: refs, now: now, log: log}
}

// Keep is how long a service's events are kept: a reader that comes back
// later than this is told to resynchronise (ErrEventsGone).
const Keep = 24 * time.Hour

// ErrEventsGone says that events after the position asked for may no longer be kept.
var ErrEventsGone = errors.New("events after this position are no longer kept")

// ErrBadPosition says that a position is not an event ID of the stream's form.
var ErrBadPosition = errors.New("not an event ID")

func streamKey(service string) string { return state.KeyPrefix + "svc:" + service + ":events" }

// Event is one entry of a service's event stream: an elicitation's creation or change of
// state (Elicitation), or a change of a credential (Credential).
type Event struct {
	// ID is the entry's position in the stream (SSE's event ID).
	ID          string
	Elicitation *ElicitationEvent
	Credential  *credentials.Event
}

// ElicitationEvent says that an elicitation was created (Event Created) or changed state.
type ElicitationEvent struct {
	Event flow.Event `json:"event"`
	From  flow.State `json:"from,omitempty"`
	To    flow.State `json:"to"`
	At    time.Time  `json:"at"`
	// Elicitation is the flow after the change, without its URL and history.
	Elicitation flow.View `json:"elicitation"`
}

// The fields of a stream entry: an elicitation event's JSON, or a credential event's.
const (
	elicitationField = "d"
	credentialField  = "c"
)

// QueueStep appends to the stream of the service of step's elicitation the event of its
// creation or state change, and of the credential it stored; nothing for urlflow's own
// flows (flow.Outbox).
func (st *Streams) QueueStep(ctx context.Context, w flow.Writes, step flow.Step) error {
	e := step.Elicitation
	if e.Service == "" {
		return nil
	}
	doc, err := json.Marshal(ElicitationEvent{Event: step.Event, From: step.From, To: e.State, At: e.UpdatedAt, Elicitation: e.ViewFor(st.refs, "", nil)})
	if err != nil {
		return fmt.Errorf("encode event of %s: %w", e.ID, err)
	}
	var stored []byte
	if step.Stored != nil {
		if stored, err = st.credentialDoc(*step.Stored); err != nil {
			return err
		}
	}
	w.Outside(func(p redis.Pipeliner) {
		st.append(ctx, p, e.Service, elicitationField, doc)
		if stored != nil {
			st.append(ctx, p, e.Service, credentialField, stored)
		}
	})
	return nil
}

// QueueCredentialChange appends the event of c to the stream of the credential's service
// (credentials.Lifecycle).
func (st *Streams) QueueCredentialChange(ctx context.Context, p redis.Pipeliner, c credentials.Change) error {
	doc, err := st.credentialDoc(c)
	if err != nil {
		return err
	}
	st.append(ctx, p, c.Service(), credentialField, doc)
	return nil
}

// credentialDoc is the JSON of the event of c.
func (st *Streams) credentialDoc(c credentials.Change) ([]byte, error) {
	doc, err := json.Marshal(c.Event(st.refs.Of(c.Service(), c.User)))
	if err != nil {
		return nil, fmt.Errorf("encode the %s event of %s: %w", c.Type, c.Credential.Name, err)
	}
	return doc, nil
}

// append queues on p the entry of doc, as field, at the end of service's stream, and
// trims what is older than Keep.
func (st *Streams) append(ctx context.Context, p redis.Pipeliner, service, field string, doc []byte) {
	key := streamKey(service)
	minID := strconv.FormatInt(st.now().Add(-Keep).UnixMilli(), 10)
	p.XAdd(ctx, &redis.XAddArgs{Stream: key, MinID: minID, Approx: true, Values: []string{field, string(doc)}})
	p.PExpire(ctx, key, Keep+time.Hour)
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
// Keep, or older than what the stream begins with (the stream was lost).
func (st *Streams) CheckPosition(ctx context.Context, service, after string) error {
	ms, seq, err := parsePosition(after)
	if err != nil {
		return err
	}
	if int64(ms) > st.now().Add(time.Minute).UnixMilli() {
		return ErrBadPosition // no event has it yet: the reader would wait past every new one
	}
	// A position at or after the newest event (or "0-0" on a stream without one) lost
	// nothing, however old: trimming takes the oldest events first. So a reset's position
	// is not reset again.
	last, err := st.Last(ctx, service)
	if err != nil {
		return err
	}
	lms, lseq, _ := parsePosition(last)
	if after == last || (last != "0-0" && (ms > lms || (ms == lms && seq >= lseq))) {
		return nil
	}
	if int64(ms) < st.now().Add(-Keep).UnixMilli() {
		return ErrEventsGone
	}
	first, err := st.rdb.XRangeN(ctx, streamKey(service), "-", "+", 1).Result()
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

// Last returns the position of the newest event of service ("0-0" when it
// has none): a reader that starts now reads what comes after it.
func (st *Streams) Last(ctx context.Context, service string) (string, error) {
	last, err := st.rdb.XRevRangeN(ctx, streamKey(service), "+", "-", 1).Result()
	if err != nil {
		return "", fmt.Errorf("read the events of %s: %w", service, err)
	}
	if len(last) == 0 {
		return "0-0", nil
	}
	return last[0].ID, nil
}

// Read returns the events of service after position after, at most count,
// waiting up to wait for the first when there is none yet (none after the wait: an empty
// list). The wait holds one Redis connection.
func (st *Streams) Read(ctx context.Context, service, after string, count int64, wait time.Duration) ([]Event, error) {
	if _, _, err := parsePosition(after); err != nil {
		return nil, err
	}
	streams, err := st.rdb.XRead(ctx, &redis.XReadArgs{Streams: []string{streamKey(service), after}, Count: count, Block: wait}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the events of %s: %w", service, err)
	}
	var out []Event
	for _, stream := range streams {
		for _, m := range stream.Messages {
			ev, err := decodeEntry(m)
			if err != nil {
				st.log.WarnContext(ctx, "unreadable service event skipped", "service", service, "event_id", m.ID, "err", err)
				continue
			}
			out = append(out, ev)
		}
	}
	return out, nil
}

// decodeEntry reads the event of stream entry m.
func decodeEntry(m redis.XMessage) (Event, error) {
	ev := Event{ID: m.ID}
	if doc, ok := m.Values[credentialField].(string); ok {
		ev.Credential = &credentials.Event{}
		return ev, json.Unmarshal([]byte(doc), ev.Credential)
	}
	doc, _ := m.Values[elicitationField].(string)
	ev.Elicitation = &ElicitationEvent{}
	return ev, json.Unmarshal([]byte(doc), ev.Elicitation)
}
