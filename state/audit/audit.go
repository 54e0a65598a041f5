// Package audit keeps urlflow's audit trail: one trail for the whole deployment of every
// change of an elicitation's state and every security-relevant event (sign-ins, refused
// identities, credentials stored, replaced, refreshed, released, disconnected or locked,
// operators' actions, rate-limit refusals), with bounded retention, exported as JSON Lines.
//
// An event holds facts and minimal metadata (who, what, when, which client, service,
// replica and elicitation), never a value: no secret, token or page input is ever an
// argument of this package. The trail is a Redis stream spread over Buckets keys (each its
// own Cluster slot), trimmed by age and by length. Events that an outsider can repeat at will
// (a refused token, a link opened by the wrong user, a rate-limit refusal) go through
// Trail.Repeated, which writes the first one and then one event per window that counts the
// rest, so that a flood cannot push the real events out.
package audit

import (
	"container/heap"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/urlflow/urlflow/state"
)

// Buckets is the number of streams the trail is spread over.
const Buckets = 16

// Key names the stream of bucket b.
func Key(b int) string { return state.KeyPrefix + "{audit:" + strconv.Itoa(b) + "}" }

// The events that are not a transition of an elicitation (those carry the state table's
// event, package flow).
const (
	Transition        = "transition"          // an elicitation changed state: from, to, the event in Reason's place
	SignedIn          = "signed_in"           // a browser signed in
	IdentityRefused   = "identity_refused"    // a bearer token, a sign-in or a link's user refused
	CredentialStored  = "credential_stored"   // a new credential, verified where its slot can
	CredentialReplace = "credential_replaced" // a credential stored in place of another
	CredentialRefresh = "credential_refreshed"
	CredentialRelease = "credential_released" // given to a delegating service allowed to receive it
	CredentialDeleted = "credential_deleted"  // disconnected by its user, or revoked
	CredentialLocked  = "credential_locked"   // locked after it was sent where it must not go
	// CredentialOfflineWithdrawn: its user withdrew its service's use of it while away.
	CredentialOfflineWithdrawn = "credential_offline_withdrawn"
	OperatorAction             = "operator_action"
	WebhookRedeliver           = "webhook_redelivered" // a webhook message queued again; Cause is its webhook-id
	RateLimited                = "rate_limited"
)

// User is who an event is about.
type User struct {
	Issuer  string `json:"iss"`
	Subject string `json:"sub"`
}

// AddressOf is an Event's Address for the client address a: "" when it is not known.
func AddressOf(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}

// About returns e about user u: its issuer and subject, and its key (state.User.Key), by
// which urlflow's logs name it.
func (e Event) About(u state.User) Event {
	if !u.IsZero() {
		e.User, e.UserKey = &User{Issuer: u.Issuer, Subject: u.Subject}, u.Key()
	}
	return e
}

// Event is one entry of the trail.
type Event struct {
	// ID is its position in the trail (set when read).
	ID    string      `json:"id,omitempty"`
	At    time.Time   `json:"at"`
	Event string      `json:"event"`
	Actor state.Actor `json:"actor,omitempty"`
	// By names the operator who acted.
	By          string `json:"by,omitempty"`
	User        *User  `json:"user,omitempty"`
	UserKey     string `json:"userKey,omitempty"`
	Elicitation string `json:"elicitationId,omitempty"`
	// Kind and Target are an elicitation's; Credential, a credential's name.
	Kind       string `json:"kind,omitempty"`
	Target     string `json:"target,omitempty"`
	Credential string `json:"credential,omitempty"`
	// From and To are the states of a transition; Cause the event that moved it.
	From    string `json:"from,omitempty"`
	To      string `json:"to,omitempty"`
	Cause   string `json:"cause,omitempty"`
	Service string `json:"service,omitempty"`
	Client  string `json:"client,omitempty"`
	Replica string `json:"replica,omitempty"`
	// Address is the client address of a refused request (AddressOf).
	Address string `json:"address,omitempty"`
	Reason  string `json:"reason,omitempty"`
	// Count is how many identical events this one stands for, from At to LastAt; 0 (left
	// out) means one.
	Count  int       `json:"count,omitempty"`
	LastAt time.Time `json:"lastAt,omitzero"`
	// Migrated marks an entry of a user's audit log of an earlier urlflow, moved here.
	Migrated bool `json:"migrated,omitempty"`
}

