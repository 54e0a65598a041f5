package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/urlflow/urlflow/delegate"
	"github.com/urlflow/urlflow/internal/redistest"
	"github.com/urlflow/urlflow/services"
)

// webhookReceiver is a delegating server's webhook endpoint, checked with package
// delegate: it answers 503 while down.
type webhookReceiver struct {
	srv      *httptest.Server
	down     atomic.Bool
	attempts atomic.Int32
	mu       sync.Mutex
	got      []*delegate.Webhook
	bodies   []string
}

func newWebhookReceiver(t *testing.T, secret string) *webhookReceiver {
	v, err := delegate.NewWebhookVerifier(secret)
	if err != nil {
		t.Fatal(err)
	}
	r := &webhookReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.attempts.Add(1)
		if r.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		body, _ := io.ReadAll(req.Body)
		hook, err := v.Verify(req.Header, body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.got, r.bodies = append(r.got, hook), append(r.bodies, string(body))
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *webhookReceiver) received() ([]*delegate.Webhook, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*delegate.Webhook(nil), r.got...), strings.Join(r.bodies, "\n")
}

// hookedService writes, in dir, the configuration of a service name (resource) that may ask
// for the demo API key, with its key file and a webhook of elicitation events to url signed
// with secret, and returns the configuration's path and the service's key.
func hookedService(t *testing.T, dir, name, resource, url, secret string) (config, key string) {
	t.Helper()
	key, digest := services.NewKey()
	write := func(file, content string) string {
		path := filepath.Join(dir, file)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	config = write("urlflow.yaml", fmt.Sprintf(`secrets:
  - name: demo_api_key
    label: Demo API key
    api:
      base_url: "{public_url}/demo/api"
      methods: [GET]
      inject: {header: Authorization, template: "Bearer {secret}"}
services:
  - name: %[1]s
    label: %[1]s MCP
    resource: %[2]s
    slots: [demo_api_key]
    keys_file: %[3]s
    webhook:
      url: %[4]s
      secret_file: %[5]s
      events: ["elicitation.*"]
`, name, resource, write(name+".keys", digest+"\n"), url, write(name+".whsec", secret+"\n")))
	return config, key
}

// TestAWebhookReachesAReceiverThatWasDownAcrossARestart: a service's flow completes while
// its webhook receiver is down; urlflow tries, stops, starts again, and delivers the
// message once the receiver is back, signed so that package delegate accepts it, and
// without the secret.
func TestAWebhookReachesAReceiverThatWasDownAcrossARestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	secret := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	recv := newWebhookReceiver(t, secret)
	recv.down.Store(true)
	resource := "http://127.0.0.1:1/hooks-mcp"
	config, key := hookedService(t, dir, "hooks", resource, recv.srv.URL+"/urlflow-webhook", secret)
	rs := redistest.Start(t)
	cfg := serverConfig{Redis: rs, ConfigHome: filepath.Join(dir, "home"), ConfigFile: config,
		Env: []string{"URLFLOW_TEST_WEBHOOK_RETRY=300ms"}}
	s := startServer(t, cfg)

	var tok struct {
		Token string `json:"token"`
	}
	if status := s.getJSON("/dev/token?user=dev&resource="+resource, "", &tok); status != http.StatusOK {
		t.Fatalf("dev token: %d", status)
	}
	header := http.Header{"Authorization": {"Bearer " + key}, "Urlflow-User-Token": {tok.Token}}
	got := s.apiRequest(http.MethodPost, "/api/v1/elicitations", header, `{"slot": "demo_api_key"}`)
	created := got.created(t)
	if got.status != http.StatusCreated {
		t.Fatalf("create: %d %s", got.status, got.body)
	}
	newPerson(t, sharedBrowser(t), "dev").completeSecret(t, created.Elicitation.URL, canary)

	webhookOf := func(s *server) (d struct {
		Attempts    int        `json:"attempts"`
		LastStatus  int        `json:"lastStatus"`
		DeliveredAt *time.Time `json:"deliveredAt"`
		Type        string     `json:"type"`
	}) {
		a := s.apiRequest(http.MethodGet, "/api/v1/elicitations/"+created.Elicitation.ID+"/webhook", http.Header{"Authorization": {"Bearer " + key}}, "")
		if a.status == http.StatusOK {
			json.Unmarshal(a.body, &d)
		}
		return d
	}
	eventually(t, 30*time.Second, "two failed webhook attempts", func() bool { return webhookOf(s).Attempts >= 2 })
	if d := webhookOf(s); d.LastStatus != http.StatusServiceUnavailable || d.DeliveredAt != nil || d.Type != "elicitation.complete" {
		t.Fatalf("while the receiver is down: %+v", d)
	}

	s.stop()
	recv.down.Store(false)
	again := startServer(t, cfg) // the queue is in Redis: the new process goes on with it
	eventually(t, 30*time.Second, "the webhook delivered", func() bool { return webhookOf(again).DeliveredAt != nil })
	hooks, bodies := recv.received()
	if len(hooks) != 1 || hooks[0].Type != "elicitation.complete" || hooks[0].Elicitation.ID != created.Elicitation.ID ||
		hooks[0].ID != "msg_"+created.Elicitation.ID {
		t.Fatalf("received %+v", hooks)
	}
	requireNoCanary(t, rs, map[string]string{"webhook bodies": bodies, "urlflow output": s.Output() + again.Output()})
}
