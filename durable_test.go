package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/batch"
	"github.com/ratekit/ratelimit/breaker"
	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/strategy"
)

// TestDurableConfig: the durability fields are validated when the policy
// is built, the error naming the JSON field, and a policy document
// carries them.
func TestDurableConfig(t *testing.T) {
	base := `"algorithm": "fixed_window", "limit": 5, "window": "1m"`
	for _, c := range []struct {
		name, fields, field, says string
	}{
		{"negative replicas", `"replicas": -1, "replica_timeout": "10ms"`, "replicas", "replicas must be >= 0"},
		{"too many replicas", `"replicas": 101, "replica_timeout": "10ms"`, "replicas", "replicas must be <= 100"},
		{"no timeout", `"replicas": 1`, "replica_timeout", "replica_timeout must be > 0"},
		{"negative timeout", `"replicas": 1, "replica_timeout": "-1ms"`, "replica_timeout", "replica_timeout must be > 0"},
		{"timeout without replicas", `"replica_timeout": "10ms"`, "replica_timeout", "needs replicas > 0"},
		{"timeout not below timeout", `"replicas": 1, "replica_timeout": "250ms"`, "replica_timeout", "must be below timeout"},
		{"timeout not below the set timeout", `"replicas": 1, "replica_timeout": "1s", "timeout": "500ms"`, "replica_timeout", "must be below timeout"},
		{"in a candidate", `"candidate": {"algorithm": "sliding_log", "limit": 5, "window": "1m", "replicas": 1}`, "candidate.replicas", "replicas must be empty"},
	} {
		t.Run(c.name, func(t *testing.T) {
			doc := fmt.Sprintf(`{"login": {%s, %s}}`, base, c.fields)
			p, err := parsePolicies([]byte(doc))
			if err == nil {
				t.Fatalf("UnmarshalJSON(%s) = %+v; want an error", doc, p)
			}
			var fe *ratelimit.FieldError
			if !errors.As(err, &fe) || fe.JSON != c.field || !errors.Is(err, strategy.ErrInvalidOption) {
				t.Fatalf("err = %q; want a *FieldError of %q wrapping ErrInvalidOption", err, c.field)
			}
			if !strings.Contains(err.Error(), c.says) {
				t.Errorf("err = %q; want it to say %q", err, c.says)
			}
		})
	}

	p, err := parsePolicies([]byte(`{"login": {` + base + `, "replicas": 1, "replica_timeout": "50ms"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := p["login"]; got.Replicas != 1 || got.ReplicaTimeout != 50*time.Millisecond {
		t.Errorf("policy read: Replicas %d, ReplicaTimeout %v; want 1, 50ms", got.Replicas, got.ReplicaTimeout)
	}
	out, err := p.MarshalJSON()
	if err != nil || !strings.Contains(string(out), `"replicas":1,"replica_timeout":"50ms"`) {
		t.Errorf("MarshalJSON = %s, %v; want the durability fields", out, err)
	}

	var fe *ratelimit.FieldError
	st, err := ratelimit.New(nil, ratelimit.Config{Algorithm: ratelimit.FixedWindow, Limit: 5, Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ratelimit.Wrap(st, ratelimit.Config{Replicas: 1, ReplicaTimeout: time.Millisecond}); !errors.As(err, &fe) || fe.Field != "Replicas" {
		t.Errorf("Wrap(durable) err = %v; want a *FieldError of Replicas (the wrapped strategy carries its own)", err)
	}
}

// TestDurableReplica: on a primary with one replica, a durable decision
// returns once the replica holds its write (read there right after);
// with the replica paused (SIGSTOP), durable decisions follow the failure
// policy (FailClosed) within bounds, a cause wrapping ErrNotReplicated,
// and count for the breaker, while Peek and a limiter without the durability mode still get Redis's
// decisions; a caller's deadline shorter than the wait is the caller's
// error. Direct and batched.
func TestDurableReplica(t *testing.T) {
	p := testredis.StartPair(t)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: p.Primary.Addr, MaxRetries: -1, ContextTimeoutEnabled: true, ReadTimeout: 5 * time.Second})
	t.Cleanup(func() { rdb.Close() })
	replica := redis.NewClient(&redis.Options{Addr: p.Replica.Addr, MaxRetries: -1})
	t.Cleanup(func() { replica.Close() })
	bc, err := batch.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bc.Close() })
	prefix := testredis.Prefix(t)
	const replicaTimeout = 200 * time.Millisecond

	type run struct {
		name    string
		durable *ratelimit.Limiter
		plain   *ratelimit.Limiter
		causes  *causes
	}
	var runs []run
	for _, c := range []struct {
		name string
		rdb  redis.Scripter
	}{{"direct", rdb}, {"batched", bc}} {
		cs := &causes{}
		cfg := ratelimit.Config{Algorithm: ratelimit.SlidingLog, Limit: 1000, Window: time.Hour, OnFailure: ratelimit.FailClosed,
			Timeout: 2 * time.Second, Replicas: 1, ReplicaTimeout: replicaTimeout, Prefix: prefix + c.name + ":durable:"}
		d, err := ratelimit.New(c.rdb, cfg, ratelimit.WithObserver(cs))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Replicas, cfg.ReplicaTimeout, cfg.Prefix = 0, 0, prefix+c.name+":plain:"
		pl, err := ratelimit.New(c.rdb, cfg)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, run{c.name, d, pl, cs})
	}

	for _, r := range runs {
		for i := range 10 {
			key := fmt.Sprint("user", i)
			res, err := r.durable.Allow(ctx, key)
			if err != nil || res.Degraded || !res.Allowed {
				t.Fatalf("%s: durable Allow(%s) = %+v, %v; want allowed by Redis", r.name, key, res, err)
			}
			n, err := replica.Keys(ctx, prefix+r.name+":durable:*").Result()
			if err != nil || len(n) != i+1 {
				t.Fatalf("%s: replica holds %d keys right after durable decision %d (%v); want %d", r.name, len(n), i+1, err, i+1)
			}
		}
	}

	if err := p.Replica.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer p.Replica.Signal(syscall.SIGCONT)
	for _, r := range runs {
		var wg sync.WaitGroup
		for i := range 4 { // concurrent: batched, they share a pipeline and its WAIT
			wg.Go(func() {
				start := time.Now()
				res, err := r.durable.Allow(ctx, fmt.Sprint("paused", i))
				took := time.Since(start)
				if err != nil || !res.Degraded || res.Allowed {
					t.Errorf("%s: durable Allow with the replica paused = %+v, %v; want denied by FailClosed", r.name, res, err)
				}
				if took > replicaTimeout+10*time.Second { // liveness, not speed
					t.Errorf("%s: durable Allow with the replica paused took %v", r.name, took)
				}
			})
		}
		wg.Wait()
		if got := r.causes.notReplicated(); got == 0 {
			t.Errorf("%s: no degraded decision's cause wraps ErrNotReplicated (causes: %v)", r.name, r.causes.all())
		}
		if res, err := r.durable.Peek(ctx, "user0"); err != nil || res.Degraded || res.Remaining != 999 {
			t.Errorf("%s: durable Peek with the replica paused = %+v, %v; want Redis's (no WAIT), 999 remaining", r.name, res, err)
		}
		if res, err := r.plain.Allow(ctx, "user0"); err != nil || res.Degraded || !res.Allowed {
			t.Errorf("%s: Allow without the durability mode, the replica paused = %+v, %v; want allowed by Redis", r.name, res, err)
		}
		cctx, cancel := context.WithTimeout(ctx, replicaTimeout/4)
		res, err := r.durable.Allow(cctx, "deadline")
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, strategy.ErrBackend) {
			t.Errorf("%s: durable Allow under a deadline shorter than the wait = %+v, %v; want the caller's deadline, not a backend error", r.name, res, err)
		}
		// The breaker counts them: within its failures (5) it opens.
		open := false
		for i := 0; i < 2*breaker.DefaultFailures && !open; i++ {
			if _, err := r.durable.Allow(ctx, "breaker"); err != nil {
				t.Fatal(err)
			}
			open = r.causes.is(breaker.ErrOpen)
		}
		if !open {
			t.Errorf("%s: %d more unreplicated decisions and the breaker is still closed: they are not counted as failures (causes: %v)",
				r.name, 2*breaker.DefaultFailures, r.causes.all())
		}
	}
}

// causes is an Observer that keeps the causes of degraded decisions.
type causes struct {
	mu sync.Mutex
	c  []error
}

func (c *causes) Observe(_ context.Context, d ratelimit.Decision) {
	if d.Degraded {
		c.mu.Lock()
		c.c = append(c.c, d.Cause)
		c.mu.Unlock()
	}
}

func (c *causes) notReplicated() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, err := range c.c {
		if errors.Is(err, strategy.ErrNotReplicated) {
			n++
		}
	}
	return n
}

func (c *causes) is(target error) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, err := range c.c {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

func (c *causes) all() []error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]error(nil), c.c...)
}
