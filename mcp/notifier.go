package mcp

import (
	"context"
	"log/slog"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/urlflow/urlflow/internal/expiring"
	"github.com/urlflow/urlflow/metrics"
	"github.com/urlflow/urlflow/state/counters"
	"github.com/urlflow/urlflow/state/flow"
)

// Delivery timing.
const (
	deliveryTimeout    = 5 * time.Second
	deliveryMinBackoff = 250 * time.Millisecond
	deliveryMaxBackoff = 30 * time.Second
	// streamSettle is how long after a GET arrives the notifier retries, so that the SDK
	// has registered the new stream by then.
	streamSettle = 200 * time.Millisecond
	// recheckEvery bounds how often a session's reopened stream makes the notifier read the
	// session's undelivered set; in between, a reopened stream wakes the deliveries in
	// progress here, which retry on their own. Some clients reopen their stream often.
	recheckEvery = time.Minute
)

// notifier writes notifications/elicitation/complete to the originating session when a
// flow has ended. It works from the record, not from the event: an elicitation is owed a
// notification while it is in its session's undelivered set, and the notifier retries with
// backoff while the session lives here, re-checking whenever the event subscription
// (re)connects or the session's stream reopens (at most once a minute per session; a
// stream reopened sooner wakes the deliveries waiting to try again). Before writing it
// checks that the session's user is the elicitation's user; it never writes to any other
// session.
type notifier struct {
	store      *flow.Store
	counters   *counters.Counters
	metrics    *metrics.Process
	sessions   *sessionRegistry
	background *background
	log        *slog.Logger

	mu       sync.Mutex
	inflight map[string]chan struct{} // elicitation ID → wakes its delivery loop
	// rechecked holds, per session, when a reopened stream last made it read the session's
	// undelivered set.
	rechecked *expiring.Map[string, struct{}]
}

func newNotifier(store *flow.Store, c *counters.Counters, m *metrics.Process, sessions *sessionRegistry, bg *background, log *slog.Logger) *notifier {
	return &notifier{store: store, counters: c, metrics: m, sessions: sessions, background: bg, log: log, inflight: map[string]chan struct{}{},
		rechecked: expiring.New[string, struct{}](maxRechecked)}
}

// maxRechecked bounds notifier.rechecked (a session past it is rechecked again sooner).
const maxRechecked = 10_000

// onNotice reacts to a state change or requeue of a flow whose session is held here.
func (n *notifier) onNotice(ctx context.Context, notice flow.Notice) {
	if notice.SessionID == "" || !notice.State.Terminal() || notice.What == flow.NoticeDelivery {
		return
	}
	if _, ok := n.sessions.get(notice.SessionID); ok {
		n.deliver(ctx, notice.ID)
	}
}

// recheckAll looks for owed notifications of every session held here: after the event
// subscription (re)connects, notices may have been missed.
func (n *notifier) recheckAll(ctx context.Context) {
	for id, ls := range n.sessions.snapshot() {
		n.recheck(ctx, id, ls)
	}
}

// streamOpened is called when the client of session id (re)opens its stream; ctx is the
// stream's request.
func (n *notifier) streamOpened(ctx context.Context, id string) {
	ls, ok := n.sessions.get(id)
	if !ok {
		return
	}
	n.background.spawn(ctx, func(ctx context.Context) {
		settle := time.NewTimer(streamSettle)
		defer settle.Stop()
		select {
		case <-ctx.Done():
		case <-settle.C:
			if n.recheckDue(id) {
				n.recheck(ctx, id, ls)
			} else {
				n.wakeAll()
			}
		}
	})
}

// recheckDue reports whether session id's reopened stream should make the notifier read
// its undelivered set: at most once per recheckEvery.
func (n *notifier) recheckDue(id string) bool {
	now := time.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, recent := n.rechecked.Get(id, now); recent {
		return false
	}
	n.rechecked.Set(id, struct{}{}, now.Add(recheckEvery), now)
	return true
}

// wakeAll wakes every delivery loop waiting to try again: a stream has reopened.
func (n *notifier) wakeAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, wake := range n.inflight {
		nudge(wake)
	}
}