// The defaults of Options.
const (
	DefaultRetention  = 30 * 24 * time.Hour
	DefaultMaxEntries = 2_000_000
	// RepeatWindow is how long identical repeated events are counted before one is written.
	RepeatWindow = 10 * time.Second
	// repeatKinds bounds the distinct repeated events counted at once; past it, further
	// ones are counted by event alone.
	repeatKinds = 1000
)

// Options configure a Trail.
type Options struct {
	// Retention is how long events are kept; DefaultRetention if zero.
	Retention time.Duration
	// MaxEntries bounds the trail (about, over all buckets); DefaultMaxEntries if zero.
	MaxEntries int64
	// Replica names this process in its events.
	Replica string
	// Now returns the current time; time.Now if nil.
	Now    func() time.Time
	Logger *slog.Logger
}

// Trail writes and reads the audit trail.
type Trail struct {
	rdb     redis.UniversalClient
	opts    Options
	log     *slog.Logger
	mu      sync.Mutex // guards repeats and later
	repeats map[string]*repeat
	// later holds the events of Later and the first ones of Repeated until the next
	// write (Run, every LaterInterval).
	later []Event
}

// LaterInterval is how often the events of Later are written.
const LaterInterval = time.Second

// laterLimit bounds the events waiting to be written; past it, Later writes at once.
const laterLimit = 10_000

// repeat counts the repetitions of one event since the window began, after the first.
type repeat struct {
	event       Event
	count       int
	first, last time.Time
}

// again counts one more repetition, at at.
func (r *repeat) again(at time.Time) {
	if r.count == 0 {
		r.first = at
	}
	r.count++
	r.last = at
}

// New returns the trail on rdb.
func New(rdb redis.UniversalClient, opts Options) *Trail {
	if opts.Retention <= 0 {
		opts.Retention = DefaultRetention
	}
	if opts.MaxEntries <= 0 {
		opts.MaxEntries = DefaultMaxEntries
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Trail{rdb: rdb, opts: opts, log: log, repeats: map[string]*repeat{}}
}

// bucketOf returns the bucket of an event about subject (an elicitation ID, a user key).
func bucketOf(subject string) int {
	h := fnv.New32a()
	h.Write([]byte(subject))
	return int(h.Sum32() % Buckets)
}

// Queue queues on p the append of e, stamped with the time and this replica when they are
// unset. p may be a step's batch, which sends it with the step. A nil Trail queues nothing.
func (t *Trail) Queue(ctx context.Context, p redis.Pipeliner, e Event) {
	if t == nil {
		return
	}
	if e.At.IsZero() {
		e.At = t.opts.Now().UTC()
	}
	if e.Replica == "" {
		e.Replica = t.opts.Replica
	}
	doc, err := json.Marshal(e)
	if err != nil { // only a time past year 9999 could do it
		t.log.ErrorContext(ctx, "audit event not encoded", "event", e.Event, "err", err)
		return
	}
	subject := e.Elicitation
	if subject == "" {
		subject = e.UserKey
	}
	// Stream IDs are Redis's clock, which the real time approximates better than Now
	// (which tests set).
	minID := strconv.FormatInt(time.Now().Add(-t.opts.Retention).UnixMilli(), 10)
	// Trimmed by age here, and by length at each window's end (trimLength): XADD takes
	// one of the two.
	p.XAdd(ctx, &redis.XAddArgs{Stream: Key(bucketOf(subject)), MinID: minID, Approx: true, Values: []string{"e", string(doc)}})
}

// trimLength trims every bucket to its share of MaxEntries, roughly.
func (t *Trail) trimLength(ctx context.Context) {
	_, err := t.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for b := range Buckets {
			p.XTrimMaxLenApprox(ctx, Key(b), t.opts.MaxEntries/Buckets, 0)
		}
		return nil
	})
	if err != nil {
		t.log.WarnContext(ctx, "audit trail not trimmed", "err", err)
	}
}

