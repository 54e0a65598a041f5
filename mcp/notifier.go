package mcp

import (
	"context"
	"log/slog"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/urlflow/urlflow/internal/expiring"
	"github.com/urlflow/urlflow/internal/tracing"
	"github.com/urlflow/urlflow/metrics"
	"github.com/urlflow/urlflow/state"
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
	// carried holds the elicitations whose notification a push-style tool call waiting for
	// them writes on its own stream (carry): the notifier leaves those alone until the call
	// lets go.
	carried map[string]struct{}
	// unrecorded holds the elicitations whose notification was written on a stream but
	// could not be recorded yet (recordWritten is at it): the client has it, so nothing
	// sends it again, whatever the record still says.
	unrecorded map[string]struct{}
	// rechecked holds, per session, when a reopened stream last made it read the session's
	// undelivered set.
	rechecked *expiring.Map[string, struct{}]
	// recordDelivery is the store's flow.Deliveries.Record; tests fail it on purpose.
	recordDelivery func(ctx context.Context, id string, via flow.Stream, attemptErr error) (*flow.Elicitation, error)
}

func newNotifier(store *flow.Store, c *counters.Counters, m *metrics.Process, sessions *sessionRegistry, bg *background, log *slog.Logger) *notifier {
	return &notifier{store: store, counters: c, metrics: m, sessions: sessions, background: bg, log: log, inflight: map[string]chan struct{}{},
		carried: map[string]struct{}{}, unrecorded: map[string]struct{}{}, rechecked: expiring.New[string, struct{}](maxRechecked),
		recordDelivery: store.Deliveries().Record}
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
	ids, err := n.store.Deliveries().Undelivered(ctx, ls.user, sessionID)
	if err != nil {
		n.log.WarnContext(ctx, "owed notifications not checked", "session", sessionID, "err", err)
		return
	}
	for _, id := range ids {
		n.deliver(ctx, id)
	}
}

