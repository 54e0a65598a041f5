package delegate_test

// The tests of this package run package delegate against the real thing: urlflow dev,
// built once from ./cmd/urlflow, with a redis-server of its own for each test that starts
// one (internal/redistest), a configuration that declares the delegating service
// "weather", and the user's browser played by net/http (browser_test.go). Only failures
// that urlflow cannot be made to produce (a 5xx, a malformed body, a forged webhook) are
// played by httptest stand-ins, and each says so.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/urlflow/urlflow/internal/redistest"
	"github.com/urlflow/urlflow/internal/testhttp"
	"github.com/urlflow/urlflow/services"
)

// testTransport carries every request of these tests, and testClient sends through it:
// not net/http's defaults (package testhttp says why).
var (
	testTransport = testhttp.Transport()
	testClient    = &http.Client{Transport: testTransport}
)

func TestMain(m *testing.M) {
	// Most tests wait on processes (urlflow, Redis) and on people, not on the CPU.
	redistest.SetParallel(6)
	code := m.Run()
	if build.dir != "" {
		os.RemoveAll(build.dir)
	}
	os.Exit(code)
}

// build is the urlflow binary, built by the first test that needs it: the package's unit
// tests run without it.
var build struct {
	once      sync.Once
	dir, path string
	err       error
}

func urlflowBinary(t testing.TB) string {
	t.Helper()
	build.once.Do(func() {
		if build.dir, build.err = os.MkdirTemp("", "urlflow-delegate-"); build.err != nil {
			return
		}
		build.path = filepath.Join(build.dir, "urlflow")
		if out, err := exec.Command("go", "build", "-o", build.path, "../cmd/urlflow").CombinedOutput(); err != nil {
			build.err = fmt.Errorf("go build ../cmd/urlflow: %v\n%s", err, out)
		}
	})
	if build.err != nil {
		t.Fatal(build.err)
	}
	return build.path
}

// The delegating service of every test's configuration.
const (
	service  = "weather"
	resource = "https://weather.example/mcp"
	// webhookSecret is the secret of weather's webhook.
	webhookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
)

// urlflow is one running `urlflow dev` with the service weather, which may ask for the
// slots demo_api_key and spare_key (both keys of urlflow dev's demo API).
type urlflow struct {
	t testing.TB
	// URL is where it listens, and its public URL.
	URL string
	// Key is weather's service key.
	Key string
	// Redis is its redis-server.
	Redis *redistest.Server
	// Hooks receives weather's webhooks.
	Hooks  *hookReceiver
	output syncBuffer
}

// startUrlflow starts urlflow dev on a free port with a redis-server of its own, and
// stops both when the test ends.
func startUrlflow(t testing.TB) *urlflow {
	t.Helper()
	dir := t.TempDir()
	key, digest := services.NewKey()
	u := &urlflow{t: t, Key: key, Redis: redistest.Start(t), Hooks: newHookReceiver(t)}
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	config := write("urlflow.yaml", fmt.Sprintf(`secrets:
  - name: demo_api_key
    label: Demo API key
    api:
      base_url: "{public_url}/demo/api"
      methods: [GET, POST]
      inject: {header: Authorization, template: "Bearer {secret}"}
  - name: spare_key
    label: Spare key
    api:
      base_url: "{public_url}/demo/api"
      inject: {header: Authorization, template: "Bearer {secret}"}
services:
  - name: %s
    label: Weather MCP
    resource: %s
    slots: [demo_api_key, spare_key]
    release: true
    keys_file: %s
    webhook:
      url: %s/urlflow-webhook
      secret_file: %s
`, service, resource, write("weather.keys", digest+"\n"), u.Hooks.srv.URL, write("weather.whsec", webhookSecret+"\n")))

	cmd := exec.Command(urlflowBinary(t), "dev", "--addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+filepath.Join(dir, "home"), "URLFLOW_REDIS_URL="+u.Redis.URL(),
		"URLFLOW_CONFIG="+config, "URLFLOW_TEST_WEBHOOK_RETRY=300ms")
	cmd.Stderr = &u.output
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // dies with a timed-out test
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start urlflow: %v", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("urlflow's log:\n%s", u.log(60))
		}
	})
	listening := regexp.MustCompile(`^\s*Listening on:\s+(\S+)`)
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(io.TeeReader(stdout, &u.output))
		addr := ""
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				addr = m[1]
			}
			if strings.HasPrefix(sc.Text(), "Try it:") {
				ready <- addr
			}
		}
	}()
	select {
	case addr := <-ready:
		u.URL = "http://" + addr
	case <-exited:
		t.Fatalf("urlflow exited before it was ready:\n%s", u.output.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("urlflow was not ready in 30s:\n%s", u.output.String())
	}
	return u
}

