package flow

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Hub receives the change notices published on EventsChannel and wakes whoever waits in
// this process: tool calls waiting for a flow to end, and the completion notifier. A notice
// is only a wake-up; every receiver re-reads the elicitation. When the subscription is
// (re)established, possibly after missing notices, every waiter is woken and every
// OnConnect function runs, so nothing waits on a notice that was lost.
type Hub struct {
	rdb redis.UniversalClient
	log *slog.Logger

	mu            sync.Mutex
	waiters       map[string]map[chan Notice]struct{}
	listeners     []func(context.Context, Notice)
	onConnect     []func(context.Context)
	connected     chan struct{} // closed at the first subscription
	connectedOnce sync.Once
}

// NewHub returns a Hub on rdb. Call Run to start it.
func NewHub(rdb redis.UniversalClient, log *slog.Logger) *Hub {
	if log == nil {
		log = slog.Default()
	}
	return &Hub{rdb: rdb, log: log, waiters: map[string]map[chan Notice]struct{}{}, connected: make(chan struct{})}
}

// OnNotice registers fn to run (in the hub's goroutine) for every notice. Register before Run.
func (h *Hub) OnNotice(fn func(context.Context, Notice)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.listeners = append(h.listeners, fn)
}

// OnConnect registers fn to run each time the subscription is established. Register before Run.
func (h *Hub) OnConnect(fn func(context.Context)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.onConnect = append(h.onConnect, fn)
}

// Connected is closed once the hub has subscribed for the first time.
func (h *Hub) Connected() <-chan struct{} { return h.connected }

// Wait returns a channel that receives a value whenever elicitation id may have changed,
// and a function to stop waiting. Register before reading the record, then wait.
func (h *Hub) Wait(id string) (<-chan Notice, func()) {
	ch := make(chan Notice, 1)
	h.mu.Lock()
	if h.waiters[id] == nil {
		h.waiters[id] = map[chan Notice]struct{}{}
	}
	h.waiters[id][ch] = struct{}{}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.waiters[id], ch)
		if len(h.waiters[id]) == 0 {
			delete(h.waiters, id)
		}
	}
}

// wake hands n to a waiter. A waiter holds one notice: when it has not taken the last one
// yet, the two are folded into the one that says more, so that a waiter that reads the
// record only when a notice says the flow may have ended (Notice.MayHaveEnded) never loses
// such a notice behind one that does not. Senders hold the hub's lock.
func wake(ch chan Notice, n Notice) {
	for {
		select {
		case ch <- n:
			return
		default:
		}
		select {
		case pending := <-ch:
			if pending.MayHaveEnded() && !n.MayHaveEnded() {
				n = pending
			}
		default: // taken meanwhile: there is room now
		}
	}
}

func (h *Hub) dispatch(ctx context.Context, n Notice) {
	h.mu.Lock()
	for ch := range h.waiters[n.ID] {
		wake(ch, n)
	}
	listeners := h.listeners
	h.mu.Unlock()
	for _, fn := range listeners {
		fn(ctx, n)
	}
}

func (h *Hub) reconnected(ctx context.Context) {
	h.mu.Lock()
	for id, chans := range h.waiters {
		for ch := range chans {
			wake(ch, Notice{ID: id})
		}
	}
	onConnect := h.onConnect
	h.mu.Unlock()
	for _, fn := range onConnect {
		fn(ctx)
	}
}

// Run subscribes to EventsChannel and dispatches notices until ctx ends, subscribing again
// with backoff whenever the connection is lost.
func (h *Hub) Run(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := h.subscribeOnce(ctx, func() {
			backoff = 100 * time.Millisecond
			h.connectedOnce.Do(func() { close(h.connected) })
		})
		if ctx.Err() != nil {
			return
		}
		h.log.WarnContext(ctx, "event subscription lost; subscribing again", "err", err, "after", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func (h *Hub) subscribeOnce(ctx context.Context, subscribed func()) error {
	ps := h.rdb.Subscribe(ctx, EventsChannel)
	defer ps.Close()
	// Receive does not return when ctx ends (go-redis only applies its deadline), so
	// closing the subscription is what ends a Run whose ctx is done. Once that close has
	// started, it is waited for: Run must not return with it still running.
	closed := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(closed)
		ps.Close()
	})
	defer func() {
		if !stop() {
			<-closed
		}
	}()
	for {
		msg, err := ps.Receive(ctx)
		if err != nil {
			return err
		}
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				subscribed()
				h.log.InfoContext(ctx, "subscribed to elicitation events")
				h.reconnected(ctx)
			}
		case *redis.Message:
			var n Notice
			if err := json.Unmarshal([]byte(m.Payload), &n); err != nil {
				h.log.WarnContext(ctx, "malformed event ignored", "err", err)
				continue
			}
			h.dispatch(ctx, n)
		}
	}
}

// AwaitEnd waits until e has ended or until, whichever comes first, and returns e as it
// then stands; each tick of tick (nil for none) calls onTick on the way. wake must come
// from Hub.Wait, subscribed before e was read or written. The record is read only when a
// notice says the flow may have ended (or says nothing: the subscription came back), from
// this replica's copy when that copy says so (Store.Ended), and once more at until, so
// that a flow past its deadline reads as expired. A notice of a step that did not end the
// flow costs nothing.
func (s *Store) AwaitEnd(ctx context.Context, e *Elicitation, wake <-chan Notice, until time.Time, tick <-chan time.Time, onTick func()) (*Elicitation, error) {
	timer := time.NewTimer(time.Until(until))
	defer timer.Stop()
	for !e.State.Terminal() {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timer.C:
			return s.Read(ctx, e.ID)
		case <-tick:
			onTick()
			continue
		case n := <-wake:
			if !n.MayHaveEnded() {
				continue
			}
		}
		var err error
		if e, err = s.Read(ctx, e.ID, IfCopy((*Elicitation).Ended)); err != nil {
			return nil, err
		}
	}
	return e, nil
}