// deliver starts the delivery loop of elicitation id in the background, or wakes it if it
// is waiting, unless it leaves the notification to someone else (leftAlone). ctx bounds
// only the hand-over to the background.
func (n *notifier) deliver(ctx context.Context, id string) {
	n.mu.Lock()
	if n.leftAloneLocked(id) {
		n.mu.Unlock()
		return
	}
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
// longer owed, carried by a tool call, or its session is gone.
func (n *notifier) attempt(ctx context.Context, id string) (done bool) {
	e, err := n.store.Read(ctx, id, flow.IfCopy((*flow.Elicitation).NotificationDeliverable))
	if err != nil {
		n.log.WarnContext(ctx, "notification not attempted", "elicitation_id", id, "err", err)
		return false
	}
	ls, ok := n.sessions.get(e.SessionID)
	if !ok || !e.State.Terminal() || n.leftAlone(id) {
		return true
	}
	if ls.user != e.User {
		n.log.WarnContext(ctx, "session user differs from elicitation user; notification withheld",
			"elicitation_id", id, "session", e.SessionID)
		return true
	}
	if !e.NotificationDeliverable() { // one found ended elsewhere is written when its session lives here
		return true
	}
	if !sessionURLMode(ls.ss) {
		// The notification belongs to URL-mode elicitation, which this client did not declare.
		if _, err := n.store.Deliveries().Skip(ctx, id, "the client declared no URL-mode elicitation"); err != nil {
			n.log.WarnContext(ctx, "skipped delivery not recorded", "elicitation_id", id, "err", err)
			return false
		}
		return true
	}
	sendCtx, cancel := context.WithTimeout(tracing.InFlow(ctx, e.Trace), deliveryTimeout)
	sendErr := ls.ss.NotifyElicitationComplete(sendCtx, &sdk.ElicitationCompleteParams{ElicitationID: id})
	cancel()
	n.record(ctx, e, flow.SessionStream, sendErr)
	return sendErr == nil
}

// record records an attempt to write the notification of e on stream via, which failed
// with sendErr (nil: written), and counts, measures and logs it. It reports whether the
// notification was written. A write that cannot be recorded (Redis is away) is recorded
// later, in the background, until it is: the client has it, and neither a second copy nor
// a flow that reads as owed for ever must follow.
func (n *notifier) record(ctx context.Context, e *flow.Elicitation, via flow.Stream, sendErr error) bool {
	_, err := n.recordDelivery(ctx, e.ID, via, sendErr)
	if err != nil && sendErr == nil {
		n.log.WarnContext(ctx, "written notification not recorded yet; recording it when Redis answers", "elicitation_id", e.ID, "err", err)
		n.mu.Lock()
		n.unrecorded[e.ID] = struct{}{}
		n.mu.Unlock()
		n.background.spawn(ctx, func(ctx context.Context) { n.recordWritten(ctx, e.ID, via) })
	} else if err != nil {
		n.log.WarnContext(ctx, "delivery not recorded", "elicitation_id", e.ID, "err", err)
	}
	n.metrics.Delivered(sendErr == nil, n.store.Now().Sub(*e.Delivery.QueuedAt))
	if sendErr != nil {
		n.counters.Add(ctx, "urlflow_notification_attempts_total", "result", "not_written")
		n.log.InfoContext(ctx, "completion notification not written; will retry", "elicitation_id", e.ID,
			"session", e.SessionID, "stream", string(via), "attempt", e.Delivery.Attempts+1, "err", sendErr)
		return false
	}
	n.counters.Add(ctx, "urlflow_notification_attempts_total", "result", "written")
	n.log.InfoContext(ctx, "completion notification written", "elicitation_id", e.ID, "session", e.SessionID,
		"stream", string(via), "state", e.State)
	return true
}

// recordWritten records that the notification of elicitation id was written on stream
// via, trying again with backoff until it is recorded or ctx ends.
func (n *notifier) recordWritten(ctx context.Context, id string, via flow.Stream) {
	defer func() {
		n.mu.Lock()
		delete(n.unrecorded, id)
		n.mu.Unlock()
	}()
	backoff := deliveryMinBackoff
	for {
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		_, err := n.recordDelivery(ctx, id, via, nil)
		if err == nil {
			n.log.InfoContext(ctx, "written notification recorded", "elicitation_id", id)
			return
		}
		backoff = min(backoff*2, deliveryMaxBackoff)
	}
}

// leftAlone reports whether the notifier leaves the notification of elicitation id to
// someone else: a tool call carries it (carried), or it was written and waits to be
// recorded (unrecorded).
func (n *notifier) leftAlone(id string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.leftAloneLocked(id)
}

// leftAloneLocked is leftAlone for a caller that holds n.mu.
func (n *notifier) leftAloneLocked(id string) bool {
	_, carried := n.carried[id]
	_, unrecorded := n.unrecorded[id]
	return carried || unrecorded
}

// A carriedNotice is a push-style tool call's hold on the completion notification of the
// flow it waits for: the call writes it on its own response stream, just before its result
// (one stream keeps the order, so the client sees the notification first), and that write
// is the delivery. Only when the call could not write it, or ends before the flow, does
// the notifier take over (on the session's stream), so that a client receives one copy,
// and none is lost.
type carriedNotice struct {
	n       *notifier
	id      string
	written bool
}

// carry holds the notification of elicitation id for the calling tool call until release.
// Two calls of one session never wait for the same flow at once, but if they do, the
// second holds it as well and the first release hands it back.
func (n *notifier) carry(id string) *carriedNotice {
	n.mu.Lock()
	n.carried[id] = struct{}{}
	n.mu.Unlock()
	return &carriedNotice{n: n, id: id}
}

// write writes the notification of the ended flow e on the stream of the tool call whose
// session is ss and whose context is ctx, when it is owed, and records that delivery.
func (c *carriedNotice) write(ctx context.Context, ss *sdk.ServerSession, e *flow.Elicitation) {
	if !e.NotificationOwed() || c.written {
		return
	}
	err := ss.NotifyElicitationComplete(ctx, &sdk.ElicitationCompleteParams{ElicitationID: e.ID})
	c.written = c.n.record(ctx, e, flow.CallStream, err)
}

// release lets go of the notification when the tool call ends. Unless the call wrote it,
// the notifier delivers it if it is owed (the flow may also have ended while the call was
// on its way out, unseen by it).
func (c *carriedNotice) release(ctx context.Context) {
	c.n.mu.Lock()
	delete(c.n.carried, c.id)
	c.n.mu.Unlock()
	if c.written {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deliveryTimeout)
	defer cancel()
	c.n.deliver(ctx, c.id)
}

// sessionEnded records, of every notification owed to session id of user, which has just
// ended here as why says, that it will not be written (flow.Deliveries.SessionEnded): the
// flows leave the owed ones, and their histories say why.
func (n *notifier) sessionEnded(ctx context.Context, user state.User, id, why string) {
	ids, err := n.store.Deliveries().Undelivered(ctx, user, id)
	if err != nil {
		n.log.WarnContext(ctx, "notifications owed to an ended session not settled; the sweep will", "session", id, "err", err)
		return
	}
	for _, eid := range ids {
		n.settle(ctx, eid, id, why, true)
	}
}

// settleBatch bounds how many owed notifications of each bucket of the owed index one
// sweep looks at.
const settleBatch = 200

// settleEnded records as not written the owed notifications whose session has ended where
// this replica cannot see it: the replica that held it stopped beating (it died or lost
// Redis), or its registration is gone (the flow ended after the session). Every replica
// sweeps; of two that settle one flow, the second finds it settled and changes nothing.
func (n *notifier) settleEnded(ctx context.Context) {
	// A notification owed for less than a fifth of the heartbeat is left to the holder's
	// notifier (the sweep runs every third of it).
	grace := n.sessions.heartbeat / 5
	owed, err := n.store.Deliveries().OwedBefore(ctx, n.store.Now().Add(-grace), settleBatch)
	if err != nil {
		n.log.WarnContext(ctx, "owed notifications not checked for ended sessions", "err", err)
		return
	}
	var sessions []string
	for _, e := range owed {
		if _, here := n.sessions.get(e.SessionID); !here {
			sessions = append(sessions, e.SessionID)
		}
	}
	if len(sessions) == 0 {
		return
	}
	ended, err := n.sessions.store.Ended(ctx, sessions...)
	if err != nil {
		n.log.WarnContext(ctx, "owed notifications not checked for ended sessions", "err", err)
		return
	}
	for _, e := range owed {
		if why, ok := ended[e.SessionID]; ok {
			n.settle(ctx, e.ID, e.SessionID, why, false)
		}
	}
}

// settle records that the notification of elicitation id will not be written to session
// sessionID, which ended as why says; held says whether the session ended here.
func (n *notifier) settle(ctx context.Context, id, sessionID, why string, held bool) {
	settled, err := n.store.Deliveries().SessionEnded(ctx, id, sessionID, why, held)
	if err != nil {
		n.log.WarnContext(ctx, "notification owed to an ended session not settled", "elicitation_id", id, "session", sessionID, "err", err)
		return
	}
	if !settled {
		return // settled or written meanwhile
	}
	n.counters.Add(ctx, "urlflow_notifications_session_ended_total")
	n.log.InfoContext(ctx, "completion notification not written: its session ended first", "elicitation_id", id,
		"session", sessionID, "why", why)
}
