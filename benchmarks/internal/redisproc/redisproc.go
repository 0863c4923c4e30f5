// Package redisproc starts throwaway redis-server processes on free loopback
// ports for the benchmarks and the report command, and stops them. It never
// touches a Redis that someone else runs. (The library's own test starter is
// internal to the root module, which this nested module cannot import.)
package redisproc

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
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is a redis-server process started by Start.
type Server struct {
	Addr string
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

// Binary returns the path of redis-server (or $REDIS_SERVER), or an error
// saying how to get it.
func Binary() (string, error) {
	if p := os.Getenv("REDIS_SERVER"); p != "" {
		return p, nil
	}
	p, err := exec.LookPath("redis-server")
	if err != nil {
		return "", errors.New("redis-server not found on PATH: install it (Debian: apt-get install redis-server) or set REDIS_SERVER")
	}
	return p, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Start starts a redis-server without persistence on a free loopback port,
// with extra arguments appended, and waits until it answers PING. The caller
// must Close it.
func Start(extra ...string) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	var lastErr error
	for range 5 {
		s, err := start(bin, extra)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return nil, fmt.Errorf("start redis-server: %w", lastErr)
}

func start(bin string, extra []string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "ratelimit-bench-redis-")
	if err != nil {
		return nil, err
	}
	s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(port), dir: dir, done: make(chan struct{})}
	args := append([]string{
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--protected-mode", "no",
		"--dir", dir, "--logfile", filepath.Join(dir, "redis.log"),
	}, extra...)
	s.cmd = exec.Command(bin, args...)
	// Take the server down with this process, however it ends.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	go func() { s.cmd.Wait(); close(s.done) }()
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-s.done:
			log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			os.RemoveAll(dir)
			return nil, fmt.Errorf("redis-server on %s exited: %s", s.Addr, strings.TrimSpace(string(log)))
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return s, nil
		}
		if time.Now().After(deadline) {
			s.Close()
			return nil, fmt.Errorf("redis-server on %s did not answer PING: %w", s.Addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Close kills the server, waits for it to exit and removes its directory.
func (s *Server) Close() {
	if s.cmd.Process != nil {
		s.cmd.Process.Kill()
		select {
		case <-s.done:
		case <-time.After(5 * time.Second):
		}
	}
	os.RemoveAll(s.dir)
}

// Cluster is a Redis Cluster of masters without replicas, started by
// StartCluster.
type Cluster struct {
	Nodes []*Server
}

// Addrs returns the nodes' addresses.
func (c *Cluster) Addrs() []string {
	a := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		a[i] = n.Addr
	}
	return a
}

// Close stops every node.
func (c *Cluster) Close() {
	for _, n := range c.Nodes {
		n.Close()
	}
}

// StartCluster starts n cluster-enabled redis-servers, splits the 16384 hash
// slots evenly between them, joins them and waits until every node knows
// every other and reports cluster_state:ok.
func StartCluster(n int) (*Cluster, error) {
	c := &Cluster{}
	for range n {
		s, err := Start("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000")
		if err != nil {
			c.Close()
			return nil, err
		}
		c.Nodes = append(c.Nodes, s)
	}
	ctx := context.Background()
	clients := make([]*redis.Client, n)
	for i, s := range c.Nodes {
		clients[i] = redis.NewClient(&redis.Options{Addr: s.Addr})
		defer clients[i].Close()
	}
	fail := func(err error) (*Cluster, error) {
		c.Close()
		return nil, fmt.Errorf("start cluster: %w", err)
	}
	for i, cl := range clients {
		lo, hi := i*16384/n, (i+1)*16384/n-1
		slots := make([]int, 0, hi-lo+1)
		for s := lo; s <= hi; s++ {
			slots = append(slots, s)
		}
		if err := cl.ClusterAddSlots(ctx, slots...).Err(); err != nil {
			return fail(err)
		}
	}
	for _, s := range c.Nodes[1:] {
		host, port, _ := net.SplitHostPort(s.Addr)
		if err := clients[0].ClusterMeet(ctx, host, port).Err(); err != nil {
			return fail(err)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok := true
		for _, cl := range clients {
			info, err := cl.ClusterInfo(ctx).Result()
			if err != nil || !strings.Contains(info, "cluster_state:ok") ||
				!strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(n)+"\r") {
				ok = false
				break
			}
		}
		if ok {
			return c, nil
		}
		if time.Now().After(deadline) {
			return fail(errors.New("cluster_state did not become ok"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