// nudge wakes the delivery loop waiting on wake, unless it has a wake-up pending already.
func nudge(wake chan struct{}) {
	select {
	case wake <- struct{}{}:
	default:
	}
}

func (n *notifier) recheck(ctx context.Context, sessionID string, ls *liveSession) {
	ids, err := n.store.Undelivered(ctx, ls.user, sessionID)
	if err != nil {
		n.log.WarnContext(ctx, "owed notifications not checked", "session", sessionID, "err", err)
		return
	}
	for _, id := range ids {
		n.deliver(ctx, id)
	}
}

// deliver starts the delivery loop of elicitation id in the background, or wakes it if it
// is waiting. ctx bounds only the hand-over to the background.
func (n *notifier) deliver(ctx context.Context, id string) {
	n.mu.Lock()
	if wake, ok := n.inflight[id]; ok {
		n.mu.Unlock()
		nudge(wake)
		return
	}
	wake := make(chan struct{}, 1)
	n.inflight[id] = wake
	n.mu.Unlock()
	if !n.background.spawn(ctx, func(ctx context.Context) { n.deliveryLoop(ctx, id, wake) }) {
		n.mu.Lock()
		delete(n.inflight, id)
		n.mu.Unlock()
	}
}

func (n *notifier) deliveryLoop(ctx context.Context, id string, wake chan struct{}) {
	defer func() {
		n.mu.Lock()
		delete(n.inflight, id)
		n.mu.Unlock()
	}()
	backoff := deliveryMinBackoff
	for ctx.Err() == nil {
		if done := n.attempt(ctx, id); done {
			return
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
		case <-wake:
		case <-t.C:
		}
		t.Stop()
		backoff = min(backoff*2, deliveryMaxBackoff)
	}
}

// attempt makes one delivery attempt and reports whether the loop is done: written, no
// longer owed, or its session is gone.
func (n *notifier) attempt(ctx context.Context, id string) (done bool) {
	e, err := n.store.ForDelivery(ctx, id)
	if err != nil {
		n.log.WarnContext(ctx, "notification not attempted", "elicitation_id", id, "err", err)
		return false
	}
	ls, ok := n.sessions.get(e.SessionID)
	if !ok || !e.State.Terminal() {
		return true
	}
	if ls.user != e.User {
		n.log.WarnContext(ctx, "session user differs from elicitation user; notification withheld",
			"elicitation_id", id, "session", e.SessionID)
		return true
	}
	if !e.NotificationOwed() {
		return true
	}
	if !sessionURLMode(ls.ss) {
		// The notification belongs to URL-mode elicitation, which this client did not declare.
		if _, err := n.store.SkipDelivery(ctx, id, "the client declared no URL-mode elicitation"); err != nil {
			n.log.WarnContext(ctx, "skipped delivery not recorded", "elicitation_id", id, "err", err)
			return false
		}
		return true
	}
	sendCtx, cancel := context.WithTimeout(ctx, deliveryTimeout)
	sendErr := ls.ss.NotifyElicitationComplete(sendCtx, &sdk.ElicitationCompleteParams{ElicitationID: id})
	cancel()
	if _, err := n.store.RecordDelivery(ctx, id, sendErr); err != nil {
		n.log.WarnContext(ctx, "delivery not recorded", "elicitation_id", id, "err", err)
	}
	n.metrics.Delivered(sendErr == nil, n.store.Now().Sub(*e.Delivery.QueuedAt))
	if sendErr != nil {
		n.counters.Add(ctx, "urlflow_notification_attempts_total", "result", "not_written")
		n.log.InfoContext(ctx, "completion notification not written; will retry", "elicitation_id", id,
			"session", e.SessionID, "attempt", e.Delivery.Attempts+1, "err", sendErr)
		return false
	}
	n.counters.Add(ctx, "urlflow_notification_attempts_total", "result", "written")
	n.log.InfoContext(ctx, "completion notification written", "elicitation_id", id, "session", e.SessionID, "state", e.State)
	return true
}
