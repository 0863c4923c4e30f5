package testredis

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelMaster is the name the Sentinels of StartSentinel monitor their
// primary under.
const SentinelMaster = "rlprimary"

// SentinelCount is the number of Sentinels StartSentinel starts; a
// failover needs a majority of them (and a quorum of 2 to agree the
// primary is down).
const SentinelCount = 3

// The Sentinels' timing: a primary that does not answer for
// sentinelDownAfter is down, and a failover gets sentinelFailoverTimeout.
const (
	sentinelDownAfter       = 1000 * time.Millisecond
	sentinelFailoverTimeout = 5000 * time.Millisecond
)

// sentinelWait bounds every wait of the Sentinel rig: startup, sync and a
// failover.
const sentinelWait = time.Minute

// Sentinel is a Redis Sentinel topology on loopback ports: one primary,
// one replica of it and SentinelCount Sentinels monitoring it under
// MasterName. Start one with StartSentinel or StartSentinelProcess.
type Sentinel struct {
	// MasterName is the name the Sentinels know the primary by.
	MasterName string
	// Servers are the data servers: Servers[0] started as the primary,
	// Servers[1] as its replica. After a failover, Primary says which
	// one is the primary.
	Servers []*Server
	// Sentinels are the Sentinel processes.
	Sentinels []*Server
	dir       string
}

// SentinelAddrs returns the Sentinels' addresses, to seed a failover
// client.
func (s *Sentinel) SentinelAddrs() []string {
	addrs := make([]string, len(s.Sentinels))
	for i, n := range s.Sentinels {
		addrs[i] = n.Addr
	}
	return addrs
}

// NewClient returns a go-redis failover client of s (it asks the Sentinels
// for the primary and follows a failover), with ContextTimeoutEnabled and
// short dial and read timeouts, so a dead primary costs a call no more
// than its context allows. The caller closes it.
func (s *Sentinel) NewClient() *redis.Client {
	return redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:            s.MasterName,
		SentinelAddrs:         s.SentinelAddrs(),
		ContextTimeoutEnabled: true,
		DialTimeout:           250 * time.Millisecond,
		ReadTimeout:           time.Second,
		WriteTimeout:          time.Second,
	})
}

// Client returns a failover client of s (see NewClient) closed when t
// ends.
func (s *Sentinel) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := s.NewClient()
	t.Cleanup(func() { c.Close() })
	return c
}

// PrimaryAddr returns the primary's address as the first Sentinel that
// answers reports it.
func (s *Sentinel) PrimaryAddr(ctx context.Context) (string, error) {
	var last error
	for _, n := range s.Sentinels {
		addr, err := sentinelMasterAddr(ctx, n.Addr, s.MasterName)
		if err == nil {
			return addr, nil
		}
		last = err
	}
	return "", fmt.Errorf("no Sentinel reports the primary of %s: %w", s.MasterName, last)
}

// Primary returns the Server that the Sentinels report as the primary.
func (s *Sentinel) Primary(ctx context.Context) (*Server, error) {
	addr, err := s.PrimaryAddr(ctx)
	if err != nil {
		return nil, err
	}
	for _, srv := range s.Servers {
		if srv.Addr == addr {
			return srv, nil
		}
	}
	return nil, fmt.Errorf("the Sentinels report %s as the primary, none of the servers", addr)
}

