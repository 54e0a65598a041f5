// Package redistest starts real redis-server processes for tests, each on a free loopback
// port with its data in the test's temporary directory, so that tests can stop and
// restart them without losing data.
package redistest

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is a redis-server started for one test.
type Server struct {
	// Addr is host:port of the server.
	Addr string
	dir  string
	cmd  *exec.Cmd
}

// Start starts redis-server on a free port and stops it when the test ends. It fails the
// test if redis-server is not installed: the project's test command installs it.
func Start(t testing.TB) *Server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("redis-server not found (the README's test command installs it): %v", err)
	}
	s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(FreePort(t))), dir: t.TempDir()}
	s.start(t)
	t.Cleanup(s.Stop)
	return s
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (s *Server) start(t testing.TB) {
	t.Helper()
	_, port, _ := net.SplitHostPort(s.Addr)
	// Every write reaches the disk before Redis answers, unless REDISTEST_APPENDFSYNC says
	// otherwise (benchmarks compare "everysec", Redis's own default for the append-only file).
	fsync := cmp.Or(os.Getenv("REDISTEST_APPENDFSYNC"), "always")
	s.cmd = exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "yes", "--appendfsync", fsync, "--dir", s.dir, "--loglevel", "warning")
	// If the test binary dies (a timeout panic skips cleanups), the server dies with it.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer rdb.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := rdb.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on %s did not answer: %v", s.Addr, err)
		}
		time.Sleep(20 * time.Millisecond) // polling a starting process; there is no event to wait on
	}
}

// URL returns the server's redis:// URL.
func (s *Server) URL() string { return "redis://" + s.Addr }

// Client returns a client for the server, closed when the test ends.
func (s *Server) Client(t testing.TB) redis.UniversalClient {
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// Stop stops the server; clients see it unavailable until Restart.
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	s.cmd.Wait()
	s.cmd = nil
}

// Restart stops the server and starts it again on the same port with the same data.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Stop()
	s.start(t)
}

// String describes the server for test logs.
func (s *Server) String() string { return fmt.Sprintf("redis-server on %s", s.Addr) }
