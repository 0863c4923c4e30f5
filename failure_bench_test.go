package ratelimit_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/batch"
	"github.com/ratekit/ratelimit/breaker"
	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/strategy"
)

// benchKeys are the subjects the benchmarks spread decisions over.
var benchKeys = func() []string {
	k := make([]string, 1024)
	for i := range k {
		k[i] = fmt.Sprint("user:", i)
	}
	return k
}()

// runDecisions benchmarks l.Allow serially and in parallel, over many keys.
func runDecisions(b *testing.B, allow func(ctx context.Context, key string) (ratelimit.Result, error), wantDegraded bool) {
	ctx := context.Background()
	check := func(r ratelimit.Result, err error) {
		if err != nil || r.Degraded != wantDegraded {
			b.Fatalf("decision %+v, %v; want Degraded %v", r, err, wantDegraded)
		}
	}
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			check(allow(ctx, benchKeys[i%len(benchKeys)]))
			i++
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				check(allow(ctx, benchKeys[i%len(benchKeys)]))
				i++
			}
		})
	})
}

// BenchmarkDecision compares a decision on a healthy Redis with one made
// while Redis is down and the breaker is open, for each failure policy. Run
// it with
//
//	go test -run '^$' -bench BenchmarkDecision -benchmem .
func BenchmarkDecision(b *testing.B) {
	cfg := ratelimit.Config{Algorithm: ratelimit.SlidingLog, Limit: 1 << 30, Window: time.Minute, LocalShare: 0.5}

	b.Run("redis up", func(b *testing.B) {
		srv := testredis.Start(b)
		rdb := srv.Client(b)
		l, err := ratelimit.New(rdb, cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("limiter", func(b *testing.B) { runDecisions(b, l.Allow, false) })
		// a client that stops at the context's deadline is called on the
		// caller's goroutine: no goroutine and timer per decision
		cte := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
		b.Cleanup(func() { cte.Close() })
		lc, err := ratelimit.New(cte, cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("limiter, ContextTimeoutEnabled", func(b *testing.B) { runDecisions(b, lc.Allow, false) })
		// a caller's context that can be canceled (an HTTP request's) needs
		// a deadline context of its own
		cancelable, cancel := context.WithCancel(context.Background())
		b.Cleanup(cancel)
		b.Run("limiter, ContextTimeoutEnabled, cancelable ctx", func(b *testing.B) {
			runDecisions(b, func(_ context.Context, key string) (ratelimit.Result, error) {
				return lc.Allow(cancelable, key)
			}, false)
		})
		b.Run("strategy alone, ContextTimeoutEnabled", func(b *testing.B) {
			runDecisions(b, func(ctx context.Context, key string) (ratelimit.Result, error) {
				return ratelimit.StrategyOf(lc).AllowN(ctx, key, 1)
			}, false)
		})
		// the strategy alone: what the timeout guard and breaker add
		b.Run("strategy alone", func(b *testing.B) {
			runDecisions(b, func(ctx context.Context, key string) (ratelimit.Result, error) {
				return ratelimit.StrategyOf(l).AllowN(ctx, key, 1)
			}, false)
		})
		// the same production path through a batch.Client
		bc, err := batch.New(cte)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { bc.Close() })
		lb, err := ratelimit.New(bc, cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("batched limiter, ContextTimeoutEnabled, cancelable ctx", func(b *testing.B) {
			runDecisions(b, func(_ context.Context, key string) (ratelimit.Result, error) {
				return lb.Allow(cancelable, key)
			}, false)
		})
		b.Run("batched strategy alone, ContextTimeoutEnabled", func(b *testing.B) {
			runDecisions(b, func(ctx context.Context, key string) (ratelimit.Result, error) {
				return ratelimit.StrategyOf(lb).AllowN(ctx, key, 1)
			}, false)
		})
	})

	b.Run("redis down, breaker open", func(b *testing.B) {
		srv := testredis.Start(b)
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
		b.Cleanup(func() { rdb.Close() })
		srv.Stop()
		for _, p := range failurePolicies {
			b.Run(string(p), func(b *testing.B) {
				c := cfg
				c.OnFailure = p
				c.Timeout = 50 * time.Millisecond
				br := mustBreaker(b, 1, time.Hour)
				l, err := ratelimit.New(rdb, c, ratelimit.WithBreaker(br))
				if err != nil {
					b.Fatal(err)
				}
				l.Allow(context.Background(), "open the breaker")
				if s := br.State(); s != breaker.Open {
					b.Fatalf("breaker %v, want open", s)
				}
				runDecisions(b, l.Allow, true)
			})
		}
	})

	// Without a breaker (one that never opens), each decision waits for
	// the Timeout: what the breaker saves.
	b.Run("redis down, breaker never opens", func(b *testing.B) {
		srv := testredis.Start(b)
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
		b.Cleanup(func() { rdb.Close() })
		srv.Stop()
		c := cfg
		c.Timeout = 20 * time.Millisecond
		l, err := ratelimit.New(rdb, c, ratelimit.WithBreaker(mustBreaker(b, 1<<30, 0)))
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			if r, err := l.Allow(ctx, "user:1"); err != nil || !r.Degraded {
				b.Fatalf("decision %+v, %v; want degraded", r, err)
			}
		}
	})

	b.Run("denial cache hit", func(b *testing.B) {
		srv := testredis.Start(b)
		c := cfg
		c.Limit = 1
		l, err := ratelimit.New(srv.Client(b), c, ratelimit.WithDenyCache(4*len(benchKeys))) // room for every subject
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		for _, k := range benchKeys { // each subject spends its unit, then is denied
			l.Allow(ctx, k)
			if r, _ := l.Allow(ctx, k); r.Allowed {
				b.Fatalf("%s: second unit allowed", k)
			}
		}
		runDecisions(b, func(ctx context.Context, key string) (ratelimit.Result, error) {
			r, err := l.Allow(ctx, key)
			if r.Allowed {
				b.Fatalf("%s allowed", key)
			}
			return r, err
		}, false)
	})
}

// BenchmarkBreaker measures a decision made while the breaker is open,
// which reads the breaker's clock each time: the monotonic clock, and a
// client clock (breaker.WithClock). Neither allocates. It needs no Redis:
//
//	go test -run '^$' -bench Breaker -benchmem .
func BenchmarkBreaker(b *testing.B) {
	var ns atomic.Int64
	ns.Store(time.Now().UnixNano())
	client := strategy.ClockFunc(func() time.Time { return time.Unix(0, ns.Load()) })
	for _, c := range []struct {
		name string
		opts []breaker.Option
	}{
		{"monotonic clock", nil},
		{"client clock", []breaker.Option{breaker.WithClock(client)}},
	} {
		b.Run(c.name, func(b *testing.B) {
			var calls atomic.Int64
			br := mustBreaker(b, 1, time.Hour, c.opts...)
			l, err := ratelimit.Wrap(refusing(&calls), ratelimit.Config{OnFailure: ratelimit.FailClosed}, ratelimit.WithBreaker(br))
			if err != nil {
				b.Fatal(err)
			}
			l.Allow(context.Background(), "open the breaker")
			if s := br.State(); s != breaker.Open {
				b.Fatalf("breaker %v, want open", s)
			}
			runDecisions(b, l.Allow, true)
			if n := calls.Load(); n != 1 {
				b.Fatalf("%d calls reached the strategy, want 1", n)
			}
		})
	}
}
