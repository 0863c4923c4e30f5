package ratelimit_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/batch"
	"github.com/ratekit/ratelimit/internal/testredis"
)

// policyRecorder keeps the EvictionPolicy of every decision that carries
// one, and counts the decisions and the degraded ones.
type policyRecorder struct {
	mu        sync.Mutex
	reports   []string
	decisions int
	degraded  int
}

func (r *policyRecorder) Observe(_ context.Context, d ratelimit.Decision) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.decisions++
	if d.Degraded {
		r.degraded++
	}
	if d.EvictionPolicy != "" {
		r.reports = append(r.reports, d.EvictionPolicy)
	}
}

func (r *policyRecorder) got() (reports []string, decisions, degraded int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.reports...), r.decisions, r.degraded
}

// TestEvictionPolicy: a Limiter on a real Redis reports, once, a
// maxmemory-policy that may evict its keys, "unknown" where CONFIG is
// refused (an ACL user without it, a renamed CONFIG), and nothing for
// noeviction or no maxmemory; Redis decides throughout, and a Set reports
// once for all its policies.
func TestEvictionPolicy(t *testing.T) {
	srv := testredis.Start(t)
	renamed := testredis.Start(t, "--rename-command", "CONFIG", "")
	admin := srv.Client(t)
	ctx := context.Background()
	if err := admin.Do(ctx, "ACL", "SETUSER", "noconfig", "on", ">secret", "~*", "&*", "+@all", "-config").Err(); err != nil {
		t.Fatal(err)
	}
	client := func(t *testing.T, addr, user string) *redis.Client {
		o := &redis.Options{Addr: addr}
		if user != "" {
			o.Username, o.Password = user, "secret"
		}
		c := redis.NewClient(o)
		t.Cleanup(func() { c.Close() })
		return c
	}
	for _, c := range []struct {
		name      string
		policy    string // set on srv
		maxmemory string
		user      string
		addr      string // "" is srv's
		batched   bool
		set       bool // through NewSet, two policies
		want      string
	}{
		{name: "allkeys-lru", policy: "allkeys-lru", maxmemory: "100mb", want: "allkeys-lru"},
		{name: "volatile-ttl", policy: "volatile-ttl", maxmemory: "100mb", want: "volatile-ttl"},
		{name: "batched", policy: "allkeys-lfu", maxmemory: "100mb", batched: true, want: "allkeys-lfu"},
		{name: "set", policy: "volatile-lru", maxmemory: "100mb", set: true, want: "volatile-lru"},
		{name: "noeviction", policy: "noeviction", maxmemory: "100mb"},
		{name: "no maxmemory", policy: "allkeys-lru", maxmemory: "0"},
		{name: "acl refused", policy: "allkeys-lru", maxmemory: "100mb", user: "noconfig", want: "unknown"},
		{name: "renamed", addr: renamed.Addr, want: "unknown"},
	} {
		t.Run(c.name, func(t *testing.T) {
			addr := srv.Addr
			if c.addr != "" {
				addr = c.addr
			} else if err := admin.ConfigSet(ctx, "maxmemory-policy", c.policy).Err(); err != nil {
				t.Fatal(err)
			} else if err := admin.ConfigSet(ctx, "maxmemory", c.maxmemory).Err(); err != nil {
				t.Fatal(err)
			}
			before, err := testredis.Calls(ctx, addr, "config|get")
			if err != nil {
				t.Fatal(err)
			}
			var rdb redis.Scripter = client(t, addr, c.user)
			if c.batched {
				b, err := batch.New(rdb)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { b.Close() })
				rdb = b
			}
			rec := &policyRecorder{}
			cfg := ratelimit.Config{Algorithm: ratelimit.FixedWindow, Limit: 1000, Window: time.Minute,
				Prefix: "evict:" + c.name + ":", Timeout: 5 * time.Second}
			var limiters []*ratelimit.Limiter
			if c.set {
				other := cfg
				other.Algorithm = ratelimit.GCRA
				s, err := ratelimit.NewSet(rdb, ratelimit.Policies{"a": cfg, "b": other}, ratelimit.WithObserver(rec))
				if err != nil {
					t.Fatal(err)
				}
				a, _ := s.Get("a")
				b, _ := s.Get("b")
				limiters = []*ratelimit.Limiter{a, b}
			} else {
				l, err := ratelimit.New(rdb, cfg, ratelimit.WithObserver(rec))
				if err != nil {
					t.Fatal(err)
				}
				limiters = []*ratelimit.Limiter{l}
			}
			decide := func(n int) {
				for i := range n {
					for _, l := range limiters {
						if _, err := l.Allow(ctx, "subject"); err != nil {
							t.Fatalf("decision %d: %v", i, err)
						}
					}
				}
			}
			// the check runs off the decision path: decide until it is
			// reported, or (nothing to report) until the server answered it
			deadline := time.Now().Add(10 * time.Second)
			for {
				decide(1)
				reports, _, _ := rec.got()
				if len(reports) > 0 {
					break
				}
				if n, _ := testredis.Calls(ctx, addr, "config|get"); c.want == "" && n > before {
					time.Sleep(100 * time.Millisecond) // its answer settles the check
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no eviction policy reported in 10s; want %q", c.want)
				}
				time.Sleep(10 * time.Millisecond)
			}
			decide(20)
			reports, decisions, degraded := rec.got()
			switch {
			case c.want == "" && len(reports) != 0:
				t.Errorf("reports = %q; want none", reports)
			case c.want != "" && (len(reports) != 1 || reports[0] != c.want):
				t.Errorf("reports = %q; want [%q] (once in %d decisions)", reports, c.want, decisions)
			}
			if degraded != 0 {
				t.Errorf("%d of %d decisions degraded; want Redis to decide them all", degraded, decisions)
			}
			if n, _ := testredis.Calls(ctx, addr, "config|get"); c.addr == "" && c.user == "" && n != before+1 {
				t.Errorf("CONFIG GET sent %d times; want once", n-before)
			}
		})
	}
}

