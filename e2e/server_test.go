package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/urlflow/urlflow/internal/browsertest"
	"github.com/urlflow/urlflow/internal/redistest"
)

// server is one running `urlflow dev` process.
type server struct {
	t testing.TB
	// BaseURL is where the process listens, e.g. http://127.0.0.1:PORT. It differs from the
	// public URL when --public-url is set.
	BaseURL string
	// MCPURL, Token and OperatorToken are read from the startup banner. MCPURL starts with
	// the public URL.
	MCPURL        string
	Token         string
	OperatorToken string
	cmd           *exec.Cmd
	output        *syncBuffer
	// stdout holds what the process printed on stdout alone, line by line: output mixes
	// in its log lines (stderr) wherever they land.
	stdout *syncBuffer
	exited chan struct{}
	// configHome is the XDG_CONFIG_HOME of urlflow dev (its development keys).
	configHome string
}

// serverConfig configures a urlflow process.
type serverConfig struct {
	// Redis is the redis-server to use; required unless RedisURL is set.
	Redis *redistest.Server
	// RedisURL is URLFLOW_REDIS_URL when Redis is nil (a Cluster or Sentinel, whose
	// topology Env sets).
	RedisURL string
	// ConfigHome is XDG_CONFIG_HOME (development keys); a new temporary one if empty.
	// Replicas share one so that they share keys.
	ConfigHome string
	// Style is URLFLOW_ELICITATION_STYLE ("push" if empty).
	Style string
	// TTL is URLFLOW_TEST_ELICITATION_TTL (below the floor of URLFLOW_ELICITATION_TTL), if set.
	TTL string
	// PublicURL is --public-url, if set (replicas behind one address).
	PublicURL string
	// Env adds environment variables.
	Env []string
	// Addr is the listen address, 127.0.0.1:0 (any free port) if empty.
	Addr string
	// ConfigFile is URLFLOW_CONFIG, if set.
	ConfigFile string
	// Binary is the urlflow binary to run, the package's binary if empty (another build,
	// such as the previous commit's in the upgrade test).
	Binary string
}

var bannerLine = regexp.MustCompile(`(?m)^\s*(MCP URL|Listening on|Bearer token|Operator token):\s+(\S+)\s*$`)

// startServer starts `urlflow dev` (on any free loopback port unless cfg.Addr says
// otherwise) and waits for its banner.
func startServer(t testing.TB, cfg serverConfig) *server {
	t.Helper()
	s, err := tryServer(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// tryServer is startServer that returns errPortTaken (wrapped) when urlflow could not have
// cfg.Addr.
func tryServer(t testing.TB, cfg serverConfig) (*server, error) {
	t.Helper()
	if cfg.ConfigHome == "" {
		cfg.ConfigHome = t.TempDir()
	}
	if cfg.Style == "" {
		cfg.Style = "push"
	}
	if cfg.RedisURL == "" {
		cfg.RedisURL = cfg.Redis.URL()
	}
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.Binary == "" {
		cfg.Binary = binary
	}
	args := []string{"dev", "--addr", cfg.Addr}
	if cfg.PublicURL != "" {
		args = append(args, "--public-url", cfg.PublicURL)
	}
	cmd := exec.Command(cfg.Binary, args...)
	cmd.Env = append(os.Environ(),
		// Stopping at the end of a test need not wait for calls the test left waiting (a
		// test that stops a replica on purpose sets its own).
		"URLFLOW_SHUTDOWN_GRACE=2s",
		"XDG_CONFIG_HOME="+cfg.ConfigHome,
		"URLFLOW_REDIS_URL="+cfg.RedisURL,
		"URLFLOW_ELICITATION_STYLE="+cfg.Style,
	)
	if cfg.TTL != "" {
		cmd.Env = append(cmd.Env, "URLFLOW_TEST_ELICITATION_TTL="+cfg.TTL)
	}
	if cfg.ConfigFile != "" {
		cmd.Env = append(cmd.Env, "URLFLOW_CONFIG="+cfg.ConfigFile)
	}
	cmd.Env = append(cmd.Env, cfg.Env...)
	s, banner, err := launch(t, cmd, "Try it:")
	if err != nil {
		return nil, err
	}
	s.configHome = cfg.ConfigHome
	for _, m := range bannerLine.FindAllStringSubmatch(banner, -1) {
		switch m[1] {
		case "MCP URL":
			s.MCPURL = m[2]
		case "Listening on":
			s.BaseURL = "http://" + m[2]
		case "Bearer token":
			s.Token = m[2]
		case "Operator token":
			s.OperatorToken = m[2]
		}
	}
	if s.MCPURL == "" || s.Token == "" || s.OperatorToken == "" || s.BaseURL == "" {
		t.Fatalf("banner without the listening address, MCP URL, token or operator token:\n%s", s.output.String())
	}
	return s, nil
}

// errPortTaken says that urlflow could not listen on the port it was given: another
// process took it after it was found free.
var errPortTaken = errors.New("the port was taken before urlflow could listen on it")

// launch starts cmd (urlflow) and waits until a line of its stdout starts with ready. It
// returns the server and what stdout printed up to that line. When urlflow exits before,
// it returns errPortTaken (wrapped) if its port was taken, and fails the test otherwise.
func launch(t testing.TB, cmd *exec.Cmd, ready string) (*server, string, error) {
	t.Helper()
	s := &server{t: t, cmd: cmd, output: &syncBuffer{}, stdout: &syncBuffer{}, exited: make(chan struct{})}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = s.output
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // dies with a timed-out test
	if err := cmd.Start(); err != nil {
		t.Fatalf("start urlflow: %v", err)
	}
	up := make(chan string, 1)
	go func() {
		var text strings.Builder
		sc := bufio.NewScanner(io.TeeReader(stdout, s.output))
		sent := false
		for sc.Scan() {
			text.WriteString(sc.Text() + "\n")
			s.stdout.Write([]byte(sc.Text() + "\n"))
			if !sent && strings.HasPrefix(sc.Text(), ready) {
				up <- text.String()
				sent = true
			}
		}
	}()
	go func() { cmd.Wait(); close(s.exited) }()
	select {
	case text := <-up:
		t.Cleanup(s.stop)
		return s, text, nil
	case <-s.exited:
		if strings.Contains(s.output.String(), "address already in use") {
			return nil, "", fmt.Errorf("%w:\n%s", errPortTaken, s.output.String())
		}
		t.Fatalf("urlflow exited before it was ready:\n%s", s.output.String())
	case <-time.After(30 * time.Second):
		s.stop()
		t.Fatalf("urlflow was not ready in 30s:\n%s", s.output.String())
	}
	return nil, "", nil
}

// onFreePort runs start with a free port, and again with another one when the port was
// taken before urlflow could listen on it: a port is free when chosen, and any process (a
// client's connection among them) may take it before urlflow binds it.
func onFreePort(t testing.TB, start func(port int) (*server, error)) *server {
	t.Helper()
	for attempt := 1; ; attempt++ {
		s, err := start(redistest.FreePort(t))
		if err == nil {
			return s
		}
		if !errors.Is(err, errPortTaken) || attempt == 3 {
			t.Fatal(err)
		}
		t.Logf("trying another port: %v", err)
	}
}

// stop stops the process and keeps its output as a test artifact.
func (s *server) stop() {
	if s.cmd.Process != nil {
		s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
			s.cmd.Process.Kill()
			<-s.exited
		}
	}
	name := strings.NewReplacer("/", "_", " ", "_").Replace(s.t.Name())
	dir := filepath.Join(browsertest.ArtifactsDir(s.t), "..", "logs")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, name+"-"+filepath.Base(s.BaseURL)+".log"), []byte(s.output.String()), 0o644)
}

