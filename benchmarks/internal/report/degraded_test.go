package report

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/benchmarks/internal/targets"
	"github.com/ratekit/ratelimit/strategy"
)

// deadRedis returns a client of a loopback port nothing listens on: every
// command fails at once, without retries.
func deadRedis(t *testing.T) *redis.Client {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { c.Close() })
	return c
}

// TestDegradedNotDecisions: while Redis fails, the facade's failure
// policy answers (fail open, Degraded set); the facade's Decider says so
// with targets.ErrDegraded, and a speed slice counts those answers apart:
// neither decisions nor errors, so decisions per second are those Redis
// made. A strategy called directly has no failure policy: its failures are
// errors.
func TestDegradedNotDecisions(t *testing.T) {
	lim := strategy.PerSecond(100)
	rdb := deadRedis(t)
	env := targets.Env{RDB: rdb, Limit: lim, Prefix: "rlbench:"}
	facade, err := targets.FacadeTarget("fixed_window").New(env)
	if err != nil {
		t.Fatal(err)
	}
	direct, err := targets.OursTargets()[0].New(env)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, c := range []struct {
		name         string
		d            targets.Decider
		wantDegraded bool
	}{
		{"facade", facade, true},
		{"direct", direct, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ok, err := c.d.Decide(ctx, "u1")
			if got := errors.Is(err, targets.ErrDegraded); got != c.wantDegraded || err == nil {
				t.Fatalf("%s: Decide = %v, %v; want an error, ErrDegraded %v", c.name, ok, err, c.wantDegraded)
			}
			ws := make([]worker, 2)
			slice(ctx, c.d, []string{"u1", "u2", "u3"}, 2, 30*time.Millisecond, 1, ws)
			var ops, errs, degraded int64
			for _, w := range ws {
				ops += w.ops
				errs += w.errs
				degraded += w.degraded
			}
			if c.wantDegraded && (ops != 0 || errs != 0 || degraded == 0) {
				t.Errorf("%s: slice counted %d decisions, %d errors, %d degraded; want 0, 0, > 0", c.name, ops, errs, degraded)
			}
			if !c.wantDegraded && (errs == 0 || errs != ops || degraded != 0) {
				t.Errorf("%s: slice counted %d decisions, %d errors, %d degraded; want every decision an error, 0 degraded", c.name, ops, errs, degraded)
			}
		})
	}
}

// TestDegradedInTable: a cell's degraded answers appear in the table's
// notes on rows, by target and concurrency; none, no note.
func TestDegradedInTable(t *testing.T) {
	for _, c := range []struct {
		name     string
		degraded int64
		want     bool
	}{
		{"degraded", 1234, true},
		{"none", 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &Report{Workload: Workload{Concurrency: []int{8}}, Rows: []Row{{
				Name: "facade fixed_window", Kind: "facade",
				Speed: []Cell{{Concurrency: 8, Decisions: 10, Seconds: 1, PerSecond: 10, Degraded: c.degraded}},
			}}}
			var b strings.Builder
			if err := r.WriteTable(&b); err != nil {
				t.Fatal(err)
			}
			note := "facade fixed_window: c=8: 1234 degraded answers"
			if got := strings.Contains(b.String(), note); got != c.want {
				t.Errorf("%s: table has %q: %v, want %v\n%s", c.name, note, got, c.want, b.String())
			}
		})
	}
}
