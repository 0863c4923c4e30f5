package batch_test

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/batch"
	"github.com/ratekit/ratelimit/fixedwindow"
	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/strategy"
)

// BenchmarkSerial compares one goroutine's decisions sent directly and
// through a Client, on a real redis-server: with nothing else in flight
// the Client sends each call at once, so the two should be level.
func BenchmarkSerial(b *testing.B) {
	s := testredis.Shared(b)
	raw := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true})
	b.Cleanup(func() { raw.Close() })
	bc, err := batch.New(raw)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { bc.Close() })
	for _, tc := range []struct {
		name string
		rdb  redis.Scripter
	}{{"direct", raw}, {"batched", bc}} {
		b.Run(tc.name, func(b *testing.B) {
			st, err := fixedwindow.New(tc.rdb, strategy.PerMinute(100), strategy.WithPrefix(testredis.Prefix(b)))
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				if _, err := st.AllowN(ctx, "u"+strconv.Itoa(i%10000), 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRejectFullQueue measures a call refused with ErrQueueFull while
// MaxQueue calls wait behind a paused Redis: its cost must not grow with
// the queue (compare queue=100 with queue=10000).
func BenchmarkRejectFullQueue(b *testing.B) {
	for _, n := range []int{100, 10000} {
		b.Run("queue="+strconv.Itoa(n), func(b *testing.B) {
			s := testredis.Start(b)
			raw := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true, ReadTimeout: -1})
			b.Cleanup(func() { raw.Close() })
			rdb, err := batch.New(raw, batch.WithMaxInFlight(1), batch.WithMaxQueue(n))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { rdb.Close() })
			ctx := context.Background()
			if err := echo.Load(ctx, raw).Err(); err != nil {
				b.Fatal(err)
			}
			p := &pipes{}
			raw.AddHook(p)
			pause(b, s)
			go echo.Run(ctx, rdb, []string{"blocker"}, "x") // holds the only slot until Redis resumes
			sent(b, p, 1)
			waiting, leave := context.WithCancel(ctx)
			b.Cleanup(leave) // before Redis resumes
			for i := range n {
				go echo.Run(waiting, rdb, []string{"q" + strconv.Itoa(i)}, "x")
			}
			queued(b, rdb, n)
			keys, sha := []string{"refused"}, echo.Hash()
			b.Run("serial", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if err := rdb.EvalSha(ctx, sha, keys, "x").Err(); !errors.Is(err, batch.ErrQueueFull) {
						b.Fatal(err)
					}
				}
			})
			b.Run("parallel", func(b *testing.B) {
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if err := rdb.EvalSha(ctx, sha, keys, "x").Err(); !errors.Is(err, batch.ErrQueueFull) {
							b.Error(err)
							return
						}
					}
				})
			})
		})
	}
}

// BenchmarkParallel is the fixed window at 8 and 64 concurrent callers on
// 10,000 subjects, sent directly and through a Client, on a real
// redis-server: ns/op is the whole process's time per decision (Redis
// shares the machine), for CPU profiles of the client (-cpuprofile).
func BenchmarkParallel(b *testing.B) {
	s := testredis.Shared(b)
	raw := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true, PoolSize: 300})
	b.Cleanup(func() { raw.Close() })
	bc, err := batch.New(raw)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { bc.Close() })
	for _, conc := range []int{8, 64} {
		for _, tc := range []struct {
			name string
			rdb  redis.Scripter
		}{{"direct", raw}, {"batched", bc}} {
			b.Run(tc.name+"/c="+strconv.Itoa(conc), func(b *testing.B) {
				st, err := fixedwindow.New(tc.rdb, strategy.PerMinute(100), strategy.WithPrefix(testredis.Prefix(b)))
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				b.ReportAllocs()
				b.SetParallelism(max(1, conc/runtime.GOMAXPROCS(0)))
				var seq atomic.Int64
				b.RunParallel(func(pb *testing.PB) {
					i := int(seq.Add(1)) * 7919
					for pb.Next() {
						i++
						if _, err := st.AllowN(ctx, "u"+strconv.Itoa(i%10000), 1); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}

// BenchmarkDurable measures what the durability mode
// (strategy.WithReplicas(1, ...)) costs per decision on a primary with one
// replica: the fixed window, plain and durable, direct and batched, one
// goroutine (each decision waits for its own WAIT) and 64 (batched, one
// WAIT per pipeline).
func BenchmarkDurable(b *testing.B) {
	p := testredis.StartPair(b)
	raw := redis.NewClient(&redis.Options{Addr: p.Primary.Addr, ContextTimeoutEnabled: true, PoolSize: 64})
	b.Cleanup(func() { raw.Close() })
	bc, err := batch.New(raw)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { bc.Close() })
	for _, par := range []int{1, 64} {
		for _, tc := range []struct {
			name string
			rdb  redis.Scripter
		}{{"direct", raw}, {"batched", bc}} {
			for _, durable := range []bool{false, true} {
				name := "plain"
				opts := []strategy.Option{strategy.WithPrefix(testredis.Prefix(b))}
				if durable {
					name = "durable"
					opts = append(opts, strategy.WithReplicas(1, time.Second))
				}
				b.Run(tc.name+"/"+name+"/callers="+strconv.Itoa(par), func(b *testing.B) {
					st, err := fixedwindow.New(tc.rdb, strategy.PerMinute(1<<40), opts...)
					if err != nil {
						b.Fatal(err)
					}
					ctx := context.Background()
					b.ReportAllocs()
					var n atomic.Int64
					b.SetParallelism(max(1, par/runtime.GOMAXPROCS(0)))
					if par == 1 {
						for b.Loop() {
							if _, err := st.AllowN(ctx, "u"+strconv.Itoa(int(n.Add(1)%10000)), 1); err != nil {
								b.Fatal(err)
							}
						}
						return
					}
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							if _, err := st.AllowN(ctx, "u"+strconv.Itoa(int(n.Add(1)%10000)), 1); err != nil {
								b.Error(err)
								return
							}
						}
					})
				})
			}
		}
	}
}
