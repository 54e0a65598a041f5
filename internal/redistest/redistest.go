// Package redistest starts real redis-server processes for tests, each on a free loopback
// port with its data in the test's temporary directory, so that tests can stop and
// restart them without losing data: single servers, Redis Clusters and a primary behind
// Sentinel.
package redistest

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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
	// conf is a configuration file to start with, if any; args are arguments beyond the
	// defaults.
	conf   string
	args   []string
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has exited
}

// Start starts redis-server on a free port and stops it when the test ends. It fails the
// test if redis-server is not installed: the project's test command installs it.
func Start(t testing.TB) *Server {
	t.Helper()
	return startWith(t, func(*Server) {})
}

// startAttempts bounds how often a new server tries another port: a port that was free a
// moment ago may have been taken since, by another test process.
const startAttempts = 5

// startWith starts redis-server after configure has set the new server's conf and args
// (its address and directory are set when configure runs; configure runs again, with
// another address, if the port turns out to be taken).
func startWith(t testing.TB, configure func(s *Server)) *Server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("redis-server not found (the README's test command installs it): %v", err)
	}
	for attempt := 1; ; attempt++ {
		s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(FreePort(t))), dir: t.TempDir()}
		configure(s)
		err := s.start(t)
		if err == nil {
			t.Cleanup(s.Stop)
			return s
		}
		s.Stop()
		if attempt == startAttempts {
			t.Fatalf("%s: %v", s, err)
		}
		t.Logf("%s: %v; trying another port", s, err)
	}
}

// handedOut holds the ports FreePort returned in this process, so that two tests running
// at once never get the same one.
var handedOut struct {
	sync.Mutex
	ports map[int]bool
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago and that FreePort
// has not returned before in this process.
func FreePort(t testing.TB) int {
	t.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	if handedOut.ports == nil {
		handedOut.ports = map[int]bool{}
	}
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("find a free port: %v", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !handedOut.ports[port] {
			handedOut.ports[port] = true
			return port
		}
	}
}

// errPortTaken says that another process answers on the server's port.
var errPortTaken = errors.New("the port is taken by another process")

// start starts the server's process and waits until it answers. It returns errPortTaken
// (wrapped) when the process could not have the port; other failures fail the test.
func (s *Server) start(t testing.TB) error {
	t.Helper()
	_, port, _ := net.SplitHostPort(s.Addr)
	// Every write reaches the disk before Redis answers, unless REDISTEST_APPENDFSYNC says
	// otherwise (benchmarks compare "everysec", Redis's own default for the append-only file).
	fsync := cmp.Or(os.Getenv("REDISTEST_APPENDFSYNC"), "always")
	var args []string
	if s.conf != "" {
		args = append(args, s.conf) // redis-server reads a configuration file first
	}
	args = append(args, "--port", port, "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "yes", "--appendfsync", fsync, "--dir", s.dir, "--loglevel", "warning")
	s.cmd = exec.Command("redis-server", append(args, s.args...)...)
	var output bytes.Buffer
	s.cmd.Stdout, s.cmd.Stderr = &output, &output
	// If the test binary dies (a timeout panic skips cleanups), the server dies with it.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	exited := make(chan struct{})
	s.exited = exited
	go func() { s.cmd.Wait(); close(exited) }()
	// No retries and short timeouts: a refused connection, or a port that accepts but never
	// answers, is the answer to look at again 20 ms later (the process may have exited).
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialerRetries: 1,
		DialTimeout: 250 * time.Millisecond, ReadTimeout: time.Second, WriteTimeout: time.Second})
	defer rdb.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-exited:
			if strings.Contains(output.String(), "Address already in use") {
				return errPortTaken
			}
			t.Fatalf("%s exited before it answered:\n%s", s, output.String())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := rdb.Ping(ctx).Err()
		var mine bool
		if err == nil {
			mine, err = s.owns(ctx, rdb)
		}
		cancel()
		switch {
		case err == nil && !mine:
			return fmt.Errorf("%w (another redis-server answers on it)", errPortTaken)
		case err == nil:
			return nil
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer: %v", s, err)
		}
		time.Sleep(20 * time.Millisecond) // polling a starting process; there is no event to wait on
	}
}

// owns reports whether the server that answers on s.Addr is the one s started: another
// test's server could have taken the port between FreePort and the start, and two tests
// would share data without a word.
func (s *Server) owns(ctx context.Context, rdb *redis.Client) (bool, error) {
	want, got := s.dir, ""
	if s.conf != "" { // a Sentinel has no CONFIG command; it names its file in INFO
		want = s.conf
		info, err := rdb.Info(ctx, "server").Result()
		if err != nil {
			return false, err
		}
		for line := range strings.SplitSeq(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "config_file:"); ok {
				got = v
			}
		}
	} else {
		cfg, err := rdb.ConfigGet(ctx, "dir").Result()
		if err != nil {
			return false, err
		}
		got = cfg["dir"]
	}
	if resolved, err := filepath.EvalSymlinks(want); err == nil {
		want = resolved
	}
	return got == want, nil
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
func (s *Server) Stop() { s.stopWith(syscall.SIGTERM) }

// stopWith sends the server's process sig and waits until it has exited.
func (s *Server) stopWith(sig syscall.Signal) {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Signal(sig)
	<-s.exited
	s.cmd = nil
}

