package compare_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
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
						l, err = compare.New(e, c, compare.WithBackground())
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

// BenchmarkCompareRatio measures the same configurations as
// BenchmarkCompare, interleaved: each round runs every mode for a slice
// of decisions in turn, so that a shared machine's changing load weighs
// on every mode alike, and reports, per mode, the median over rounds of
// its time per decision divided by the enforced strategy's alone in the
// same round (x-alone), both for the throughput (wall time) and for the
// caller's own time inside AllowN (caller-x-alone).
//
//	go test -run '^$' -bench CompareRatio -benchtime 1x ./compare
func BenchmarkCompareRatio(b *testing.B) {
	s := testredis.Shared(b)
	raw := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true, PoolSize: 128})
	b.Cleanup(func() { raw.Close() })
	bc, err := batch.New(raw)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { bc.Close() })
	lim := strategy.PerMinute(1 << 30)
	const rounds, slice = 15, 400
	for _, client := range []struct {
		name string
		rdb  redis.Scripter
	}{{"plain", raw}, {"batch", bc}} {
		for _, conc := range []int{1, 64} {
			b.Run(client.name+"/c"+strconv.Itoa(conc), func(b *testing.B) {
				prefix := strategy.WithPrefix(testredis.Prefix(b))
				e, _ := fixedwindow.New(client.rdb, lim, prefix)
				c, _ := slidinglog.New(client.rdb, lim, prefix)
				modes := []string{"alone", "background", "inline", "pipeline"}
				st := map[string]strategy.Strategy{"alone": e}
				var ls []*compare.Limiter
				for _, m := range modes[1:] {
					var opts []compare.Option
					switch m {
					case "background":
						opts = append(opts, compare.WithBackground())
					case "inline":
						opts = append(opts, compare.WithInline())
					case "pipeline":
						if client.name == "batch" {
							continue // a batch.Client pipelines by itself
						}
						opts = append(opts, compare.WithPipeline())
					}
					l, err := compare.New(e, c, opts...)
					if err != nil {
						b.Fatal(err)
					}
					ls = append(ls, l)
					st[m] = l
				}
				ctx := context.Background()
				// run makes slice decisions on conc goroutines and returns
				// the wall time and the callers' summed time.
				run := func(st strategy.Strategy, base int) (wall, caller time.Duration) {
					var next atomic.Int64
					var sum atomic.Int64
					t0 := time.Now()
					var wg sync.WaitGroup
					for range conc {
						wg.Go(func() {
							for {
								i := next.Add(1)
								if i > slice {
									return
								}
								k := "u" + strconv.Itoa((base+int(i))%10000)
								t := time.Now()
								if _, err := st.AllowN(ctx, k, 1); err != nil {
									b.Error(err)
									return
								}
								sum.Add(int64(time.Since(t)))
							}
						})
					}
					wg.Wait()
					if l, ok := st.(*compare.Limiter); ok {
						l.Wait() // its candidates' work counts in the wall time
					}
					return time.Since(t0), time.Duration(sum.Load())
				}
				wall := map[string][]float64{}
				caller := map[string][]float64{}
				for range b.N {
					for r := range rounds {
						var w0, c0 time.Duration
						for _, m := range modes {
							if st[m] == nil {
								continue
							}
							w, cl := run(st[m], r*slice)
							if m == "alone" {
								w0, c0 = w, cl
								continue
							}
							wall[m] = append(wall[m], float64(w)/float64(w0))
							caller[m] = append(caller[m], float64(cl)/float64(c0))
						}
					}
				}
				for _, m := range modes[1:] {
					if len(wall[m]) == 0 {
						continue
					}
					b.ReportMetric(median(wall[m]), m+"-x-alone")
					b.ReportMetric(median(caller[m]), m+"-caller-x-alone")
				}
				for _, l := range ls {
					l.Close()
					if a := l.Agreement(); a.CandidateErrors != 0 {
						b.Fatalf("candidate errors: %+v", a)
					}
				}
			})
		}
	}
}

func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}

// BenchmarkCompareTwins measures a local twin candidate (sliding log)
// beside a local twin (fixed window), inline and in the background,
// against the enforced twin alone.
//
//	go test -run '^$' -bench CompareTwins -count 6 ./compare
func BenchmarkCompareTwins(b *testing.B) {
	lim := strategy.PerMinute(1 << 30)
	for _, mode := range []string{"alone", "inline", "background"} {
		b.Run(mode, func(b *testing.B) {
			e, _ := fixedwindow.NewLocal(lim)
			c, _ := slidinglog.NewLocal(lim)
			var st strategy.Strategy = e
			var l *compare.Limiter
			switch mode {
			case "inline":
				l, _ = compare.New(e, c, compare.WithInline())
			case "background":
				l, _ = compare.New(e, c, compare.WithBackground(), compare.WithMaxInFlight(1024))
			}
			if l != nil {
				st = l
			}
			keys := make([]string, 10000)
			for i := range keys {
				keys[i] = "u" + strconv.Itoa(i)
			}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := st.AllowN(ctx, keys[i%len(keys)], 1); err != nil {
					b.Fatal(err)
				}
			}
			if l != nil {
				l.Close() // the background candidates' work counts
				b.ReportMetric(float64(l.Agreement().Dropped)/float64(b.N), "dropped/op")
			}
		})
	}
}