// WaitNewPrimary waits until every Sentinel that answers reports a
// primary other than old, the same one, and that server says it is a
// master (role:master); it returns its address. It waits a minute at
// most, less if ctx ends sooner.
func (s *Sentinel) WaitNewPrimary(ctx context.Context, old string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, sentinelWait)
	defer cancel()
	var last error
	for {
		addr, err := s.agreedPrimary(ctx)
		switch {
		case err != nil:
			last = err
		case addr == old:
			last = fmt.Errorf("the Sentinels still report %s", old)
		default:
			if err := serverIsMaster(ctx, addr); err != nil {
				last = err
				break
			}
			return addr, nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("no new primary for %s after %s: %w (last: %v)\n%s", s.MasterName, old, ctx.Err(), last, s.logTails())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// agreedPrimary returns the primary that every Sentinel that answers
// reports.
func (s *Sentinel) agreedPrimary(ctx context.Context) (string, error) {
	agreed := ""
	for _, n := range s.Sentinels {
		addr, err := sentinelMasterAddr(ctx, n.Addr, s.MasterName)
		if err != nil {
			continue // a stopped Sentinel
		}
		if agreed != "" && addr != agreed {
			return "", fmt.Errorf("the Sentinels disagree: %s and %s", agreed, addr)
		}
		agreed = addr
	}
	if agreed == "" {
		return "", errors.New("no Sentinel answers")
	}
	return agreed, nil
}

// Close stops the Sentinels, then the servers, and removes their
// directories.
func (s *Sentinel) Close() {
	for _, n := range s.Sentinels {
		n.Stop() // their directory is s.dir
	}
	for _, n := range s.Servers {
		n.Close()
	}
	if s.dir != "" {
		os.RemoveAll(s.dir)
	}
}

// logTails returns the last lines of every process's log, for an error.
func (s *Sentinel) logTails() string {
	var b strings.Builder
	for _, n := range append(append([]*Server{}, s.Servers...), s.Sentinels...) {
		log, _ := os.ReadFile(filepath.Join(n.Dir, "redis-"+strconv.Itoa(n.Port)+".log"))
		lines := strings.Split(strings.TrimSpace(string(log)), "\n")
		if len(lines) > 8 {
			lines = lines[len(lines)-8:]
		}
		fmt.Fprintf(&b, "--- %s:\n%s\n", n.Addr, strings.Join(lines, "\n"))
	}
	return b.String()
}

// StartSentinel starts a Sentinel topology for the test t and stops it
// when t ends.
func StartSentinel(t testing.TB) *Sentinel {
	t.Helper()
	s, err := StartSentinelProcess()
	if err != nil {
		fatal(t, err)
	}
	t.Cleanup(s.Close)
	return s
}

// StartSentinelProcess starts a primary, a replica of it (--replicaof) and
// SentinelCount Sentinels (redis-server <conf> --sentinel) monitoring the
// primary with a quorum of 2, and waits until the replica is in sync and
// every Sentinel sees the primary, the replica and the other Sentinels. It
// takes a few seconds, most of it the Sentinels' hello messages (every
// 2 s), and a minute at most. The caller must Close it.
func StartSentinelProcess() (*Sentinel, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	s := &Sentinel{MasterName: SentinelMaster}
	ok := false
	defer func() {
		if !ok {
			s.Close()
		}
	}()
	// A replica must be able to take over: diskless sync with no delay
	// (the default waits 5 s for more replicas), on both, as roles swap.
	sync := []string{"--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0"}
	primary, err := StartProcess(sync...)
	if err != nil {
		return nil, fmt.Errorf("start the primary: %w", err)
	}
	s.Servers = append(s.Servers, primary)
	replica, err := StartProcess(append(sync, "--replicaof", "127.0.0.1", strconv.Itoa(primary.Port))...)
	if err != nil {
		return nil, fmt.Errorf("start the replica: %w", err)
	}
	s.Servers = append(s.Servers, replica)

	if s.dir, err = os.MkdirTemp("", "ratelimit-sentinel-"); err != nil {
		return nil, err
	}
	for i := 0; i < SentinelCount; i++ {
		n, err := startSentinelNode(bin, s.dir, s.MasterName, primary.Port)
		if err != nil {
			return nil, fmt.Errorf("start Sentinel %d: %w", i, err)
		}
		s.Sentinels = append(s.Sentinels, n)
	}

	ctx, cancel := context.WithTimeout(context.Background(), sentinelWait)
	defer cancel()
	if err := s.waitReady(ctx); err != nil {
		return nil, fmt.Errorf("%w\n%s", err, s.logTails())
	}
	ok = true
	return s, nil
}

// startSentinelNode starts one Sentinel on a free port, with a config of
// its own in dir (Sentinel rewrites it), retrying on a port clash.
func startSentinelNode(bin, dir, name string, primaryPort int) (*Server, error) {
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := FreePort()
		if err != nil {
			return nil, err
		}
		p := strconv.Itoa(port)
		conf := filepath.Join(dir, "sentinel-"+p+".conf")
		text := strings.Join([]string{
			"protected-mode no",
			"sentinel resolve-hostnames no",
			fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 2", name, primaryPort),
			fmt.Sprintf("sentinel down-after-milliseconds %s %d", name, sentinelDownAfter.Milliseconds()),
			fmt.Sprintf("sentinel failover-timeout %s %d", name, sentinelFailoverTimeout.Milliseconds()),
			fmt.Sprintf("sentinel parallel-syncs %s 1", name),
		}, "\n") + "\n"
		if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
			return nil, err
		}
		n := &Server{Addr: "127.0.0.1:" + p, Port: port, Dir: dir}
		// The config file must come first; the options after --sentinel
		// override it.
		n.args = []string{conf, "--sentinel", "--port", p, "--bind", "127.0.0.1",
			"--dir", dir, "--logfile", filepath.Join(dir, "redis-"+p+".log")}
		if err := n.start(bin); err != nil {
			lastErr = err
			continue
		}
		return n, nil
	}
	return nil, lastErr
}