// log returns the last n lines of urlflow's log (its banner, which holds tokens, left out).
func (u *urlflow) log(n int) string {
	var lines []string
	for line := range strings.Lines(u.output.String()) {
		if strings.HasPrefix(line, "time=") {
			lines = append(lines, line)
		}
	}
	return strings.Join(lines[max(0, len(lines)-n):], "")
}

// userToken returns a token of development user name for weather's resource: what the
// user's MCP client sends weather.
func (u *urlflow) userToken(name string) string {
	u.t.Helper()
	return u.devToken(name, resource)
}

// urlflowToken returns a token of development user name for urlflow's own /mcp.
func (u *urlflow) urlflowToken(name string) string {
	u.t.Helper()
	return u.devToken(name, "")
}

func (u *urlflow) devToken(name, forResource string) string {
	u.t.Helper()
	q := url.Values{"user": {name}}
	if forResource != "" {
		q.Set("resource", forResource)
	}
	resp, err := testClient.Get(u.URL + "/dev/token?" + q.Encode())
	if err != nil {
		u.t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Token string `json:"token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != http.StatusOK || body.Token == "" {
		u.t.Fatalf("GET /dev/token?%s: %d %v", q.Encode(), resp.StatusCode, err)
	}
	return body.Token
}

// elicitation reads elicitation id as weather sees it.
func (u *urlflow) elicitation(id string) (state string) {
	u.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u.URL+"/api/v1/elicitations/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+u.Key)
	resp, err := testClient.Do(req)
	if err != nil {
		u.t.Fatal(err)
	}
	defer resp.Body.Close()
	var e struct {
		State string `json:"state"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || resp.StatusCode != http.StatusOK {
		u.t.Fatalf("GET elicitation %s: %d %v", id, resp.StatusCode, err)
	}
	return e.State
}

// eventsKey is the Redis stream of weather's events (state/flow).
const eventsKey = "urlflow:svc:" + service + ":events"

// forgetOldEvents keeps only the newest event of weather's stream, as if the others had
// passed urlflow's retention (24 hours): a reader whose position is older gets a reset.
func (u *urlflow) forgetOldEvents() {
	u.t.Helper()
	rdb := u.Redis.Client(u.t)
	ctx := context.Background()
	if n, err := rdb.XLen(ctx, eventsKey).Result(); err != nil || n < 2 {
		u.t.Fatalf("weather's event stream %s holds %d events (%v): has its key moved?", eventsKey, n, err)
	}
	if err := rdb.XTrimMaxLen(ctx, eventsKey, 1).Err(); err != nil {
		u.t.Fatal(err)
	}
}

// hookReceiver is the endpoint of weather's webhook: it hands each message to the
// handler a test sets (204 while none is set), and keeps every message it got.
type hookReceiver struct {
	srv     *httptest.Server
	handler atomic.Pointer[http.Handler]
	mu      sync.Mutex
	got     []receivedHook
}

// receivedHook is one webhook request and the status the handler answered.
type receivedHook struct {
	Header http.Header
	Body   []byte
	Status int
}

func newHookReceiver(t testing.TB) *hookReceiver {
	r := &hookReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		status := http.StatusNoContent
		if h := r.handler.Load(); h != nil {
			rec := httptest.NewRecorder()
			req.Body = io.NopCloser(bytes.NewReader(body))
			(*h).ServeHTTP(rec, req)
			status = rec.Code
		}
		r.mu.Lock()
		r.got = append(r.got, receivedHook{Header: req.Header.Clone(), Body: body, Status: status})
		r.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// serve makes h answer the webhooks from now on.
func (r *hookReceiver) serve(h http.Handler) { r.handler.Store(&h) }

// received returns the webhooks received so far.
func (r *hookReceiver) received() []receivedHook {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]receivedHook(nil), r.got...)
}

// syncBuffer is a bytes.Buffer safe for concurrent writers and readers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// eventually waits until cond holds, failing the test after timeout. For what has no
// event to wait on (a line in a log, a state in urlflow).
func eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