// TestEvictionPolicyOff: without an Observer a Limiter never asks.
func TestEvictionPolicyOff(t *testing.T) {
	srv := testredis.Start(t)
	ctx := context.Background()
	l, err := ratelimit.New(srv.Client(t), ratelimit.Config{Algorithm: ratelimit.TokenBucket, Limit: 10, Window: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for range 50 {
		if _, err := l.Allow(ctx, "subject"); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond)
	if n, err := testredis.Calls(ctx, srv.Addr, "config|get"); err != nil || n != 0 {
		t.Errorf("CONFIG GET sent %d times (%v); want never", n, err)
	}
}

// TestEvictionPolicyCluster: on a cluster every master is asked, and one
// that may evict is reported even when the others may not.
func TestEvictionPolicyCluster(t *testing.T) {
	c := testredis.StartCluster(t)
	ctx := context.Background()
	last := c.Nodes[len(c.Nodes)-1]
	admin := last.Client(t)
	if err := admin.ConfigSet(ctx, "maxmemory", "100mb").Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.ConfigSet(ctx, "maxmemory-policy", "volatile-lfu").Err(); err != nil {
		t.Fatal(err)
	}
	rec := &policyRecorder{}
	l, err := ratelimit.New(c.Client(t), ratelimit.Config{Algorithm: ratelimit.SlidingLog, Limit: 1000, Window: time.Minute,
		Prefix: testredis.Prefix(t), Timeout: 5 * time.Second}, ratelimit.WithObserver(rec))
	if err != nil {
		t.Fatal(err)
	}
	var reports []string
	for deadline := time.Now().Add(10 * time.Second); len(reports) == 0; {
		if _, err := l.Allow(ctx, "subject"); err != nil {
			t.Fatal(err)
		}
		if reports, _, _ = rec.got(); len(reports) == 0 && time.Now().After(deadline) {
			t.Fatal("no eviction policy reported in 10s; want \"volatile-lfu\" (one master's)")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if want := "volatile-lfu"; len(reports) != 1 || reports[0] != want {
		t.Errorf("reports = %q; want [%q]", reports, want)
	}
	for _, n := range c.Nodes {
		if calls, err := testredis.Calls(ctx, n.Addr, "config|get"); err != nil || calls != 1 {
			t.Errorf("master %s: CONFIG GET sent %d times (%v); want once", n.Addr, calls, err)
		}
	}
}
