package lease_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/lease"
	"github.com/ratekit/ratelimit/strategy"
)

// BenchmarkHotSubject: one subject, 64 callers, on a real redis-server,
// decided directly (one EVALSHA per decision) and through a lease, and
// the EVALSHA floor (a script that returns 1, the fastest any decision on
// Redis can be). It reports decisions/s and the Redis calls per decision.
// The limit is far above the demand: every decision is allowed (the
// compact log, whose limit cannot be, is left out).
func BenchmarkHotSubject(b *testing.B) {
	srv := testredis.Shared(b)
	lim := strategy.Limit{Limit: 1 << 40, Window: time.Second}
	b.Run("floor", func(b *testing.B) {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 64})
		defer rdb.Close()
		floor := redis.NewScript("return 1")
		ctx := context.Background()
		if err := floor.Load(ctx, rdb).Err(); err != nil {
			b.Fatal(err)
		}
		b.SetParallelism(max(64/runtime.GOMAXPROCS(0), 1))
		b.ReportAllocs()
		b.ResetTimer()
		start := time.Now()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := floor.EvalSha(ctx, rdb, []string{"hot"}).Err(); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "decisions/s")
		b.ReportMetric(1, "calls/decision")
	})
	for _, a := range algorithms {
		if a.name == "compactlog" {
			// its Limit is at most compactlog.MaxLimit per window, far
			// below this demand; leased, it decides as the sliding log
			continue
		}
		for _, mode := range []string{"direct", "leased"} {
			b.Run(a.name+"/"+mode, func(b *testing.B) {
				rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 64})
				defer rdb.Close()
				prefix := testredis.Prefix(b)
				l, err := lease.New(lim, func(lim strategy.Limit) (strategy.Strategy, error) {
					return a.build(rdb, lim, strategy.WithPrefix(prefix))
				})
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				if mode == "direct" {
					l.Close(ctx) // decides through the strategy, one call each
				}
				b.SetParallelism(max(64/runtime.GOMAXPROCS(0), 1))
				b.ReportAllocs()
				b.ResetTimer()
				start := time.Now()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if _, err := l.AllowN(ctx, "hot", 1); err != nil {
							b.Error(err)
							return
						}
					}
				})
				elapsed := time.Since(start)
				b.StopTimer()
				b.ReportMetric(float64(b.N)/elapsed.Seconds(), "decisions/s")
				calls := float64(b.N)
				if mode == "leased" {
					st := l.Stats()
					calls = float64(st.Leases) // refunds: none for these algorithms while leasing
				}
				b.ReportMetric(calls/float64(b.N), "calls/decision")
				l.Close(ctx)
			})
		}
	}
}
