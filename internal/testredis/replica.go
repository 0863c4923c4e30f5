package testredis

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Pair is a primary and one replica of it, on loopback ports: the smallest
// topology a durable decision (WAIT) can be tested on. Start one with
// StartPair or StartPairProcess.
type Pair struct {
	Primary, Replica *Server
}

// StartPair starts a Pair (see StartPairProcess) stopped when t ends. A
// missing redis-server fails t under CI.
func StartPair(t testing.TB) *Pair {
	t.Helper()
	p, err := StartPairProcess()
	if err != nil {
		fatal(t, err)
	}
	t.Cleanup(p.Close)
	return p
}

// StartPairProcess starts a primary and a replica of it (--replicaof,
// diskless sync without delay) and waits, 30 s at most, until the replica
// is in sync. The caller must Close it.
func StartPairProcess() (*Pair, error) {
	sync := []string{"--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0"}
	primary, err := StartProcess(sync...)
	if err != nil {
		return nil, fmt.Errorf("start the primary: %w", err)
	}
	replica, err := StartProcess(append(sync, "--replicaof", "127.0.0.1", strconv.Itoa(primary.Port))...)
	if err != nil {
		primary.Close()
		return nil, fmt.Errorf("start the replica: %w", err)
	}
	p := &Pair{Primary: primary, Replica: replica}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = WaitInSync(ctx, replica.Addr)
	if err == nil {
		err = WaitAcked(ctx, primary.Addr, "testredis:acked")
	}
	if err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

var (
	sharedPair    *Pair
	sharedPairErr error
)

// SharedPair returns one Pair shared by the tests of this test binary,
// started on first use and stopped by Main. Tests sharing it must use keys
// of their own (see Prefix).
func SharedPair(t testing.TB) *Pair {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if sharedPair == nil && sharedPairErr == nil {
		sharedPair, sharedPairErr = StartPairProcess()
	}
	if sharedPairErr != nil {
		fatal(t, sharedPairErr)
	}
	return sharedPair
}

// Close stops both servers and removes their directories.
func (p *Pair) Close() {
	p.Replica.Close()
	p.Primary.Close()
}

// WaitInSync polls the replica at addr until its link to its primary is up
// (master_link_status:up) and its primary lists it online (after a
// diskless sync, only once the replica acknowledged; until then WAIT does
// not count it), or ctx ends.
func WaitInSync(ctx context.Context, addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	for {
		err = inSync(ctx, addr, port)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("replica %s not in sync: %w (last: %v)", addr, ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func inSync(ctx context.Context, addr, port string) error {
	info, err := serverInfo(ctx, addr, "replication")
	if err != nil {
		return err
	}
	if !strings.Contains(info, "master_link_status:up") {
		return fmt.Errorf("link to its primary not up")
	}
	var host, mport string
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "master_host:"); ok {
			host = v
		}
		if v, ok := strings.CutPrefix(line, "master_port:"); ok {
			mport = v
		}
	}
	pinfo, err := serverInfo(ctx, net.JoinHostPort(host, mport), "replication")
	if err != nil {
		return fmt.Errorf("its primary %s:%s: %w", host, mport, err)
	}
	for _, line := range strings.Split(pinfo, "\n") {
		if strings.HasPrefix(line, "slave") && strings.Contains(line, "port="+port+",") && strings.Contains(line, "state=online") {
			return nil
		}
	}
	return fmt.Errorf("its primary %s:%s does not list it online yet", host, mport)
}

// WaitAcked writes key on the primary at addr and waits (WAIT 1) until a
// replica acknowledges it, again until one does or ctx ends. A replica
// that has just synced answers its first WAITs only after up to a second
// (measured on Redis 7.0): a test of durable decisions starts after it.
func WaitAcked(ctx context.Context, addr, key string) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	for {
		err := c.Set(ctx, key, "1", time.Minute).Err()
		var n int64
		if err == nil {
			n, err = c.Wait(ctx, 1, 200*time.Millisecond).Result()
		}
		if err == nil && n >= 1 {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("no replica of %s acknowledged a write: %w (last: %d, %v)", addr, ctx.Err(), n, err)
		}
	}
}

// InfoField returns one field of a section of INFO of the server at addr
// ("replication", "master_repl_offset"; "commandstats", "cmdstat_wait"),
// or "" when INFO has no such field.
func InfoField(ctx context.Context, addr, section, field string) (string, error) {
	info, err := serverInfo(ctx, addr, section)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v, nil
		}
	}
	return "", nil
}

// Calls returns how many times the server at addr ran the command cmd
// ("wait", "evalsha"), from INFO commandstats.
func Calls(ctx context.Context, addr, cmd string) (int64, error) {
	v, err := InfoField(ctx, addr, "commandstats", "cmdstat_"+strings.ToLower(cmd))
	if err != nil || v == "" {
		return 0, err
	}
	// calls=3,usec=...
	for _, kv := range strings.Split(v, ",") {
		if n, ok := strings.CutPrefix(kv, "calls="); ok {
			return strconv.ParseInt(n, 10, 64)
		}
	}
	return 0, fmt.Errorf("INFO commandstats of %s: no calls in %q", cmd, v)
}

// RestartAsReplicaOf kills the server and starts it again on the same
// port as a replica of the server at addr (an old primary coming back
// after a failover), with an empty dataset; it syncs from addr.
func (s *Server) RestartAsReplicaOf(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	s.Stop()
	s.args = append(slices.Clone(s.args), "--replicaof", host, port)
	return s.Restart()
}
