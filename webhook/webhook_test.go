package webhook

import (
	"bytes"
	"encoding/base64"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/urlflow/urlflow/delegate"
	"github.com/urlflow/urlflow/internal/redistest"
	"github.com/urlflow/urlflow/state"
	"github.com/urlflow/urlflow/state/flow"
	"github.com/urlflow/urlflow/state/webhooks"
)

var alice = state.User{Issuer: "https://id.example", Subject: "alice"}

const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// receiver is a delegating server's webhook endpoint: it verifies what it gets with the
// Go package, and answers as its mode says.
type receiver struct {
	srv      *httptest.Server
	verifier *delegate.WebhookVerifier
	failing  atomic.Bool
	mu       sync.Mutex
	got      []*delegate.Webhook
	refused  []error
	// stamps are the webhook-timestamp headers of every attempt, failed ones too.
	stamps []string
}

// newReceiver starts a receiver that knows secrets (secret if none are given).
func newReceiver(t *testing.T, secrets ...string) *receiver {
	if len(secrets) == 0 {
		secrets = []string{secret}
	}
	v, err := delegate.NewWebhookVerifier(secrets...)
	if err != nil {
		t.Fatal(err)
	}
	r := &receiver{verifier: v}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.stamps = append(r.stamps, req.Header.Get(delegate.HeaderWebhookTimestamp))
		r.mu.Unlock()
		if r.failing.Load() {
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		body, _ := io.ReadAll(req.Body)
		hook, err := r.verifier.Verify(req.Header, body)
		r.mu.Lock()
		defer r.mu.Unlock()
		if err != nil {
			r.refused = append(r.refused, err)
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		r.got = append(r.got, hook)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) received() []*delegate.Webhook {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*delegate.Webhook(nil), r.got...)
}

func key(t *testing.T) []byte {
	k, err := delegate.ParseSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// endFlow creates a flow of the service weather and cancels it: its webhook is queued.
func endFlow(t *testing.T, flows *flow.Store) *flow.Elicitation {
	t.Helper()
	e, err := flows.Create(t.Context(), flow.NewElicitation{User: alice, Kind: state.KindSecret, Target: "demo_api_key",
		Service: "weather", Purpose: "test", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	c, err := flows.Apply(t.Context(), e.ID, flow.CancelRequested, state.ActorService, "test")
	if err != nil || c.Elicitation.State != flow.Cancelled {
		t.Fatalf("cancel: %+v, %v", c, err)
	}
	return c.Elicitation
}

// storeOn returns a flow store on b whose service weather has a webhook, and the queue of
// its deliveries.
func storeOn(b *redistest.Backend) (*flow.Store, *webhooks.Queue) {
	q := webhooks.New(b.Client, func(s, _ string) bool { return s == "weather" }, nil)
	return flow.NewStore(b.Client, flow.StoreOptions{Logger: slog.New(slog.DiscardHandler), Outboxes: []flow.Outbox{q}}), q
}

// sendUntil calls SendDue until done reports true, for at most 10 seconds.
func sendUntil(t *testing.T, s *Sender, done func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !done() {
		if time.Now().After(deadline) {
			t.Fatal("not done within 10s")
		}
		if err := s.SendDue(t.Context()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestAWebhookIsDeliveredOnceTheReceiverIsBackEvenByAnotherReplica(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, b *redistest.Backend) {
		flows, queue := storeOn(b)
		r := newReceiver(t)
		r.failing.Store(true)
		var logs bytes.Buffer
		var logMu sync.Mutex
		log := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
			logMu.Lock()
			defer logMu.Unlock()
			return logs.Write(p)
		}), nil))
		targets := func(service string) (Target, bool) {
			return Target{URL: r.srv.URL + "/hooks", Keys: [][]byte{key(t)}}, service == "weather"
		}
		schedule := []time.Duration{0, 100 * time.Millisecond, 100 * time.Millisecond, time.Hour}
		first := NewSender(Options{Queue: queue, Targets: targets, Schedule: schedule, Logger: log})
		e := endFlow(t, flows)

		// The receiver is down: two attempts fail, and the delivery waits for the next.
		sendUntil(t, first, func() bool {
			d, err := queue.Delivery(t.Context(), e.ID)
			return err == nil && d.Attempts == 2
		})
		d, _ := queue.Delivery(t.Context(), e.ID)
		if d.LastStatus != http.StatusServiceUnavailable || d.NextAttemptAt == nil || d.DeliveredAt != nil || d.GivenUpAt != nil ||
			!strings.Contains(d.LastError, "503") || d.ID != webhooks.ID(e.ID) || d.Type != "elicitation.cancelled" {
			t.Fatalf("after two failures: %+v", d)
		}

		// Another replica (or this one restarted) sends it once the receiver is back.
		r.failing.Store(false)
		_, again := storeOn(b)
		second := NewSender(Options{Queue: again, Targets: targets, Schedule: schedule, Logger: log})
		sendUntil(t, second, func() bool { return len(r.received()) == 1 })
		got := r.received()[0]
		if got.ID != webhooks.ID(e.ID) || got.Type != "elicitation.cancelled" || got.Elicitation.ID != e.ID ||
			got.Elicitation.State != "cancelled" || got.Elicitation.Service != "weather" {
			t.Errorf("received %+v", got)
		}
		d, _ = queue.Delivery(t.Context(), e.ID)
		if d.Attempts != 3 || d.DeliveredAt == nil || d.NextAttemptAt != nil || d.LastStatus != http.StatusOK || d.LastError != "" {
			t.Errorf("delivered: %+v", d)
		}
		// Delivered, it is not sent again.
		for range 3 {
			if err := second.SendDue(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		if n := len(r.received()); n != 1 {
			t.Errorf("received %d times", n)
		}
		logMu.Lock()
		defer logMu.Unlock()
		if !strings.Contains(logs.String(), "webhook attempt failed") || !strings.Contains(logs.String(), "webhook delivered") {
			t.Errorf("log: %s", logs.String())
		}
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func TestAWebhookIsGivenUpAfterTheScheduleAndItsURLStaysUnsaid(t *testing.T) {
	t.Parallel()
	b := &redistest.Backend{Client: redistest.Start(t).Client(t)}
	flows, queue := storeOn(b)
	// A receiver that is gone, at a URL that holds its own secret.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := "http://" + l.Addr().String() + "/hooks/receiver-secret-path"
	l.Close()
	s := NewSender(Options{Queue: queue, Schedule: []time.Duration{0, 10 * time.Millisecond, 10 * time.Millisecond},
		Targets: func(string) (Target, bool) { return Target{URL: gone, Keys: [][]byte{key(t)}}, true }, Logger: slog.New(slog.DiscardHandler)})
	e := endFlow(t, flows)
	sendUntil(t, s, func() bool {
		d, err := queue.Delivery(t.Context(), e.ID)
		return err == nil && d.GivenUpAt != nil
	})
	d, _ := queue.Delivery(t.Context(), e.ID)
	if d.Attempts != 3 || d.NextAttemptAt != nil || d.DeliveredAt != nil || d.LastError == "" || strings.Contains(d.LastError, "receiver-secret-path") {
		t.Errorf("given up: %+v", d)
	}
	if due, _ := queue.Due(t.Context(), time.Now().Add(time.Hour), 10); len(due) != 0 {
		t.Errorf("still due: %v", due)
	}
}

func TestTheSignatureIsTheStandardWebhooksOne(t *testing.T) {
	// The example of the Standard Webhooks specification.
	k, _ := base64.StdEncoding.DecodeString("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	got := delegate.SignWebhook(k, "msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`))
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Errorf("signature %s, want %s", got, want)
	}
}

// While a service's signing secret rotates, urlflow signs with the old and the new one, so
// that a receiver that knows only either verifies every message.
func TestAWebhookSignedWithTwoSecretsVerifiesWithEither(t *testing.T) {
	const next = "whsec_bmV4dC1zZWNyZXQtb2YtdHdlbnR5LWZvdXItYnl0ZXM="
	nextKey, err := delegate.ParseSecret(next)
	if err != nil {
		t.Fatal(err)
	}
	for name, knows := range map[string]string{"the old secret": secret, "the new secret": next} {
		t.Run("a receiver that knows "+name, func(t *testing.T) {
			b := redistest.StartEmbedded(t)
			flows, queue := storeOn(b)
			r := newReceiver(t, knows)
			targets := func(string) (Target, bool) {
				return Target{URL: r.srv.URL, Keys: [][]byte{key(t), nextKey}}, true
			}
			s := NewSender(Options{Queue: queue, Targets: targets, Logger: slog.New(slog.DiscardHandler)})
			endFlow(t, flows)
			sendUntil(t, s, func() bool { return len(r.received()) == 1 })
			r.mu.Lock()
			defer r.mu.Unlock()
			if len(r.refused) != 0 {
				t.Errorf("refused: %v", r.refused)
			}
		})
	}
}