// Record appends e in a round trip of its own.
func (t *Trail) Record(ctx context.Context, e Event) {
	if t == nil {
		return
	}
	_, err := t.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		t.Queue(ctx, p, e)
		return nil
	})
	if err != nil {
		t.log.WarnContext(ctx, "audit event not written", "event", e.Event, "err", err)
	}
}

// Later appends e with the next write of waiting events (Run, within LaterInterval),
// together with the others: for events that must not cost a round trip of their own, and
// that a crash of this process in that second may lose (a sign-in).
func (t *Trail) Later(ctx context.Context, e Event) {
	if t == nil {
		return
	}
	if e.At.IsZero() {
		e.At = t.opts.Now().UTC()
	}
	t.mu.Lock()
	t.later = append(t.later, e)
	full := len(t.later) >= laterLimit
	t.mu.Unlock()
	if full {
		t.writeLater(ctx)
	}
}

// writeLater writes the waiting events in one round trip.
func (t *Trail) writeLater(ctx context.Context) {
	t.mu.Lock()
	events := t.later
	t.later = nil
	t.mu.Unlock()
	if len(events) == 0 {
		return
	}
	_, err := t.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, e := range events {
			t.Queue(ctx, p, e)
		}
		return nil
	})
	if err != nil {
		t.log.WarnContext(ctx, "audit events not written", "events", len(events), "err", err)
	}
}

// Repeated appends e, an event that others can repeat at will, as Later does, unless an
// identical one (but for its time) was appended in the current window: then it is only
// counted, and the count is appended as one event when the window ends (Run).
func (t *Trail) Repeated(ctx context.Context, e Event) {
	if t == nil {
		return
	}
	if e.At.IsZero() {
		e.At = t.opts.Now().UTC()
	}
	key := repeatKey(e)
	t.mu.Lock()
	if r, ok := t.repeats[key]; ok {
		r.again(e.At)
		t.mu.Unlock()
		return
	}
	if len(t.repeats) >= repeatKinds {
		// A flood of distinct events: count them by event alone.
		key = "event:" + e.Event
		if r, ok := t.repeats[key]; ok {
			r.again(e.At)
			t.mu.Unlock()
			return
		}
		e = Event{At: e.At, Event: e.Event, Reason: "many distinct events of this kind; counted together"}
	}
	t.repeats[key] = &repeat{event: e}
	t.mu.Unlock()
	t.Later(ctx, e)
}

// repeatKey is what makes two events identical: everything but their time.
func repeatKey(e Event) string {
	e.At, e.LastAt = time.Time{}, time.Time{}
	b, _ := json.Marshal(e)
	return string(b)
}

// Flush writes the waiting events and, for each event repeated in the window that ends
// now, one event that counts its repetitions after the first (which Repeated appended):
// Count, from At to LastAt. It begins the next window.
func (t *Trail) Flush(ctx context.Context) {
	t.mu.Lock()
	repeats := t.repeats
	t.repeats = map[string]*repeat{}
	for _, r := range repeats {
		if r.count > 0 {
			e := r.event
			e.Count, e.At, e.LastAt = r.count, r.first, r.last
			t.later = append(t.later, e)
		}
	}
	t.mu.Unlock()
	t.writeLater(ctx)
}

// Run writes the waiting events every LaterInterval and flushes the repeated ones every
// RepeatWindow until ctx ends, and flushes everything once more then.
func (t *Trail) Run(ctx context.Context) {
	tick := time.NewTicker(LaterInterval)
	defer tick.Stop()
	windowEnd := time.Now().Add(RepeatWindow)
	for {
		select {
		case <-ctx.Done():
			t.Flush(context.WithoutCancel(ctx))
			return
		case now := <-tick.C:
			if now.Before(windowEnd) {
				t.writeLater(ctx)
				continue
			}
			t.Flush(ctx)
			t.trimLength(ctx)
			windowEnd = now.Add(RepeatWindow)
		}
	}
}

// exportBatch is how many events a read of one bucket returns.
const exportBatch = 500

