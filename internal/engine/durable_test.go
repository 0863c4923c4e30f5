package engine_test

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/internal/engine"
	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/strategy"
)

// TestDurable runs durable calls (Replicas 1) on a primary with one
// replica: each returns only once the replica has its write (read on the
// replica right after), one WAIT per pipeline (INFO commandstats),
// NOSCRIPT recovered with the WAIT sent again; calls without Replicas
// send no WAIT. With the replica paused (SIGSTOP), durable calls fail as
// backend failures wrapping strategy.ErrNotReplicated within their
// timeout, and the others still pass.
func TestDurable(t *testing.T) {
	p := testredis.StartPair(t)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: p.Primary.Addr, MaxRetries: -1, ReadTimeout: 5 * time.Second})
	t.Cleanup(func() { rdb.Close() })
	replica := redis.NewClient(&redis.Options{Addr: p.Replica.Addr, MaxRetries: -1})
	t.Cleanup(func() { replica.Close() })
	var base int64 // the rig's own WAITs (testredis.WaitAcked)
	waits := func() int64 {
		t.Helper()
		n, err := testredis.Calls(ctx, p.Primary.Addr, "wait")
		if err != nil {
			t.Fatal(err)
		}
		return n - base
	}
	base = waits()
	const timeout = 500 * time.Millisecond
	call := func(key string, durable bool) *engine.Call {
		c := &engine.Call{Script: scriptA, Keys: []string{key}, Args: []any{key}}
		if durable {
			c.Replicas, c.ReplicaTimeout = 1, timeout
		}
		return c
	}
	onReplica := func(key string, want int64) {
		t.Helper()
		got, err := replica.Get(ctx, key).Int64()
		if err != nil || got != want {
			t.Errorf("replica: %s = %d, %v right after the durable call returned; want %d", key, got, err, want)
		}
	}

	// Scripts cached first, so that WAITs count pipelines, none sent again.
	for _, s := range []*redis.Script{scriptA, scriptB, engine.Many(scriptA), engine.Many(scriptB)} {
		if s != nil {
			if err := s.Load(ctx, rdb).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range 20 {
		c := engine.Run(ctx, rdb, *call("direct", true))
		if c.Err != nil {
			t.Fatalf("direct durable call %d: %v", i, c.Err)
		}
		onReplica("direct", int64(i+1))
	}
	if got := waits(); got != 20 {
		t.Errorf("WAIT ran %d times for 20 direct durable calls, want 20", got)
	}

	// One pipeline, two scripts and a call without Replicas: one WAIT.
	cs := []*engine.Call{call("p1", true), call("p2", true), call("p3", false),
		{Script: scriptB, Keys: []string{"p4"}, Args: []any{"x"}, Replicas: 1, ReplicaTimeout: timeout}}
	engine.Exec(ctx, rdb, cs)
	for i, c := range cs {
		if c.Err != nil {
			t.Fatalf("pipelined call %d: %v", i, c.Err)
		}
	}
	onReplica("p4", 1)
	if got := waits(); got != 21 {
		t.Errorf("WAIT ran %d times after one pipeline of durable calls, want 21 (one for the pipeline)", got)
	}

	// NOSCRIPT: sent again, on the same node, with a WAIT of its own (the
	// first pipeline's WAIT runs too).
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	cs = []*engine.Call{call("n1", true), call("n2", true)}
	engine.Send(ctx, engine.Target{Node: rdb}, cs)
	for i, c := range cs {
		if c.Err != nil {
			t.Fatalf("durable call %d after SCRIPT FLUSH: %v", i, c.Err)
		}
	}
	onReplica("n1", 1)
	onReplica("n2", 1)
	if got := waits(); got != 23 {
		t.Errorf("WAIT ran %d times after a pipeline answered NOSCRIPT and was sent again, want 23", got)
	}

	// Without Replicas: no WAIT.
	for range 5 {
		if c := engine.Run(ctx, rdb, *call("plain", false)); c.Err != nil {
			t.Fatal(c.Err)
		}
	}
	engine.Exec(ctx, rdb, []*engine.Call{call("q1", false), call("q2", false)})
	if got := waits(); got != 23 {
		t.Errorf("WAIT ran %d times, want still 23: calls without Replicas send none", got)
	}

	// The replica paused: durable calls fail within their timeout.
	if err := p.Replica.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer p.Replica.Signal(syscall.SIGCONT)
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("paused/%d calls", n), func(t *testing.T) {
			cs := make([]*engine.Call, n)
			for i := range cs {
				cs[i] = call(fmt.Sprintf("paused%d", i), true)
			}
			start := time.Now()
			engine.Exec(ctx, rdb, cs)
			took := time.Since(start)
			for i, c := range cs {
				if !errors.Is(c.Err, strategy.ErrNotReplicated) || !errors.Is(c.Err, strategy.ErrBackend) {
					t.Errorf("durable call %d with the replica paused: err %v, want ErrNotReplicated and ErrBackend", i, c.Err)
				}
			}
			if took < timeout-50*time.Millisecond || took > timeout+10*time.Second { // liveness, not speed
				t.Errorf("durable calls with the replica paused returned after %v, want about the WAIT timeout %v", took, timeout)
			}
		})
	}
	if c := engine.Run(ctx, rdb, *call("plain", false)); c.Err != nil {
		t.Errorf("a call without Replicas, the replica paused: %v", c.Err)
	}
	// A denial records nothing a failover could forget: it stands, the
	// replica paused or not, and only the allowed call fails.
	deny, allow := redis.NewScript("return {0, 5, 1000, 1000}"), redis.NewScript("return {1, 5, 4, 1000}")
	cs = []*engine.Call{
		{Script: deny, Keys: []string{"denied"}, Decode: true, Capacity: 5, Replicas: 1, ReplicaTimeout: timeout},
		{Script: allow, Keys: []string{"allowed"}, Decode: true, Capacity: 5, Replicas: 1, ReplicaTimeout: timeout},
	}
	engine.Exec(ctx, rdb, cs)
	if c := cs[0]; c.Err != nil || c.Result.Allowed || c.Result.Limit != 5 {
		t.Errorf("a durable denial with the replica paused = %+v, %v; want Redis's denial", c.Result, c.Err)
	}
	if c := cs[1]; !errors.Is(c.Err, strategy.ErrNotReplicated) {
		t.Errorf("a durable allowance with the replica paused: err %v, want ErrNotReplicated", c.Err)
	}
}
