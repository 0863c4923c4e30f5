package ratelimit_test

import (
	"context"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/breaker"
	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/strategy"
)

// On a cluster each master has a breaker of its own: a stopped master
// opens its subjects' breaker, and the subjects of the healthy masters are
// still decided by Redis, not by the failure policy.
func TestBreakerPerClusterMaster(t *testing.T) {
	cl := testredis.StartCluster(t)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), ContextTimeoutEnabled: true, MaxRetries: -1,
		ReadTimeout: 100 * time.Millisecond, WriteTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { cc.Close() })
	ctx := context.Background()
	// two subjects on different masters
	masterOf := func(subject string) *redis.Client {
		m, err := cc.MasterForKey(ctx, strategy.KeyFor("", "", subject, strategy.NoShard))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	sick, healthy := "sick", ""
	for i := 0; healthy == ""; i++ {
		if s := "healthy" + strconv.Itoa(i); masterOf(s) != masterOf(sick) {
			healthy = s
		}
	}
	l, err := ratelimit.New(cc, ratelimit.Config{Algorithm: ratelimit.FixedWindow, Limit: 1000, Window: time.Minute,
		OnFailure: ratelimit.FailClosed, Timeout: time.Second, Prefix: testredis.Prefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{sick, healthy} {
		if r, err := l.Allow(ctx, s); err != nil || r.Degraded || !r.Allowed {
			t.Fatalf("Allow(%q) with every master up: %+v, %v", s, r, err)
		}
	}
	addr := masterOf(sick).Options().Addr
	var stopped *testredis.Server
	for _, n := range cl.Nodes {
		if n.Addr == addr {
			stopped = n
		}
	}
	if err := stopped.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopped.Signal(syscall.SIGCONT) })
	for range 2 * breaker.DefaultFailures {
		r, err := l.AllowN(ctx, sick, 1)
		if err != nil || !r.Degraded || r.Allowed {
			t.Fatalf("Allow(%q) with its master stopped: %+v, %v; want a FailClosed denial", sick, r, err)
		}
	}
	for i := range 5 {
		r, err := l.Allow(ctx, healthy)
		if err != nil || r.Degraded || !r.Allowed {
			t.Fatalf("Allow(%q) %d, its master up, another's breaker open: %+v, %v; want Redis's decision", healthy, i, r, err)
		}
	}
}