// Export calls fn with every event appended from since to until (inclusive; a zero since
// means from the first, a zero until to the last), in the order the trail received them
// (eventHeap), until fn returns an error. The times select by when the trail received the
// event (its position), as does the order; At is when it happened.
func (t *Trail) Export(ctx context.Context, since, until time.Time, fn func(Event) error) error {
	start, end := "-", "+"
	if !since.IsZero() {
		start = strconv.FormatInt(since.UnixMilli(), 10)
	}
	if !until.IsZero() {
		end = strconv.FormatInt(until.UnixMilli(), 10)
	}
	readers := make([]*bucketReader, Buckets)
	h := &eventHeap{}
	for b := range Buckets {
		readers[b] = &bucketReader{key: Key(b), next: start, end: end}
		if err := readers[b].fill(ctx, t.rdb); err != nil {
			return err
		}
		if e, ok := readers[b].peek(); ok {
			heap.Push(h, heapItem{e: e, r: readers[b]})
		}
	}
	for h.Len() > 0 {
		item := heap.Pop(h).(heapItem)
		if err := fn(item.e); err != nil {
			return err
		}
		item.r.pop()
		if len(item.r.buf) == 0 && !item.r.done {
			if err := item.r.fill(ctx, t.rdb); err != nil {
				return err
			}
		}
		if e, ok := item.r.peek(); ok {
			heap.Push(h, heapItem{e: e, r: item.r})
		}
	}
	return nil
}

// bucketReader reads one bucket's stream in batches.
type bucketReader struct {
	key, next, end string
	buf            []Event
	done           bool
}

func (r *bucketReader) fill(ctx context.Context, rdb redis.UniversalClient) error {
	msgs, err := rdb.XRangeN(ctx, r.key, r.next, r.end, exportBatch).Result()
	if err != nil {
		return fmt.Errorf("read audit trail: %w", err)
	}
	if len(msgs) < exportBatch {
		r.done = true
	}
	for _, m := range msgs {
		r.next = "(" + m.ID
		doc, _ := m.Values["e"].(string)
		var e Event
		if err := json.Unmarshal([]byte(doc), &e); err != nil {
			continue // not written by this package
		}
		e.ID = strings.TrimPrefix(r.key, state.KeyPrefix) + "-" + m.ID
		r.buf = append(r.buf, e)
	}
	return nil
}

func (r *bucketReader) peek() (Event, bool) {
	if len(r.buf) == 0 {
		return Event{}, false
	}
	return r.buf[0], true
}

func (r *bucketReader) pop() { r.buf = r.buf[1:] }

type heapItem struct {
	e Event
	r *bucketReader
}

// eventHeap orders the next event of each bucket by when the trail received it (the
// millisecond of its position), then by when it happened. Each bucket's events come in
// the order of their positions, so the export is in the order the trail received them:
// events written in a batch (Later, Repeated) come when the batch came, after events that
// happened after them.
type eventHeap []heapItem

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if mi, mj := ReceivedAt(h[i].e), ReceivedAt(h[j].e); mi != mj {
		return mi < mj
	}
	if !h[i].e.At.Equal(h[j].e.At) {
		return h[i].e.At.Before(h[j].e.At)
	}
	return h[i].e.ID < h[j].e.ID
}

// ReceivedAt returns when the trail received e, read from its position (ID), in Unix
// milliseconds of Redis's clock; 0 for an event not read from the trail.
func ReceivedAt(e Event) int64 {
	i := strings.LastIndexByte(e.ID, '}')
	if i < 0 {
		return 0
	}
	ms, _, _ := strings.Cut(strings.TrimPrefix(e.ID[i+1:], "-"), "-")
	n, _ := strconv.ParseInt(ms, 10, 64)
	return n
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(heapItem)) }
func (h *eventHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Read returns the events since since, as Export orders them: Export into a slice, for
// short spans.
func (t *Trail) Read(ctx context.Context, since time.Time) ([]Event, error) {
	var out []Event
	err := t.Export(ctx, since, time.Time{}, func(e Event) error {
		out = append(out, e)
		return nil
	})
	return out, err
}