// Restart stops the server and starts it again on the same port with the same data.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Stop()
	if err := s.start(t); err != nil {
		t.Fatalf("restart %s: %v", s, err)
	}
}

// String describes the server for test logs.
func (s *Server) String() string { return fmt.Sprintf("redis-server on %s", s.Addr) }

// Cluster is a Redis Cluster of real redis-servers started for one test.
type Cluster struct {
	Nodes []*Server
	// busPorts are the nodes' cluster bus ports, in the order of Nodes.
	busPorts []string
}

// StartCluster starts a Redis Cluster of n primaries without replicas: the hash slots
// split evenly, the nodes introduced to each other. It waits until every node says the
// cluster is ok.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	return startCluster(t, n, 5000)
}

// startCluster is StartCluster whose nodes take a node for failed after nodeTimeout
// milliseconds.
func startCluster(t testing.TB, n, nodeTimeout int) *Cluster {
	t.Helper()
	busPorts := make([]string, n)
	c := &Cluster{busPorts: busPorts}
	for i := range n {
		// The bus port gets a free port of its own: the default, port+10000, may be taken
		// or beyond 65535.
		c.Nodes = append(c.Nodes, startWith(t, func(s *Server) {
			busPorts[i] = strconv.Itoa(FreePort(t))
			s.args = []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
				"--cluster-node-timeout", strconv.Itoa(nodeTimeout), "--cluster-port", busPorts[i]}
		}))
	}
	const slots = 16384
	ctx := t.Context()
	clients := make([]*redis.Client, n)
	for i, node := range c.Nodes {
		clients[i] = redis.NewClient(&redis.Options{Addr: node.Addr})
		defer clients[i].Close()
		// Distinct epochs spare the nodes resolving a collision; then each its slots.
		first, last := i*slots/n, (i+1)*slots/n-1
		if err := clients[i].Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err(); err != nil {
			t.Fatalf("cluster node %s: %v", node.Addr, err)
		}
		if err := clients[i].Do(ctx, "CLUSTER", "ADDSLOTSRANGE", first, last).Err(); err != nil {
			t.Fatalf("cluster node %s: %v", node.Addr, err)
		}
	}
	for i, rdb := range clients {
		for j := i + 1; j < n; j++ {
			other := c.Nodes[j]
			host, port, _ := net.SplitHostPort(other.Addr)
			if err := rdb.Do(ctx, "CLUSTER", "MEET", host, port, busPorts[j]).Err(); err != nil {
				t.Fatalf("cluster node %s meeting %s: %v", c.Nodes[i].Addr, other.Addr, err)
			}
		}
	}
	for _, node := range c.Nodes {
		node.waitFor(t, "cluster_state:ok", func(ctx context.Context, rdb *redis.Client) (string, error) {
			return rdb.ClusterInfo(ctx).Result()
		})
	}
	return c
}

// URL returns the cluster's URL as go-redis' ParseClusterURL reads it: the first node,
// the others as addr parameters.
func (c *Cluster) URL() string {
	u := "redis://" + c.Nodes[0].Addr
	for i, node := range c.Nodes[1:] {
		sep := "&"
		if i == 0 {
			sep = "?"
		}
		u += sep + "addr=" + node.Addr
	}
	return u
}

// SentinelSetup is a primary watched by one Sentinel, started for one test.
type SentinelSetup struct {
	Primary  *Server
	Sentinel *Server
	// MasterName is the name the Sentinel knows the primary by.
	MasterName string
}

// StartSentinel starts a primary and a Sentinel that watches it as "urlflow", and waits
// until the Sentinel names the primary.
func StartSentinel(t testing.TB) *SentinelSetup {
	t.Helper()
	ss := &SentinelSetup{Primary: Start(t), MasterName: "urlflow"}
	host, port, _ := net.SplitHostPort(ss.Primary.Addr)
	ss.Sentinel = startWith(t, func(s *Server) {
		s.conf = filepath.Join(s.dir, "sentinel.conf") // Sentinel rewrites its file: it must be its own
		conf := fmt.Sprintf("sentinel monitor %s %s %s 1\nsentinel down-after-milliseconds %[1]s 5000\n", ss.MasterName, host, port)
		if err := os.WriteFile(s.conf, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		s.args = []string{"--sentinel"}
	})
	ss.Sentinel.waitFor(t, ss.Primary.Addr, func(ctx context.Context, rdb *redis.Client) (string, error) {
		addr, err := rdb.Do(ctx, "SENTINEL", "get-master-addr-by-name", ss.MasterName).StringSlice()
		if err != nil || len(addr) != 2 {
			return "", err
		}
		return net.JoinHostPort(addr[0], addr[1]), nil
	})
	return ss
}

// URL returns the URL of the primary through the Sentinel, as go-redis'
// ParseFailoverURL reads it.
func (ss *SentinelSetup) URL() string {
	return "redis://" + ss.Sentinel.Addr + "?master_name=" + ss.MasterName
}

// waitFor polls s with ask until its answer contains want, for at most 20 seconds.
func (s *Server) waitFor(t testing.TB, want string, ask func(context.Context, *redis.Client) (string, error)) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer rdb.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		got, err := ask(ctx, rdb)
		cancel()
		if err == nil && strings.Contains(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: waited 20s for %q, last answer %q (%v)", s, want, got, err)
		}
		time.Sleep(50 * time.Millisecond) // a cluster or sentinel settling has no event to wait on
	}
}
