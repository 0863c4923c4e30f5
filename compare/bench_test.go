package compare_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/batch"
	"github.com/ratekit/ratelimit/compare"
	"github.com/ratekit/ratelimit/fixedwindow"
	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/slidinglog"
	"github.com/ratekit/ratelimit/strategy"
)

// BenchmarkCompare measures what a candidate costs the caller on a real
// redis-server: a fixed window enforced alone, then with a sliding log
// candidate in the background (the default), inline and in the
// enforced call's pipeline (plain client only), through a plain
// client and a batch.Client, at concurrency 1 and 64. A background run
// waits for its last comparisons before the timer stops, so ns/op
// includes the candidate's work as a throughput cost; caller-ns/op is the
// mean time a caller spends inside AllowN (its latency), and dropped/op
// the share of comparisons dropped at the MaxInFlight bound.
//
//	go test -run '^$' -bench Compare -count 6 ./compare
func BenchmarkCompare(b *testing.B) {
	s := testredis.Shared(b)
	raw := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true, PoolSize: 128})
	b.Cleanup(func() { raw.Close() })
	bc, err := batch.New(raw)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { bc.Close() })
	lim := strategy.PerMinute(1 << 30)
	for _, client := range []struct {
		name string
		rdb  redis.Scripter
	}{{"plain", raw}, {"batch", bc}} {
		for _, conc := range []int{1, 64} {
			for _, mode := range []string{"alone", "background", "inline", "pipeline"} {
				if mode == "pipeline" && client.name == "batch" {
					continue // a batch.Client pipelines by itself
				}
				b.Run(client.name+"/c"+strconv.Itoa(conc)+"/"+mode, func(b *testing.B) {
					prefix := strategy.WithPrefix(testredis.Prefix(b))
					e, err := fixedwindow.New(client.rdb, lim, prefix)
					if err != nil {
						b.Fatal(err)
					}
					c, err := slidinglog.New(client.rdb, lim, prefix)
					if err != nil {
						b.Fatal(err)
					}
					var st strategy.Strategy = e
					var l *compare.Limiter
					switch mode {
					case "background":
						l, err = compare.New(e, c)
					case "inline":
						l, err = compare.New(e, c, compare.WithInline())
					case "pipeline":
						l, err = compare.New(e, c, compare.WithPipeline())
					}
					if err != nil {
						b.Fatal(err)
					}
					if l != nil {
						st = l
					}
					ctx := context.Background()
					var caller atomic.Int64 // ns spent inside AllowN, all callers
					b.ReportAllocs()
					b.ResetTimer()
					if conc == 1 {
						for i := 0; i < b.N; i++ {
							t0 := time.Now()
							if _, err := st.AllowN(ctx, "u"+strconv.Itoa(i%10000), 1); err != nil {
								b.Fatal(err)
							}
							caller.Add(int64(time.Since(t0)))
						}
					} else {
						var next atomic.Int64
						b.SetParallelism((conc + 1) / 2) // of GOMAXPROCS (2 on the report machine)
						b.RunParallel(func(pb *testing.PB) {
							for pb.Next() {
								i := next.Add(1)
								t0 := time.Now()
								if _, err := st.AllowN(ctx, "u"+strconv.FormatInt(i%10000, 10), 1); err != nil {
									b.Error(err)
									return
								}
								caller.Add(int64(time.Since(t0)))
							}
						})
					}
					b.ReportMetric(float64(caller.Load())/float64(b.N), "caller-ns/op")
					if l != nil {
						l.Close()
						a := l.Agreement()
						if a.CandidateErrors != 0 {
							b.Fatalf("candidate errors: %+v", a)
						}
						b.ReportMetric(float64(a.Dropped)/float64(b.N), "dropped/op")
					}
				})
			}
		}
	}
}
