package testredis

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestSentinel starts the Sentinel topology, checks that a write on the
// primary reaches the replica, fails over by command (SENTINEL FAILOVER)
// and checks that the replica is the primary and a failover client follows.
func TestSentinel(t *testing.T) {
	start := time.Now()
	s := StartSentinel(t)
	t.Logf("primary, replica and %d Sentinels ready in %v", len(s.Sentinels), time.Since(start).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), sentinelWait)
	defer cancel()
	primary, replica := s.Servers[0], s.Servers[1]
	if got, err := s.PrimaryAddr(ctx); err != nil || got != primary.Addr {
		t.Fatalf("PrimaryAddr = %q, %v; want %s", got, err, primary.Addr)
	}

	fc := s.Client(t)
	if err := fc.Set(ctx, "before", "1", 0).Err(); err != nil {
		t.Fatalf("SET through the failover client: %v", err)
	}
	rc := replica.Client(t)
	if !eventually(ctx, func() bool { return rc.Get(ctx, "before").Val() == "1" }) {
		t.Fatalf("the write on the primary did not reach the replica")
	}

	sc := redis.NewSentinelClient(&redis.Options{Addr: s.Sentinels[0].Addr})
	t.Cleanup(func() { sc.Close() })
	if err := sc.Failover(ctx, s.MasterName).Err(); err != nil {
		t.Fatalf("SENTINEL FAILOVER: %v", err)
	}
	got, err := s.WaitNewPrimary(ctx, primary.Addr)
	if err != nil {
		t.Fatal(err)
	}
	if got != replica.Addr {
		t.Fatalf("new primary %s, want the replica %s", got, replica.Addr)
	}
	if p, err := s.Primary(ctx); err != nil || p != replica {
		t.Fatalf("Primary = %v, %v; want the replica", p, err)
	}
	t.Logf("failed over to %s %v after the start", got, time.Since(start).Round(time.Millisecond))

	// The failover client follows: its writes succeed (the old primary,
	// now a replica, refuses them with READONLY until it switches) and
	// land on the new primary.
	var last error
	if !eventually(ctx, func() bool { last = fc.Set(ctx, "after", "2", 0).Err(); return last == nil }) {
		t.Fatalf("SET through the failover client after the failover: %v", last)
	}
	if v := rc.Get(ctx, "after").Val(); v != "2" {
		t.Fatalf("GET after on the new primary = %q, want 2", v)
	}
	if v := rc.Get(ctx, "before").Val(); v != "1" {
		t.Fatalf("GET before on the new primary = %q, want 1", v)
	}
	info, err := fc.Info(ctx, "server").Result()
	if err != nil || !strings.Contains(info, "tcp_port:"+strings.TrimPrefix(replica.Addr, "127.0.0.1:")+"\r\n") {
		t.Fatalf("the failover client talks to another server than %s: %v", replica.Addr, err)
	}
}

// eventually polls cond until it holds or ctx ends.
func eventually(ctx context.Context, cond func() bool) bool {
	for !cond() {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
	return true
}
