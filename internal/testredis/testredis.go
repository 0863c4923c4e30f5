// Package testredis starts real redis-server processes (single servers and
// clusters) on free loopback ports, and stops them afterwards. It never
// touches a Redis that someone else runs.
//
// Tests use Start, Shared, StartCluster and SharedCluster, which take a
// testing.TB; StartProcess and StartClusterOf need none, and are what the
// benchmarks module (its report command and benchmarks) starts its servers
// with, so there is one subprocess helper for both.
//
// A missing redis-server binary fails the test with a message saying how to
// install it; it is never a silent skip.
package testredis

import (
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
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is a redis-server process started by Start.
type Server struct {
	Addr string
	Port int
	Dir  string
	cmd  *exec.Cmd
	args []string
	mu   sync.Mutex
}

// Binary returns the path of redis-server ($REDIS_SERVER when set), or an
// error saying how to get it.
func Binary() (string, error) {
	if p := os.Getenv("REDIS_SERVER"); p != "" {
		return p, nil
	}
	p, err := exec.LookPath("redis-server")
	if err != nil {
		return "", ErrNoServer
	}
	return p, nil
}

// skipped counts the tests that fatal skipped; Main reports them.
var skipped atomic.Int64

// ErrNoServer is the error of Binary when there is no redis-server.
var ErrNoServer = errors.New("redis-server not found on PATH: install it (Debian: apt-get install redis-server), run ./scripts/test.sh, which does, or set REDIS_SERVER")

// fatal ends t for err, the error of starting a server. A missing
// redis-server skips t, saying so, when the CI environment variable is
// unset, so that a plain go test ./... runs everything else; under CI it
// fails t: a real Redis is part of the suite.
func fatal(t testing.TB, err error) {
	t.Helper()
	if errors.Is(err, ErrNoServer) && os.Getenv("CI") == "" {
		skipped.Add(1)
		t.Skipf("skipped: this test needs a real Redis (%v); ./scripts/test.sh installs it and runs everything", err)
	}
	t.Fatal(err)
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// StartProcess starts a redis-server on a free loopback port with extra
// arguments (e.g. "--cluster-enabled", "yes") and waits until it answers
// PING. The caller must Stop it.
func StartProcess(extra ...string) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "ratelimit-redis-")
	if err != nil {
		return nil, err
	}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := FreePort()
		if err != nil {
			return nil, err
		}
		s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(port), Port: port, Dir: dir}
		s.args = append([]string{
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--protected-mode", "no",
			"--dir", dir, "--logfile", filepath.Join(dir, "redis-"+strconv.Itoa(port)+".log"),
		}, extra...)
		if err := s.start(bin); err != nil {
			lastErr = err
			continue
		}
		return s, nil
	}
	os.RemoveAll(dir)
	return nil, fmt.Errorf("start redis-server: %w", lastErr)
}

func (s *Server) start(bin string) error {
	cmd := exec.Command(bin, s.args...)
	// Take the server down with the test binary, whatever ends it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	s.mu.Lock()
	s.cmd = cmd
	s.mu.Unlock()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case err := <-exited:
			log, _ := os.ReadFile(filepath.Join(s.Dir, "redis-"+strconv.Itoa(s.Port)+".log"))
			return fmt.Errorf("redis-server on %s exited: %v: %s", s.Addr, err, strings.TrimSpace(string(log)))
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			go func() { <-exited }()
			return nil
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			return fmt.Errorf("redis-server on %s did not answer PING: %v", s.Addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the server and waits for it to exit.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd := s.cmd
	s.cmd = nil
	s.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		cmd.Process.Kill()
		for i := 0; i < 200; i++ { // wait until the port is closed
			if cmd.Process.Signal(syscall.Signal(0)) != nil {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// Restart kills the server and starts it again on the same port, with an
// empty dataset and an empty script cache.
func (s *Server) Restart() error {
	s.Stop()
	bin, err := Binary()
	if err != nil {
		return err
	}
	var lastErr error
	for attempt := 0; attempt < 50; attempt++ { // the port may linger briefly
		if lastErr = s.start(bin); lastErr == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return lastErr
}

// Signal sends sig to the server process (SIGSTOP pauses it, SIGCONT resumes it).
func (s *Server) Signal(sig os.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return fmt.Errorf("redis-server on %s is not running", s.Addr)
	}
	return s.cmd.Process.Signal(sig)
}

// Close stops the server and removes its directory.
func (s *Server) Close() {
	s.Stop()
	os.RemoveAll(s.Dir)
}

// Start starts a redis-server for the test t and stops it when t ends.
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	s, err := StartProcess(extra...)
	if err != nil {
		fatal(t, err)
	}
	t.Cleanup(s.Close)
	return s
}

// Client returns a client of s closed when t ends.
func (s *Server) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	t.Cleanup(func() { c.Close() })
	return c
}

var (
	sharedMu  sync.Mutex
	shared    *Server
	sharedErr error
)

// Shared returns one redis-server shared by the tests of this test binary,
// started on first use. The test binary must call Main from TestMain so the
// server is stopped at exit. Tests sharing it must use keys of their own
// (see Prefix), never FLUSHALL.
func Shared(t testing.TB) *Server {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil && sharedErr == nil {
		shared, sharedErr = StartProcess()
	}
	if sharedErr != nil {
		fatal(t, sharedErr)
	}
	return shared
}

// Prefix returns a key prefix unique to t, so tests sharing a server never
// see each other's keys.
func Prefix(t testing.TB) string {
	return "test:" + strings.NewReplacer("{", "(", "}", ")").Replace(t.Name()) + ":" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
}

// Main runs the tests and stops the shared server, the shared Pair and the
// shared cluster afterwards. Use it as
//
//	func TestMain(m *testing.M) { os.Exit(testredis.Main(m)) }
func Main(m *testing.M) int {
	code := m.Run()
	if n := skipped.Load(); n > 0 {
		// printed whatever -v says, so that go test ./... shows it
		fmt.Fprintf(os.Stderr, "testredis: %d tests skipped: %v\n", n, ErrNoServer)
	}
	sharedMu.Lock()
	if shared != nil {
		shared.Close()
	}
	if sharedPair != nil {
		sharedPair.Close()
	}
	sharedMu.Unlock()
	closeSharedCluster()
	return code
}