// waitReady polls until the replica is in sync with the primary and every
// Sentinel knows the primary as a master, the replica as an up replica and
// the other Sentinels.
func (s *Sentinel) waitReady(ctx context.Context) error {
	var last error
	for {
		last = s.ready(ctx)
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redis sentinel topology not ready: %w (last: %v)", ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (s *Sentinel) ready(ctx context.Context) error {
	primary, replica := s.Servers[0], s.Servers[1]
	info, err := serverInfo(ctx, replica.Addr, "replication")
	if err != nil {
		return fmt.Errorf("replica %s: %w", replica.Addr, err)
	}
	if !strings.Contains(info, "master_link_status:up") {
		return fmt.Errorf("replica %s: not in sync with %s yet", replica.Addr, primary.Addr)
	}
	for _, n := range s.Sentinels {
		if err := sentinelSees(ctx, n.Addr, s.MasterName, primary.Addr, replica.Addr, len(s.Sentinels)-1); err != nil {
			return fmt.Errorf("Sentinel %s: %w", n.Addr, err)
		}
	}
	return nil
}

// sentinelSees checks that the Sentinel at addr knows master as an up
// master of name, replica as an up replica of it, and others other
// Sentinels.
func sentinelSees(ctx context.Context, addr, name, master, replica string, others int) error {
	sc := redis.NewSentinelClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 250 * time.Millisecond})
	defer sc.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	m, err := sc.Master(ctx, name).Result()
	if err != nil {
		return fmt.Errorf("SENTINEL MASTER: %w", err)
	}
	if got := m["ip"] + ":" + m["port"]; got != master || m["flags"] != "master" {
		return fmt.Errorf("SENTINEL MASTER: %s flags %q, want %s flags \"master\"", got, m["flags"], master)
	}
	if m["num-other-sentinels"] != strconv.Itoa(others) {
		return fmt.Errorf("SENTINEL MASTER: num-other-sentinels %s, want %d", m["num-other-sentinels"], others)
	}
	replicas, err := sc.Replicas(ctx, name).Result()
	if err != nil {
		return fmt.Errorf("SENTINEL REPLICAS: %w", err)
	}
	for _, r := range replicas {
		if r["ip"]+":"+r["port"] == replica && r["flags"] == "slave" && r["master-link-status"] == "ok" {
			return nil
		}
	}
	return fmt.Errorf("SENTINEL REPLICAS: %s not yet an up replica in sync (%v)", replica, replicas)
}

// sentinelMasterAddr asks the Sentinel at addr for the primary of name.
func sentinelMasterAddr(ctx context.Context, addr, name string) (string, error) {
	sc := redis.NewSentinelClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 250 * time.Millisecond})
	defer sc.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	hp, err := sc.GetMasterAddrByName(ctx, name).Result()
	if err != nil {
		return "", err
	}
	if len(hp) != 2 {
		return "", fmt.Errorf("SENTINEL GET-MASTER-ADDR-BY-NAME %s: %q", name, hp)
	}
	return hp[0] + ":" + hp[1], nil
}

// serverInfo returns a section of INFO of the server at addr.
func serverInfo(ctx context.Context, addr, section string) (string, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 250 * time.Millisecond})
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return c.Info(ctx, section).Result()
}

// serverIsMaster checks that the server at addr reports role:master.
func serverIsMaster(ctx context.Context, addr string) error {
	info, err := serverInfo(ctx, addr, "replication")
	if err != nil {
		return fmt.Errorf("%s: %w", addr, err)
	}
	if !strings.Contains(info, "role:master") {
		return fmt.Errorf("%s is not a master yet", addr)
	}
	return nil
}