// Output returns everything the process wrote so far (banner and logs).
func (s *server) Output() string { return s.output.String() }

// Stdout returns the whole lines the process printed on stdout so far (the banner).
func (s *server) Stdout() string { return s.stdout.String() }

// devToken returns a bearer token for development user name.
func (s *server) devToken(name string) string {
	s.t.Helper()
	var body struct {
		Token string `json:"token"`
	}
	status := s.getJSON("/dev/token?user="+name, "", &body)
	if status != http.StatusOK || body.Token == "" {
		s.t.Fatalf("GET /dev/token?user=%s: status %d", name, status)
	}
	return body.Token
}

// getJSON GETs path with an optional bearer token and decodes the JSON answer into v.
func (s *server) getJSON(path, token string, v any) int {
	return s.doJSON(http.MethodGet, path, token, nil, v)
}

// doJSON sends a request with an optional bearer token and JSON body, and decodes the
// JSON answer into v (if not nil). It returns the status.
func (s *server) doJSON(method, path, token string, body any, v any) int {
	s.t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.BaseURL+path, r)
	if err != nil {
		s.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if v != nil && len(data) > 0 {
		if err := json.Unmarshal(data, v); err != nil {
			s.t.Fatalf("%s %s: status %d, not JSON: %v\n%s", method, path, resp.StatusCode, err, data)
		}
	}
	return resp.StatusCode
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

// TestAServerWhosePortWasTakenStartsOnAnother: a port found free can be taken (by any
// process, a client's connection among them) before urlflow listens on it; the tests then
// start urlflow on another port instead of failing.
func TestAServerWhosePortWasTakenStartsOnAnother(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	rs := redistest.Start(t)
	attempts := 0
	s := onFreePort(t, func(port int) (*server, error) {
		attempts++
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		if attempts == 1 {
			addr = taken.Addr().String()
		}
		return tryServer(t, serverConfig{Redis: rs, Addr: addr})
	})
	if attempts != 2 || s.BaseURL == "http://"+taken.Addr().String() {
		t.Fatalf("%d attempts, urlflow at %s (the taken port is %s)", attempts, s.BaseURL, taken.Addr())
	}
	if code := s.getJSON("/healthz", "", nil); code != http.StatusOK {
		t.Fatalf("/healthz: %d", code)
	}
}
