// Package webhook delivers the webhooks of delegating services. The step that ends a
// service's flow, and each change of a credential it holds, queues a delivery in Redis
// (package webhooks); every replica runs a Sender,
// which takes the deliveries that are due, signs each the Standard Webhooks way
// (delegate.SignWebhook) and posts it, and records every attempt. A failed attempt is
// tried again on that convention's schedule, across restarts and on any replica, and
// after the last one the delivery is given up, logged and counted by service
// (urlflow_webhook_given_up_total). Each record is readable through the API (GET
// /api/v1/elicitations/{id}/webhook), the given-up ones are listed (GET
// /api/v1/webhooks/given-up), and a delivery that is over may be queued again (POST
// /api/v1/elicitations/{id}/webhook/redeliver): the same message on a fresh schedule.
package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/urlflow/urlflow/internal/buildinfo"

	"github.com/urlflow/urlflow/delegate"
	"github.com/urlflow/urlflow/internal/every"
	"github.com/urlflow/urlflow/internal/tracing"
	"github.com/urlflow/urlflow/state/counters"
	"github.com/urlflow/urlflow/state/webhooks"
)

// DefaultSchedule is the wait before each attempt: immediately, then 5 seconds, 5 minutes,
// 30 minutes, 2 hours, 5 hours, 10 hours and 10 hours after the attempt before.
var DefaultSchedule = []time.Duration{0, 5 * time.Second, 5 * time.Minute, 30 * time.Minute,
	2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour}

// Target is where a service's webhooks go and the keys that sign them (each signs every
// message, while a secret rotates).
type Target struct {
	URL  string
	Keys [][]byte
}

// Options configure a Sender. Queue and Targets are required.
type Options struct {
	// Queue holds the deliveries.
	Queue *webhooks.Queue
	// Now returns the current time; time.Now if nil.
	Now func() time.Time
	// Targets returns the webhook of a service; a service without one has its deliveries
	// given up.
	Targets func(service string) (Target, bool)
	// Client posts the webhooks (a 10-second timeout, no redirects followed, when nil).
	Client *http.Client
	// Schedule replaces DefaultSchedule (tests shorten it).
	Schedule []time.Duration
	// Poll is how often the queue is read (a second when zero).
	Poll time.Duration
	// Lease is how long an attempt holds its delivery: a replica that dies in an attempt
	// leaves it to be tried again after that (30 seconds when zero).
	Lease    time.Duration
	Counters *counters.Counters
	Logger   *slog.Logger
}

// maxParallel bounds the attempts one replica makes at once.
const maxParallel = 8

// Sender sends the webhooks that are due.
type Sender struct {
	opts Options
	log  *slog.Logger
}

// NewSender returns a Sender; Run sends.
func NewSender(opts Options) *Sender {
	if opts.Client == nil {
		opts.Client = &http.Client{
			Timeout:       10 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	if tracing.Enabled() { // each attempt gets a span, and the receiver the trace context
		traced := *opts.Client
		traced.Transport = tracing.Transport(traced.Transport, true)
		opts.Client = &traced
	}
	if len(opts.Schedule) == 0 {
		opts.Schedule = DefaultSchedule
	}
	if opts.Poll <= 0 {
		opts.Poll = time.Second
	}
	if opts.Lease <= 0 {
		opts.Lease = 30 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Sender{opts: opts, log: log}
}

// Run sends due webhooks until ctx ends.
func (s *Sender) Run(ctx context.Context) {
	every.Run(ctx, s.opts.Poll, func(ctx context.Context) {
		if err := s.SendDue(ctx); err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "webhooks not sent", "err", err)
		}
	})
}

// SendDue makes one attempt of each delivery that is due now, at most maxParallel at once,
// and returns when they are recorded.
func (s *Sender) SendDue(ctx context.Context) error {
	due, err := s.opts.Queue.Due(ctx, s.opts.Now(), 4*maxParallel)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	slots := make(chan struct{}, maxParallel)
	for _, id := range due {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			if err := s.attempt(ctx, id); err != nil && ctx.Err() == nil {
				s.log.WarnContext(ctx, "webhook attempt not recorded", "delivery", id, "err", err)
			}
		})
	}
	wg.Wait()
	return nil
}

// attempt sends the delivery id (an elicitation ID or a credential change's event ID) once, if this replica takes it.
func (s *Sender) attempt(ctx context.Context, id string) error {
	now := s.opts.Now()
	d, body, ok, err := s.opts.Queue.Claim(ctx, id, now, s.opts.Lease)
	if err != nil || !ok {
		return err
	}
	status, sendErr := 0, error(nil)
	target, configured := s.opts.Targets(d.Service)
	if configured {
		status, sendErr = s.post(tracing.InFlow(ctx, d.Trace()), target, d.ID, body)
	} else {
		sendErr = fmt.Errorf("the service %s has no webhook configured", d.Service)
	}
	if ctx.Err() != nil {
		return nil // shutting down: the lease ends and another attempt is made
	}
	var next time.Time
	if round := d.Round() + 1; sendErr != nil && configured && round < len(s.opts.Schedule) {
		next = s.opts.Now().Add(s.opts.Schedule[round])
	}
	at := s.opts.Now()
	if err := s.opts.Queue.Record(ctx, d, body, at, status, sendErr, next); err != nil {
		return err
	}
	switch {
	case sendErr == nil:
		s.count(ctx, "delivered")
		s.log.InfoContext(ctx, "webhook delivered", "service", d.Service, "webhook_id", d.ID, "attempts", d.Attempts)
	case next.IsZero():
		s.count(ctx, "given_up")
		s.opts.Counters.Add(ctx, "urlflow_webhook_given_up_total", "service", d.Service)
		s.log.ErrorContext(ctx, "webhook given up", "service", d.Service, "webhook_id", d.ID, "attempts", d.Attempts, "err", sendErr)
	default:
		s.count(ctx, "failed")
		s.log.WarnContext(ctx, "webhook attempt failed", "service", d.Service, "webhook_id", d.ID, "attempts", d.Attempts,
			"next_attempt_at", next, "err", sendErr)
	}
	return nil
}

func (s *Sender) count(ctx context.Context, result string) {
	if s.opts.Counters != nil {
		s.opts.Counters.Add(ctx, "urlflow_webhook_attempts_total", "result", result)
	}
}

// errStatus is an answer other than 2xx.
var errStatus = errors.New("the receiver answered")

// post sends one attempt of message id to target, signed now, and returns the receiver's
// status; an error unless it is 2xx.
func (s *Sender) post(ctx context.Context, target Target, id string, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target.URL, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	now := time.Now()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", buildinfo.UserAgent()+" (webhook)")
	req.Header.Set(delegate.HeaderWebhookID, id)
	req.Header.Set(delegate.HeaderWebhookTimestamp, fmt.Sprint(now.Unix()))
	req.Header.Set(delegate.HeaderWebhookSignature, delegate.SignWebhookWith(target.Keys, id, now, body))
	resp, err := s.opts.Client.Do(req)
	if ue := (*url.Error)(nil); errors.As(err, &ue) {
		err = ue.Err // a webhook URL may hold a secret of its receiver: never in a log or a record
	}
	if err != nil {
		return 0, fmt.Errorf("post: %w", err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // so that the connection is reused
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, fmt.Errorf("%w %s", errStatus, resp.Status)
	}
	return resp.StatusCode, nil
}
